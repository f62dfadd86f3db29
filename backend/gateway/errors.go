package gateway

import (
	"context"
	"errors"
	"fmt"
)

// Error codes (SPEC §3). They appear in the "code" field of an error response.
const (
	CodeInvalidRequest  = "INVALID_REQUEST"   // malformed frame or params
	CodeUnauthorized    = "UNAUTHORIZED"      // missing or wrong token
	CodeForbidden       = "FORBIDDEN"         // authenticated but not allowed (ACL, scope)
	CodeNotFound        = "NOT_FOUND"         // unknown method or missing object
	CodeNotPaired       = "NOT_PAIRED"        // device is not paired (SPEC §7)
	CodeConflict        = "CONFLICT"          // concurrent modification, duplicate
	CodeUnavailable     = "UNAVAILABLE"       // temporarily unavailable; retryable
	CodeTimeout         = "TIMEOUT"           // the operation ran out of time; retryable
	CodePayloadTooLarge = "PAYLOAD_TOO_LARGE" // frame or argument over a limit
	CodeInternal        = "INTERNAL"          // bug or unexpected failure
)

// Error is a protocol error: the "error" object of a failed response
// ({"code","message","retryable"}). Handlers return it (possibly wrapped) to
// choose the code the client sees; see [Handler] for how other errors map.
type Error struct {
	// Code is one of the Code* constants.
	Code string `json:"code"`
	// Message is a human-readable explanation; clients show it as is.
	Message string `json:"message"`
	// Retryable tells the client that repeating the same request may succeed.
	Retryable bool `json:"retryable"`
	// Details are machine-readable facts about the error, e.g.
	// {"reason":"device_token_mismatch","repairable":true}; optional.
	Details map[string]any `json:"details,omitempty"`
}

// Error implements error as "CODE: message".
func (e *Error) Error() string {
	if e == nil {
		return "<nil gateway error>"
	}
	return e.Code + ": " + e.Message
}

// Errorf returns an *Error with the given code and a fmt-formatted message.
// Retryable is set for CodeUnavailable and CodeTimeout; change the field
// afterwards to override it.
func Errorf(code, format string, args ...any) *Error {
	return &Error{
		Code:      code,
		Message:   fmt.Sprintf(format, args...),
		Retryable: code == CodeUnavailable || code == CodeTimeout,
	}
}

// toError maps a handler error to the protocol error sent to the client:
// an *Error anywhere in the chain passes through, a deadline becomes TIMEOUT,
// a cancellation UNAVAILABLE (retryable), anything else INTERNAL with the
// error text.
func toError(err error) *Error {
	var ge *Error
	if errors.As(err, &ge) {
		if ge == nil {
			return &Error{Code: CodeInternal, Message: "handler returned a nil *gateway.Error"}
		}
		return ge
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Code: CodeTimeout, Message: err.Error(), Retryable: true}
	case errors.Is(err, context.Canceled):
		return &Error{Code: CodeUnavailable, Message: "request cancelled: " + err.Error(), Retryable: true}
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}
