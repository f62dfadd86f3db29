package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Protocol constants (docs/PROTOCOL.md).
const (
	// ProtocolVersion is the only protocol version this server speaks.
	ProtocolVersion = 1

	// MethodConnect is the handshake request; it is valid only as the first
	// frame and cannot be registered with [Server.Handle].
	MethodConnect = "connect"
	// EventChallenge is the first frame on every connection: {nonce, ts}.
	EventChallenge = "connect.challenge"
	// EventTick is sent every Options.TickInterval after the handshake: {ts}.
	EventTick = "tick"

	// RoleOperator is the role of the UI, browsers and the CLI; only
	// operator connections receive [Server.Broadcast] events.
	RoleOperator = "operator"
	// RoleNode is the role of node connections: paired devices lending
	// their capabilities (SPEC §7), or the local node (operator token).
	RoleNode = "node"
	// RoleUnpaired is the principal role of a device whose pairing request
	// is pending (never requested by a client: the handshake assigns it).
	RoleUnpaired = "unpaired"

	frameReq   = "req"
	frameRes   = "res"
	frameEvent = "event"
	helloType  = "hello-ok"
)

// RequestFrame is a client request: {"type":"req","id","method","params"}.
type RequestFrame struct {
	Type   string          `json:"type"`
	ID     string          `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// ResponseFrame answers the request with the same ID. Exactly one of Payload
// (OK true) and Error (OK false) is set.
type ResponseFrame struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	OK      bool            `json:"ok"`
	Payload json.RawMessage `json:"payload,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// EventFrame is a server push. Seq starts at 1 on each connection and
// increases by one with every event sent on it.
type EventFrame struct {
	Type    string          `json:"type"`
	Event   string          `json:"event"`
	Payload json.RawMessage `json:"payload"`
	Seq     uint64          `json:"seq"`
}

// Challenge is the payload of [EventChallenge]: a random hex nonce (signed by
// paired devices, SPEC §7) and the server time in Unix milliseconds.
type Challenge struct {
	Nonce string `json:"nonce"`
	TS    int64  `json:"ts"`
}

// Tick is the payload of [EventTick]: the server time in Unix milliseconds.
type Tick struct {
	TS int64 `json:"ts"`
}

// ClientInfo describes the connecting program (connect params "client").
type ClientInfo struct {
	ID         string `json:"id"`
	Version    string `json:"version"`
	Platform   string `json:"platform"`
	Mode       string `json:"mode"`
	InstanceID string `json:"instanceId"`
	// DisplayName is what the device calls itself ("Pixel 8", a host
	// name); optional, shown to the person when pairing.
	DisplayName string `json:"displayName,omitempty"`
}

// ConnectAuth carries the credentials of a connect request.
type ConnectAuth struct {
	// Token is the local operator token (see [LoadOrCreateToken]),
	// accepted on loopback listeners only.
	Token string `json:"token,omitempty"`
	// DeviceToken is the per device and role token a paired device got at
	// approval (with Device proof).
	DeviceToken string `json:"deviceToken,omitempty"`
	// SetupCode is a pairing setup code ("XXXX-XXXX", from the QR code or
	// typed), with Device proof.
	SetupCode string `json:"setupCode,omitempty"`
}

// DeviceProof is connect params "device": the device's public key and its
// signature over the v2 payload (package device, docs/PROTOCOL.md
// "Device identity"). PublicKey and Signature are base64; SignedAt is Unix
// milliseconds; Nonce the connect.challenge nonce; Algorithm "" means
// "ed25519".
type DeviceProof struct {
	ID        string `json:"id"`
	Algorithm string `json:"algorithm,omitempty"`
	PublicKey string `json:"publicKey"`
	Signature string `json:"signature"`
	SignedAt  int64  `json:"signedAt"`
	Nonce     string `json:"nonce"`
}

// ConnectParams are the params of the [MethodConnect] request (SPEC §3,
// issue 16). Roles lists the roles a pairing device asks for (default
// [Role]); Caps and Commands are what a node declares.
type ConnectParams struct {
	MinProtocol int            `json:"minProtocol"`
	MaxProtocol int            `json:"maxProtocol"`
	Client      ClientInfo     `json:"client"`
	Role        string         `json:"role"`
	Roles       []string       `json:"roles,omitempty"`
	Scopes      []string       `json:"scopes,omitempty"`
	Caps        []string       `json:"caps,omitempty"`
	Commands    []string       `json:"commands,omitempty"`
	Permissions map[string]any `json:"permissions,omitempty"`
	Auth        ConnectAuth    `json:"auth"`
	Device      *DeviceProof   `json:"device,omitempty"`
}

// Hello is the "hello-ok" payload of a successful connect response.
type Hello struct {
	Type     string     `json:"type"` // always "hello-ok"
	Protocol int        `json:"protocol"`
	Server   ServerInfo `json:"server"`
	Features Features   `json:"features"`
	Snapshot Snapshot   `json:"snapshot"`
	Policy   Policy     `json:"policy"`
	Auth     HelloAuth  `json:"auth"`
}

// HelloAuth is hello-ok "auth": who the connection was admitted as.
// Status is "operator" (the operator token), "paired" (a device token) or
// "pending" (an unpaired device; RequestID names its pairing request).
// DeviceTokens carries plaintext device tokens by role ("operator",
// "node") only when they are being delivered after an approval.
type HelloAuth struct {
	Role         string            `json:"role"`
	DeviceID     string            `json:"deviceId,omitempty"`
	Status       string            `json:"status"`
	RequestID    string            `json:"requestId,omitempty"`
	DeviceTokens map[string]string `json:"deviceTokens,omitempty"`
	GatewayID    string            `json:"gatewayId,omitempty"`
}

// Auth statuses of [HelloAuth].
const (
	AuthOperator = "operator"
	AuthPaired   = "paired"
	AuthPending  = "pending"
)

// ServerInfo identifies the server and this connection. GatewayID is the
// gateway's id (package gwid), "" when Options.GatewayID is unset.
type ServerInfo struct {
	Version   string `json:"version"`
	ConnID    string `json:"connId"`
	GatewayID string `json:"gatewayId,omitempty"`
}

// Features lists the registered methods and declared events, sorted.
// SideEffects are the methods with side effects (write kinds): each call
// of one must carry params.idempotencyKey. OperatorOnly are the methods a
// node connection may not call (kept for older clients); Callable are the
// methods this connection's principal may call.
type Features struct {
	Methods      []string `json:"methods"`
	Events       []string `json:"events"`
	SideEffects  []string `json:"sideEffects"`
	OperatorOnly []string `json:"operatorOnly"`
	Callable     []string `json:"callable"`
}

// Snapshot is the initial state sent in hello-ok, produced by
// Options.Snapshot. Elements are opaque to the gateway and encoded as JSON.
// Nil slices are sent as [].
type Snapshot struct {
	Presence []any `json:"presence"`
	Profiles []any `json:"profiles"`
}

// Policy advertises the connection limits: MaxPayload and MaxBufferedBytes in
// bytes, TickIntervalMs in milliseconds.
type Policy struct {
	MaxPayload       int64 `json:"maxPayload"`
	MaxBufferedBytes int64 `json:"maxBufferedBytes"`
	TickIntervalMs   int64 `json:"tickIntervalMs"`
}

// appendEvent appends an event frame; nameJSON and payload must be valid JSON.
func appendEvent(dst, nameJSON, payload []byte, seq uint64) []byte {
	dst = append(dst, `{"type":"event","event":`...)
	dst = append(dst, nameJSON...)
	dst = append(dst, `,"payload":`...)
	dst = append(dst, payload...)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendUint(dst, seq, 10)
	return append(dst, '}')
}

// encodeResponse builds a response frame. payload is valid JSON (never nil on
// success); e is nil on success.
func encodeResponse(id string, payload json.RawMessage, e *Error) []byte {
	f := ResponseFrame{Type: frameRes, ID: id, OK: e == nil}
	if e == nil {
		f.Payload = payload
	} else {
		f.Error = e
	}
	b, err := json.Marshal(f)
	if err != nil {
		// Only reachable if payload is not valid JSON, which invoke prevents.
		b, _ = json.Marshal(ResponseFrame{Type: frameRes, ID: id, Error: &Error{Code: CodeInternal, Message: "encode response: " + err.Error()}})
	}
	return b
}

// parseRequest decodes a client frame. On failure it returns the request id
// when it could be read (else "") and an INVALID_REQUEST error.
func parseRequest(data []byte) (RequestFrame, *Error) {
	var raw struct {
		Type   string          `json:"type"`
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if !utf8.Valid(data) {
		// RFC 6455 §5.6: text frames carry UTF-8. Refuse rather than let
		// invalid bytes reach a handler as U+FFFD.
		return RequestFrame{ID: peekID(data)}, Errorf(CodeInvalidRequest, "frame is not valid UTF-8 text")
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return RequestFrame{ID: peekID(data)}, Errorf(CodeInvalidRequest, "frame is not a JSON request object: %s", describeJSONError(err))
	}
	var req RequestFrame
	if len(raw.ID) > 0 && string(raw.ID) != "null" {
		if err := json.Unmarshal(raw.ID, &req.ID); err != nil {
			return req, Errorf(CodeInvalidRequest, "id must be a string")
		}
	}
	if raw.Type != frameReq {
		return req, Errorf(CodeInvalidRequest, "type must be %q, got %q", frameReq, raw.Type)
	}
	if req.ID == "" {
		return req, Errorf(CodeInvalidRequest, "missing id")
	}
	if raw.Method == "" {
		return req, Errorf(CodeInvalidRequest, "missing method")
	}
	req.Type, req.Method = raw.Type, raw.Method
	params := bytes.TrimSpace(raw.Params)
	switch {
	case len(params) == 0 || string(params) == "null":
		req.Params = json.RawMessage(`{}`)
	case params[0] != '{':
		return req, Errorf(CodeInvalidRequest, "params must be a JSON object")
	default:
		req.Params = params
	}
	return req, nil
}

// describeJSONError says what is wrong with a JSON document in the
// protocol's words, without Go type names.
func describeJSONError(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	case errors.As(err, &te):
		if te.Field == "" {
			return fmt.Sprintf("expected an object, got a JSON %s", te.Value)
		}
		return fmt.Sprintf("field %q must not be a JSON %s", te.Field, te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "truncated JSON"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// peekID extracts a top-level string "id" from a possibly truncated or
// invalid JSON object, or returns "".
func peekID(data []byte) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return ""
		}
		key, ok := t.(string)
		if !ok {
			return ""
		}
		if key == "id" {
			v, err := dec.Token()
			if err != nil {
				return ""
			}
			s, _ := v.(string)
			return s
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return ""
		}
	}
	return ""
}

// DecodeParams unmarshals the call's params (absent params decode as {})
// into v. A mismatch is an INVALID_REQUEST *Error that names the field and
// the expected JSON kind, never Go type names.
func DecodeParams(call *Call, v any) error {
	if len(call.Params) == 0 || string(call.Params) == "null" {
		return nil
	}
	if err := json.Unmarshal(call.Params, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return Errorf(CodeInvalidRequest, "%s: params.%s must be %s, not a JSON %s", call.Method, te.Field, jsonKind(te.Type.Kind().String()), te.Value)
		}
		return Errorf(CodeInvalidRequest, "%s: bad params: %s", call.Method, describeJSONError(err))
	}
	return nil
}

// jsonKind names the JSON kind that decodes into a Go kind.
func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	}
	return "a value of another kind"
}
