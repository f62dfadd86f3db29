// Package gateway is Atrium's protocol server (SPEC §3, docs/PROTOCOL.md): one
// HTTP port that serves the embedded UI at "/", a liveness probe at "/healthz"
// and the WebSocket gateway at "/ws" that the desktop window, browsers, phones
// and other computers all speak.
//
// The package is transport only. It knows nothing about memory, chat or
// profiles: other packages register request handlers with [Server.Handle],
// declare the events they emit with [Server.DeclareEvents] and push events
// with [Server.Broadcast] or [Server.Send].
//
// # Wire protocol
//
// Every frame is a JSON text frame:
//
//	request  {"type":"req","id":"<uuid>","method":"<name>","params":{...}}
//	response {"type":"res","id":"<same>","ok":true,"payload":{...}}
//	         {"type":"res","id":"<same>","ok":false,"error":{"code":"...","message":"...","retryable":false}}
//	event    {"type":"event","event":"<name>","payload":{...},"seq":<n>}
//
// On connect the server sends the event "connect.challenge" {nonce, ts}. The
// client's first frame must be a "connect" request carrying the operator token
// in params.auth.token; the response payload is [Hello] ("hello-ok"). A wrong
// token gets an UNAUTHORIZED response and close code 4001
// ([CloseUnauthorized]); any other first frame, or none within
// Options.HandshakeTimeout, closes the socket with code 4002
// ([CloseHandshakeFailed]) and a reason.
//
// After the handshake, requests are dispatched concurrently, each in its own
// goroutine, so responses may arrive in any order. Malformed frames get an
// INVALID_REQUEST response and oversized frames a PAYLOAD_TOO_LARGE response;
// the connection stays open in both cases. Events carry a per-connection seq
// that starts at 1 (the challenge) and increases by one for every event sent
// on that connection. A "tick" event {ts} is sent every
// Options.TickInterval. A connection whose outbound queue grows beyond
// Options.MaxBufferedBytes is closed with code 1008 and the reason
// "slow consumer: ..."; events are never silently dropped.
//
// Before hello-ok a connection may send one frame of at most
// Options.MaxPreAuthPayload bytes (64 KiB); a larger one closes it (4002)
// before more is buffered. Connections waiting for their handshake are
// capped in total and per IP address (HTTP 503 over a cap).
//
// Every method is registered with a [Kind]: whether it has side effects,
// and whether node connections may call it (operator-only methods answer
// them FORBIDDEN before the handler runs). Calls of a method with side
// effects must carry a non-empty params.idempotencyKey; they are
// deduplicated per ([Principal], method, key) for [IdempotencyWindow]: a
// repeat with the same params gets the first result, waiting for it if the
// first call is still running, and a repeat with other params is
// INVALID_REQUEST.
//
// All connections share one outbound budget (Options.MaxTotalBufferedBytes)
// besides their own cap: over it, the connection with the largest queue is
// closed (1008, "slow consumer: ..."), and a client that reads again within
// Options.CloseGrace receives that close frame.
//
// Every listener is served by [Server.HTTPServer]: each phase of a
// connection is bounded ([Timeouts]; a WebSocket, once upgraded, by the
// handshake timeout and Options.FrameWriteTimeout), and each request head
// is checked before net/http reads it, so that what net/http would refuse
// on its own (a malformed request line, header or Host, a head too large,
// not HTTP/1.x) and what the gateway does not take (a request body, an
// unknown Expect) is refused by the gateway, with the headers of every
// response. Every HTTP response carries a Content-Security-Policy,
// X-Frame-Options DENY, X-Content-Type-Options nosniff and Referrer-Policy
// no-referrer.
package gateway
