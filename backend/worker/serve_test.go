package worker

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/model"
)

// gateProvider streams "one", "two", then waits for ctx (prompt "block")
// or returns; any other prompt is answered with itself.
type gateProvider struct{}

func (gateProvider) Name() string  { return "gate" }
func (gateProvider) Model() string { return "g1" }
func (gateProvider) Stream(ctx context.Context, req model.Request, on func(model.Delta)) (model.Response, error) {
	p := req.Messages[len(req.Messages)-1].Content
	if p != "block" {
		on(model.Delta{Reasoning: "hmm"})
		on(model.Delta{Content: p})
		return model.Response{Content: p, Usage: model.Usage{PromptTokens: 3, CompletionTokens: 1}}, nil
	}
	on(model.Delta{Content: "one "})
	on(model.Delta{Content: "two"})
	<-ctx.Done()
	return model.Response{}, ctx.Err()
}

func TestServeRequestsInOrder(t *testing.T) {
	// OS pipes (kernel-buffered, as between real processes): the test
	// writes several requests before reading the answers.
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inR.Close()
	defer outR.Close()
	done := make(chan error, 1)
	go func() {
		done <- Serve(context.Background(), ServeOptions{In: inR, Out: outW, Provider: gateProvider{}, ProfileID: "p", InstanceID: "p-1", HeartbeatInterval: time.Hour})
		outW.Close()
	}()
	r := NewReader(outR, ReaderOptions{})
	next := func() Msg {
		t.Helper()
		m, err := r.Read()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	w := NewWriter(inW)
	send := func(typ, id string, payload any) {
		t.Helper()
		m, _ := NewMsg(typ, id, payload)
		m.SessionID = "s1"
		if err := w.Write(m); err != nil {
			t.Fatal(err)
		}
	}
	if m := next(); m.Type != TypeReady || m.ProfileID != "p" || !strings.Contains(string(m.Payload), `"model":"g1"`) {
		t.Fatalf("first line %+v", m)
	}
	send(TypePing, "p1", nil)
	io.WriteString(inW, "{bad\n")
	send("dance", "d1", nil)
	send(TypeRun, "", RunRequest{})
	for _, want := range []string{TypePong + " p1", TypeError + " ", TypeError + " d1", TypeError + " "} {
		if m := next(); m.Type+" "+m.ID != want {
			t.Fatalf("got %s %s (%s), want %s", m.Type, m.ID, m.Payload, want)
		}
	}

	send(TypeRun, "r1", RunRequest{Messages: []RunMessage{{Role: "user", Content: "block"}}})
	for _, want := range []string{"thinking", `chunk {"delta":"one ","seq":1}`, `chunk {"delta":"two","seq":2}`} {
		m := next()
		if got := strings.TrimSpace(m.Type + " " + string(m.Payload)); got != want || m.ID != "r1" || m.SessionID != "s1" {
			t.Fatalf("got %q (id %s, session %s), want %q", got, m.ID, m.SessionID, want)
		}
	}
	send(TypeRun, "r1", RunRequest{Messages: []RunMessage{{Role: "user", Content: "again"}}})
	if m := next(); m.Type != TypeError || !strings.Contains(string(m.Payload), "already running") {
		t.Fatalf("duplicate run id: %+v", m)
	}
	send(TypeCancel, "r1", nil)
	m := next()
	var f Final
	json.Unmarshal(m.Payload, &f)
	if m.Type != TypeCancelled || m.ID != "r1" || f.Content != "one two" {
		t.Fatalf("cancel: %+v", m)
	}

	send(TypeRun, "r2", RunRequest{Messages: []RunMessage{{Role: "user", Content: "ok"}}})
	var types []string
	for len(types) < 4 {
		types = append(types, next().Type)
	}
	if strings.Join(types, ",") != "thinking,chunk,chunk,final" {
		t.Fatalf("run r2: %v", types)
	}
	inW.Close() // stdin ends: Serve returns
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return at the end of its input")
	}
}
