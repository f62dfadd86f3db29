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
// Requests whose params contain a non-empty "idempotencyKey" are
// deduplicated per (method, key) for [IdempotencyWindow]: a repeat gets the
// first result, waiting for it if the first call is still running.
package gateway
