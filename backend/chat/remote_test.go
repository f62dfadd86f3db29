package chat

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/model"
)

// A failure of a run on an instance is UNAVAILABLE, retryable as the
// worker side said; model failures in this process are retryable when the
// server was unavailable or timed out.
func TestRunFailureCodes(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		code      string
		retryable bool
	}{
		{"worker crashed", &RemoteError{Kind: "crashed", Message: "exited: signal: killed", Retryable: true}, CodeUnavailable, true},
		{"worker stopped", fmt.Errorf("run: %w", &RemoteError{Kind: "stopped", Message: "stopped"}), CodeUnavailable, false},
		{"model refused in the worker", &RemoteError{Kind: "model", Message: "HTTP 401"}, CodeUnavailable, false},
		{"model unavailable", &model.Error{Kind: model.ErrUnavailable, Msg: "connection refused"}, CodeUnavailable, true},
		{"model timeout", &model.Error{Kind: model.ErrTimeout, Msg: "silent for 60 s"}, CodeTimeout, true},
		{"model rejected", &model.Error{Kind: model.ErrRejected, Msg: "bad key"}, CodeUnavailable, false},
		{"other", errors.New("disk full"), CodeInternal, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _ := classify(tc.err, context.Canceled, time.Minute)
			if code != tc.code || runRetryable(tc.err) != tc.retryable {
				t.Fatalf("classify = %s, retryable = %v; want %s, %v", code, runRetryable(tc.err), tc.code, tc.retryable)
			}
		})
	}
}

func TestInstancePrompt(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	tests := []struct{ persona, wantStart string }{
		{"You are Alpha, the release manager.\n你负责发布。\n", "You are Alpha, the release manager.\n你负责发布。\n\n"},
		{"  \n", "You are ops, an agent of Atrium"},
	}
	for _, tc := range tests {
		got := systemPrompt(instancePersona("ops", tc.persona), now, []string{ToolMemorySearch})
		if !strings.HasPrefix(got, tc.wantStart) || !strings.Contains(got, "memory_search") ||
			!strings.HasSuffix(got, "Current date: Tuesday 2026-12-01.") {
			t.Fatalf("instance prompt of %q = %q", tc.persona, got)
		}
	}
}
