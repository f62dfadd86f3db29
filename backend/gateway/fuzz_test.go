package gateway

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"
)

// maxFuzzFrame bounds the fuzzed frames: the gateway's own pre-auth limit is
// far smaller than a normal MaxPayload, and bigger inputs only slow the
// fuzzer down without reaching new code.
const maxFuzzFrame = 64 << 10

// FuzzParseRequest feeds any bytes to the request frame parser that every
// client frame goes through (the first one as connect, docs/PROTOCOL.md
// "Frames"), then decodes its params as ConnectParams as the handshake does.
// Properties: an accepted frame has type "req", a non-empty id and method,
// and params that are a JSON object; re-encoding it parses to the same
// frame; a refused frame is an INVALID_REQUEST whose response encodes as
// valid JSON carrying the id that could be read; connect params that decode
// survive a marshal/unmarshal round trip.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"type":"req","id":"00000000-0000-0000-0000-000000000000","method":"echo","params":{"q":"hello"}}`,
		`{"type":"req","id":"x1",`,
		`{"type":"req","method":"ping"}`,
		`{"type":"req","id":7,"method":"ping"}`,
		`{"type":"req","id":"a","method":"ping","params":[1]}`,
		`{"type":"req","id":"a","method":"ping","params":null}`,
		`{"type":"event","id":"a","method":"ping"}`,
		"{\"type\":\"req\",\"id\":\"\xff\",\"method\":\"ping\"}",
		`{"type":"req","id":"c1","method":"connect","params":{"minProtocol":1,"maxProtocol":1,"client":{"id":"cli","version":"1","platform":"linux","mode":"cli","instanceId":"i"},"role":"operator","auth":{"token":"t"}}}`,
		`{"type":"req","id":"c2","method":"connect","params":{"role":"node","caps":["camera"],"commands":["camera.snap"],"permissions":{"a":1.5,"b":[true,null]},"auth":{"setupCode":"ABCD-EFGH"},"device":{"id":"d","algorithm":"ed25519","publicKey":"AAAA","signature":"BBBB","signedAt":1,"nonce":"n"}}}`,
		`{"type":"req","id":"c3","method":"connect","params":{"minProtocol":"1"}}`,
		`[]`, `null`, ``, `{"id":"x","id":"y","type":"req","method":"m"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzFrame {
			return
		}
		req, perr := parseRequest(data)
		if perr != nil {
			if perr.Code != CodeInvalidRequest {
				t.Fatalf("refusal code %q, want %q", perr.Code, CodeInvalidRequest)
			}
			if !utf8.ValidString(req.ID) && utf8.Valid(data) {
				t.Fatalf("refusal id %q is not UTF-8", req.ID)
			}
			checkResponse(t, req.ID, encodeResponse(req.ID, nil, perr), false)
			return
		}
		if req.Type != frameReq || req.ID == "" || req.Method == "" {
			t.Fatalf("accepted frame %+v lacks type, id or method", req)
		}
		if len(req.Params) == 0 || req.Params[0] != '{' || !json.Valid(req.Params) {
			t.Fatalf("accepted params %q are not a JSON object", req.Params)
		}
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("marshal accepted frame: %v", err)
		}
		req2, perr := parseRequest(again)
		if perr != nil {
			t.Fatalf("re-encoded frame %s refused: %v", again, perr)
		}
		if req2.ID != req.ID || req2.Method != req.Method || req2.Type != req.Type {
			t.Fatalf("round trip changed the frame: %+v -> %+v", req, req2)
		}
		// Compare as values: Marshal re-escapes "&", "<" and ">" in params.
		var v1, v2 any
		if json.Unmarshal(req.Params, &v1) != nil || json.Unmarshal(req2.Params, &v2) != nil || !reflect.DeepEqual(v1, v2) {
			t.Fatalf("round trip changed params: %s -> %s", req.Params, req2.Params)
		}
		checkResponse(t, req.ID, encodeResponse(req.ID, json.RawMessage(`{}`), nil), true)

		var p ConnectParams
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return
		}
		b1, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("marshal connect params: %v", err)
		}
		var p2 ConnectParams
		if err := json.Unmarshal(b1, &p2); err != nil {
			t.Fatalf("re-decode connect params %s: %v", b1, err)
		}
		b2, err := json.Marshal(p2)
		if err != nil || !bytes.Equal(b1, b2) {
			t.Fatalf("connect params round trip: %s -> %s (%v)", b1, b2, err)
		}
	})
}

// checkResponse decodes an encoded response frame and checks its id and ok.
func checkResponse(t *testing.T, id string, b []byte, ok bool) {
	t.Helper()
	var r ResponseFrame
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("encoded response %q is not JSON: %v", b, err)
	}
	if r.Type != frameRes || r.OK != ok || (!ok && r.Error == nil) {
		t.Fatalf("encoded response %s: want ok=%v", b, ok)
	}
	if utf8.ValidString(id) && r.ID != id {
		t.Fatalf("encoded response id %q, want %q", r.ID, id)
	}
}
