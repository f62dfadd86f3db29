package talk

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestSpeechStartBound: a speech server that does not begin its answer
// within StartTimeout fails the sentence as WhySlow (its request
// cancelled), where before it held the sentence for the whole HTTP
// timeout; an answer that began in time streams on past the bound; a
// caller's own cancel is not called slow.
func TestSpeechStartBound(t *testing.T) {
	const start = 200 * time.Millisecond
	release := make(chan struct{})
	cancelled := make(chan struct{}, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/stuck/v1/audio/speech", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
			cancelled <- struct{}{}
		case <-release:
		}
	})
	mux.HandleFunc("/slowbody/v1/audio/speech", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "audio/mpeg")
		_, _ = w.Write([]byte("first"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write([]byte("-last"))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	// A client without its own short timeout: the start bound alone must end the wait.
	client := &http.Client{Timeout: 10 * time.Minute}

	t.Run("stuck", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, err := OpenAISpeech{BaseURL: srv.URL + "/stuck", Model: "m", Format: "mp3", HTTP: client, StartTimeout: start}.
			Synthesize(ctx, "Hello.", Voice{Name: "alloy", Speed: 1})
		var se *ServerError
		if !errors.As(err, &se) || se.Why != WhySlow || !errors.Is(err, ErrTTS) {
			t.Fatalf("a server that never begins its answer: %v, want a ServerError with why %q", err, WhySlow)
		}
		select {
		case <-cancelled:
		case <-ctx.Done():
			t.Fatal("the stuck request was not cancelled")
		}
	})
	t.Run("slow body", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		a, err := OpenAISpeech{BaseURL: srv.URL + "/slowbody", Model: "m", Format: "mp3", HTTP: client, StartTimeout: start}.
			Synthesize(ctx, "Hello.", Voice{Name: "alloy", Speed: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Body.Close()
		buf := make([]byte, 5)
		if _, err := io.ReadFull(a.Body, buf); err != nil || string(buf) != "first" {
			t.Fatalf("first part %q, %v", buf, err)
		}
		time.Sleep(3 * start) // the answer began: the start bound must not cut its body
		release <- struct{}{}
		rest, err := io.ReadAll(a.Body)
		if err != nil || string(rest) != "-last" {
			t.Fatalf("the rest of an answer that began in time: %q, %v", rest, err)
		}
	})
	t.Run("caller cancels", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(start/4, cancel)
		_, err := OpenAISpeech{BaseURL: srv.URL + "/stuck", Model: "m", Format: "mp3", HTTP: client, StartTimeout: time.Hour}.
			Synthesize(ctx, "Hello.", Voice{Name: "alloy", Speed: 1})
		var se *ServerError
		if !errors.As(err, &se) || se.Why == WhySlow || !errors.Is(err, context.Canceled) {
			t.Fatalf("a request its caller cancelled: %v, want a ServerError of context.Canceled, not called slow", err)
		}
	})
}
