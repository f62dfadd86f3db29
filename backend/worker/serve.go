package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/atrium-dev/atrium/backend/model"
)

// DefaultHeartbeatInterval is how often a worker writes a heartbeat.
const DefaultHeartbeatInterval = 2 * time.Second

// ServeOptions configure Serve. In, Out and Provider are required.
type ServeOptions struct {
	// In carries the parent's requests; Out receives the worker's events.
	In  io.Reader
	Out io.Writer
	// Provider answers runs.
	Provider model.Provider
	// ProfileID and InstanceID name this worker in its events.
	ProfileID, InstanceID string
	// HeartbeatInterval between two heartbeats. Default DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// MaxLineBytes caps a request line. Default DefaultMaxLineBytes.
	MaxLineBytes int
	// Logger (stderr in the worker process). Default slog.Default().
	Logger *slog.Logger
}

// Serve runs the worker loop (docs/PROTOCOL.md, "Worker line protocol"):
// it writes ready, then a heartbeat every HeartbeatInterval, and answers
// requests until In ends or ctx is done; then it cancels the runs in
// progress, waits for them, and returns nil (or the write error that
// stopped it). A bad request line is answered by an error event without
// an id and the loop goes on.
func Serve(ctx context.Context, o ServeOptions) error {
	if o.In == nil || o.Out == nil || o.Provider == nil {
		return errors.New("worker: Serve needs In, Out and Provider")
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &server{o: o, w: NewWriter(o.Out), runs: map[string]context.CancelFunc{}}
	defer s.wg.Wait() // runs after cancel below: the runs see ctx done, then end
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	if err := s.send(TypeReady, "", "", ReadyInfo{PID: os.Getpid(), InstanceID: o.InstanceID,
		Provider: o.Provider.Name(), Model: o.Provider.Model(), HeartbeatMs: o.HeartbeatInterval.Milliseconds()}); err != nil {
		return err
	}
	errc := make(chan error, 2)
	go func() { errc <- s.heartbeats(ctx) }()

	msgs := make(chan request)
	go func() { errc <- s.readLoop(ctx, msgs) }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			cancel()
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case m := <-msgs:
			s.handle(ctx, m)
		}
	}
}

type server struct {
	o    ServeOptions
	w    *Writer
	mu   sync.Mutex
	runs map[string]context.CancelFunc
	wg   sync.WaitGroup
}

func (s *server) send(typ, id, session string, payload any) error {
	m, err := NewMsg(typ, id, payload)
	if err != nil {
		return err
	}
	m.ProfileID, m.SessionID = s.o.ProfileID, session
	return s.w.Write(m)
}

func (s *server) heartbeats(ctx context.Context) error {
	t := time.NewTicker(s.o.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := s.send(TypeHeartbeat, "", "", nil); err != nil {
				return err
			}
		}
	}
}

// readLoop hands requests to Serve's loop; it returns io.EOF at the end of
// input and answers bad lines itself.
func (s *server) readLoop(ctx context.Context, out chan<- request) error {
	r := NewReader(s.o.In, ReaderOptions{MaxLineBytes: s.o.MaxLineBytes})
	for {
		m, err := r.Read()
		switch {
		case err == nil:
			select {
			case out <- request{m: m}:
			case <-ctx.Done():
				return nil
			}
		case errors.Is(err, ErrLineTooLong), errors.Is(err, ErrMalformed):
			// Answered in order with the requests around it (see handle).
			s.o.Logger.Warn("bad request line", "instance", s.o.InstanceID, "err", err)
			select {
			case out <- request{bad: err}:
			case <-ctx.Done():
				return nil
			}
		default:
			return err
		}
	}
}

// request is one line handed from the read loop to Serve's loop: a
// message, or the error of a rejected line (answered in order).
type request struct {
	m   Msg
	bad error
}

func (s *server) handle(ctx context.Context, r request) {
	if r.bad != nil {
		s.reply(s.send(TypeError, "", "", ErrorInfo{Message: r.bad.Error(), Kind: "protocol"}))
		return
	}
	m := r.m
	switch m.Type {
	case TypePing:
		s.reply(s.send(TypePong, m.ID, m.SessionID, nil))
	case TypeCancel:
		s.mu.Lock()
		c := s.runs[m.ID]
		s.mu.Unlock()
		if c != nil {
			c()
		}
	case TypeRun:
		s.startRun(ctx, m)
	default:
		s.reply(s.send(TypeError, m.ID, m.SessionID, ErrorInfo{Message: fmt.Sprintf("unknown request type %q", m.Type), Kind: "request"}))
	}
}

// reply logs a failed write; the read loop ends the worker when Out is gone.
func (s *server) reply(err error) {
	if err != nil {
		s.o.Logger.Error("write to parent failed", "instance", s.o.InstanceID, "err", err)
	}
}

func (s *server) startRun(ctx context.Context, m Msg) {
	var req RunRequest
	err := json.Unmarshal(m.Payload, &req)
	if err == nil && (m.ID == "" || len(req.Messages) == 0) {
		err = errors.New("a run needs an id and at least one message")
	}
	if err != nil {
		s.reply(s.send(TypeError, m.ID, m.SessionID, ErrorInfo{Message: "run: " + err.Error(), Kind: "request"}))
		return
	}
	s.mu.Lock()
	if _, dup := s.runs[m.ID]; dup {
		s.mu.Unlock()
		s.reply(s.send(TypeError, m.ID, m.SessionID, ErrorInfo{Message: "run: id " + m.ID + " is already running", Kind: "request"}))
		return
	}
	rctx, cancel := context.WithCancel(ctx)
	s.runs[m.ID] = cancel
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			delete(s.runs, m.ID)
			s.mu.Unlock()
			cancel()
		}()
		s.run(rctx, m, req)
	}()
}

func (s *server) run(ctx context.Context, m Msg, req RunRequest) {
	s.reply(s.send(TypeThinking, m.ID, m.SessionID, nil))
	msgs := make([]model.Message, len(req.Messages))
	for i, x := range req.Messages {
		msgs[i] = model.Message{Role: x.Role, Content: x.Content, ToolCalls: x.ToolCalls, ToolCallID: x.ToolCallID, Name: x.Name}
	}
	seq := 0
	var text strings.Builder
	resp, err := s.o.Provider.Stream(ctx, model.Request{Model: req.Model, Messages: msgs, Tools: req.Tools}, func(d model.Delta) {
		if d.Reasoning != "" {
			seq++
			s.reply(s.send(TypeChunk, m.ID, m.SessionID, Chunk{Delta: d.Reasoning, Seq: seq, Reasoning: true}))
		}
		if d.Content != "" {
			seq++
			text.WriteString(d.Content)
			s.reply(s.send(TypeChunk, m.ID, m.SessionID, Chunk{Delta: d.Content, Seq: seq}))
		}
	})
	fin := Final{Content: resp.Content, PromptTokens: resp.Usage.PromptTokens, CompletionTokens: resp.Usage.CompletionTokens,
		ToolCalls: resp.ToolCalls, FinishReason: resp.FinishReason}
	if fin.Content == "" {
		fin.Content = text.String()
	}
	switch {
	case err == nil:
		s.reply(s.send(TypeFinal, m.ID, m.SessionID, fin))
	case ctx.Err() != nil:
		s.reply(s.send(TypeCancelled, m.ID, m.SessionID, fin))
	default:
		var me *model.Error
		retry := errors.As(err, &me) && (errors.Is(err, model.ErrUnavailable) || errors.Is(err, model.ErrTimeout))
		s.reply(s.send(TypeError, m.ID, m.SessionID, ErrorInfo{Message: err.Error(), Kind: "model", Retryable: retry}))
	}
}
