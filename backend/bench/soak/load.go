package soak

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/atrium-dev/atrium/backend/atrium"
	"github.com/atrium-dev/atrium/backend/device"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/nodes"
)

// Files each driver rotates over: the workspace stays the same size, so a
// growing RSS is not the index growing.
const (
	appFiles  = 30
	mcpFiles  = 20
	diskFiles = 20
)

// chat sends a message to the main profile on a connection of its own and
// waits for the run's end (the scripted model answers), then again.
func (r *run) chat(ctx context.Context) {
	c, err := r.dialAdmin(ctx, "soak-chat")
	if err != nil {
		r.op("chat", err)
		return
	}
	defer c.Close()
	for n := 0; n == 0 || pause(ctx, 4*r.o.Pace); n++ {
		r.op("chat", r.chatOnce(ctx, c, n))
	}
}

func (r *run) chatOnce(ctx context.Context, c *gateway.Client, n int) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	var res struct {
		RunID string `json:"runId"`
	}
	key := fmt.Sprintf("soak-chat-%d", n)
	if err := c.Call(cctx, "chat.send", map[string]any{"profileId": "main", "sessionId": "soak",
		"message": fmt.Sprintf("soak message %d: 你好", n), "idempotencyKey": key}, &res); err != nil {
		return fmt.Errorf("chat.send: %w", err)
	}
	for {
		select {
		case <-cctx.Done():
			return fmt.Errorf("run %s: no end: %w", res.RunID, cctx.Err())
		case e, open := <-c.Events():
			if !open {
				return fmt.Errorf("run %s: the connection closed", res.RunID)
			}
			if e.Event != "chat.final" && e.Event != "chat.error" && e.Event != "chat.cancelled" {
				continue
			}
			var p struct {
				RunID string `json:"runId"`
			}
			if json.Unmarshal(e.Payload, &p) != nil || p.RunID != res.RunID {
				continue
			}
			if e.Event != "chat.final" {
				return fmt.Errorf("run %s: %s %.300s", res.RunID, e.Event, e.Payload)
			}
			return nil
		}
	}
}

// writes replaces files through the gateway's memory.write with the
// version it last got (a base version, as the UI does).
func (r *run) writes(ctx context.Context) {
	versions := map[string]string{}
	for n := 0; n == 0 || pause(ctx, r.o.Pace); n++ {
		path := fmt.Sprintf("memory/soak/app-%02d.md", n%appFiles)
		tok := r.token("app")
		var res struct {
			Version  string          `json:"version"`
			Conflict json.RawMessage `json:"conflict"`
		}
		p := map[string]any{"path": path, "content": "# App write\n\nToken " + tok + ".\n", "mode": "replace",
			"idempotencyKey": "soak-" + tok}
		if v := versions[path]; v != "" {
			p["baseVersion"] = v
		}
		err := r.call(ctx, "memory.write", p, &res)
		if err == nil && len(res.Conflict) > 0 && string(res.Conflict) != "null" {
			err = fmt.Errorf("memory.write %s: conflict %s", path, res.Conflict)
		}
		if err == nil {
			versions[path] = res.Version
			r.acked(path, tok)
		}
		r.op("memory.write", err)
	}
}

// noteLines appends lines to the main role's daily log (memory.note).
func (r *run) noteLines(ctx context.Context) {
	for n := 0; n == 0 || pause(ctx, 2*r.o.Pace); n++ {
		tok := r.token("note")
		var res struct {
			Path string `json:"path"`
		}
		err := r.call(ctx, "memory.note", map[string]any{"text": "soak note " + tok, "idempotencyKey": "soak-" + tok}, &res)
		if err == nil {
			r.mu.Lock()
			r.notes = append(r.notes, ackedNote{path: res.Path, token: tok})
			r.mu.Unlock()
		}
		r.op("memory.note", err)
	}
}

// searches asks memory.search for fixed questions and for tokens written
// lately.
func (r *run) searches(ctx context.Context) {
	queries := []string{"launch plan", "Bluebird", "发布代号", "what did we decide about chapter 3?"}
	for n := 0; n == 0 || pause(ctx, r.o.Pace); n++ {
		q := queries[n%len(queries)]
		if n%2 == 1 {
			q = fmt.Sprintf("soakappx%dq", max(int(r.seq.Load())-rand.IntN(20), 1))
		}
		r.op("memory.search", r.call(ctx, "memory.search", map[string]any{"query": q}, nil))
	}
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	rt    http.RoundTripper
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(req)
}

// mcpHTTP is an MCP client of /mcp as role writer (its own token): it
// writes, reads and searches, and opens a new session every 20 calls.
func (r *run) mcpHTTP(ctx context.Context) {
	var created struct {
		Token string `json:"token"`
	}
	if err := r.call(ctx, atrium.MethodMCPTokenCreate, map[string]any{"name": "soak", "role": "writer", "idempotencyKey": "soak-mcp-token"}, &created); err != nil {
		r.op("mcp.http", err)
		return
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: bearer{token: created.Token, rt: tr}, Timeout: 2 * time.Minute}
	versions := map[string]string{}
	for n := 0; ctx.Err() == nil; {
		cl := mcp.NewClient(&mcp.Implementation{Name: "soak-http", Version: "1"}, nil)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		cs, err := cl.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: "http://" + r.addr + "/mcp", HTTPClient: hc}, nil)
		cancel()
		r.op("mcp.http.session", err)
		if err != nil {
			if !pause(ctx, 4*r.o.Pace) {
				return
			}
			continue
		}
		for i := 0; i < 20 && (i == 0 || pause(ctx, r.o.Pace)); i, n = i+1, n+1 {
			r.mcpCalls(ctx, cs, "mcp.http", fmt.Sprintf("memory/roles/writer/mcp-%02d.md", n%mcpFiles), versions, n)
		}
		_ = cs.Close()
	}
}

// mcpStdio starts `atrium mcp --as writer` (which goes through the
// running app), makes a few calls and ends it, again and again.
func (r *run) mcpStdio(ctx context.Context) {
	versions := map[string]string{}
	for n := 0; n == 0 || pause(ctx, 8*r.o.Pace); n++ {
		cmd := r.o.Command("mcp", "--as", "writer", "--home", r.home, "--workspace", r.ws)
		cl := mcp.NewClient(&mcp.Implementation{Name: "soak-stdio", Version: "1"}, nil)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		cs, err := cl.Connect(cctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, nil)
		cancel()
		r.op("mcp.stdio.process", err)
		if err != nil {
			continue
		}
		r.mcpCalls(ctx, cs, "mcp.stdio", fmt.Sprintf("memory/roles/writer/stdio-%02d.md", n%mcpFiles), versions, n)
		_ = cs.Close()
	}
}

// mcpCalls is one round of an MCP client: memory_write (replace, with the
// version it last got), memory_get of it, memory_search for its token.
func (r *run) mcpCalls(ctx context.Context, cs *mcp.ClientSession, kind, path string, versions map[string]string, n int) {
	call := func(tool string, args map[string]any, out any) error {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			return fmt.Errorf("%s: %w", tool, err)
		}
		if res.IsError {
			var b strings.Builder
			for _, c := range res.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					b.WriteString(tc.Text)
				}
			}
			return fmt.Errorf("%s: tool error: %s", tool, b.String())
		}
		if out != nil {
			raw, err := json.Marshal(res.StructuredContent)
			if err == nil {
				err = json.Unmarshal(raw, out)
			}
			if err != nil {
				return fmt.Errorf("%s: structured result: %w", tool, err)
			}
		}
		return nil
	}
	tok := r.token(strings.ReplaceAll(kind, ".", ""))
	args := map[string]any{"path": path, "content": "# MCP write\n\nToken " + tok + ".\n", "mode": "replace"}
	if v := versions[path]; v != "" {
		args["baseVersion"] = v
	}
	var w struct {
		Version  string          `json:"version"`
		Conflict json.RawMessage `json:"conflict"`
	}
	werr := call("memory_write", args, &w)
	if werr == nil && len(w.Conflict) > 0 && string(w.Conflict) != "null" {
		werr = fmt.Errorf("memory_write %s: conflict %s", path, w.Conflict)
	}
	if werr == nil {
		versions[path] = w.Version
		r.acked(path, tok)
	}
	r.op(kind+".write", werr)
	var g struct {
		Text string `json:"text"`
	}
	// Only this client writes path: a write it was told is done must
	// be what it reads next.
	err := call("memory_get", map[string]any{"path": path}, &g)
	if err == nil && werr == nil && !strings.Contains(g.Text, tok) {
		err = fmt.Errorf("memory_get %s: the write just acknowledged (%s) is not there", path, tok)
	}
	r.op(kind+".get", err)
	r.op(kind+".search", call("memory_search", map[string]any{"query": []string{"launch plan", "Bluebird", tok}[n%3]}, nil))
}

// disk edits the workspace behind the app's back: writes files with a new
// token, now and then deletes one.
func (r *run) disk(ctx context.Context) {
	for n := 0; n == 0 || pause(ctx, 4*r.o.Pace); n++ {
		rel := fmt.Sprintf("memory/disk/d-%02d.md", n%diskFiles)
		p := filepath.Join(r.ws, filepath.FromSlash(rel))
		var err error
		tok := ""
		if n%7 == 6 {
			if err = os.Remove(p); errors.Is(err, os.ErrNotExist) {
				err = nil
			}
		} else {
			tok = r.token("disk")
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				err = os.WriteFile(p, []byte("# Edited on disk\n\nToken "+tok+".\n"), 0o644)
			}
		}
		if err == nil {
			r.acked(rel, tok)
		}
		r.op("disk.edit", err)
	}
}

// target is a phone or a node the invokes driver may call: up while it is
// connected; invoke holds mu for reading, and whoever takes it down holds
// it for writing, so no invoke is in flight when it goes.
type target struct {
	mu      sync.RWMutex
	up      bool
	id      string
	command string
	params  map[string]any
}

func (r *run) addDevice(d *target) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.devices = append(r.devices, d)
}

// invokes calls node.invoke on a random device that is up: location.get
// on phones, system.which on nodes.
func (r *run) invokes(ctx context.Context) {
	for n := 0; n == 0 || pause(ctx, 2*r.o.Pace); n++ {
		r.mu.Lock()
		ds := append([]*target(nil), r.devices...)
		r.mu.Unlock()
		if len(ds) == 0 {
			continue
		}
		d := ds[rand.IntN(len(ds))]
		d.mu.RLock()
		if !d.up {
			d.mu.RUnlock()
			continue
		}
		var res struct {
			OK    bool            `json:"ok"`
			Error json.RawMessage `json:"error"`
		}
		err := r.call(ctx, "node.invoke", map[string]any{"nodeId": d.id, "command": d.command, "params": d.params,
			"timeoutMs": 60000, "idempotencyKey": fmt.Sprintf("soak-invoke-%d", n)}, &res)
		d.mu.RUnlock()
		if err == nil && !res.OK {
			err = fmt.Errorf("node.invoke %s on %s: %s", d.command, d.id, res.Error)
		}
		r.op("node.invoke", err)
	}
}

// pairingCode is device.pair.code's answer (what a phone reads from the
// QR code).
type pairingCode struct {
	Code      string `json:"code"`
	URL       string `json:"url"`
	GatewayID string `json:"gatewayId"`
}

func (r *run) pairCode(ctx context.Context) (pairingCode, error) {
	var pc pairingCode
	err := r.call(ctx, "device.pair.code", map[string]any{"idempotencyKey": fmt.Sprintf("soak-code-%d", r.seq.Add(1))}, &pc)
	return pc, err
}

// phone i pairs with a new key, then connects, answers location.get,
// disconnects after PhoneCycle and connects again; every fourth cycle it
// is removed and pairs again with a new key (a new phone).
func (r *run) phone(ctx context.Context, i int) {
	d := &target{command: "location.get", params: map[string]any{}}
	r.addDevice(d)
	var key *device.PrivateKey
	tok := ""
	dial := func(o gateway.ClientOptions) (*gateway.Client, error) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		o.URL, o.GatewayID, o.Role, o.Device = r.wsURL(), r.gatewayID, gateway.RoleNode, key
		o.Client = gateway.ClientInfo{ID: "atrium-phone", Version: "soak", Platform: "android", Mode: "node", DisplayName: fmt.Sprintf("Soak phone %d", i)}
		o.Caps, o.Commands = []string{"location"}, []string{"location.get"}
		return gateway.Dial(cctx, o)
	}
	for cycle := 0; ctx.Err() == nil; cycle++ {
		if cycle%4 == 0 || tok == "" {
			if key != nil {
				err := r.call(ctx, "device.remove", map[string]any{"deviceId": d.id, "idempotencyKey": fmt.Sprintf("soak-remove-%d", r.seq.Add(1))}, nil)
				r.op("phone.remove", err)
			}
			var err error
			if key, err = device.GenerateKey(device.Ed25519); err != nil {
				r.op("phone.pair", err)
				return
			}
			tok, err = r.pairPhone(ctx, dial)
			r.op("phone.pair", err)
			if err != nil {
				// A new key next time; the device of this one (if the
				// request went through) stays until the app forgets it.
				key, tok = nil, ""
				pause(ctx, r.o.PhoneCycle)
				continue
			}
			d.mu.Lock()
			d.id = key.Public().ID()
			d.mu.Unlock()
		}
		c, err := dial(gateway.ClientOptions{DeviceToken: tok})
		r.op("phone.connect", err)
		if err != nil {
			pause(ctx, r.o.Pace)
			continue
		}
		go r.answerPhone(c)
		d.mu.Lock()
		d.up = true
		d.mu.Unlock()
		r.op("phone.health", r.callOn(ctx, c, "health"))
		pause(ctx, r.o.PhoneCycle)
		d.mu.Lock()
		d.up = false
		d.mu.Unlock()
		c.Close()
		<-c.Done()
	}
}

// callOn calls method with no parameters on c, bounded by a minute.
func (r *run) callOn(ctx context.Context, c *gateway.Client, method string) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := c.Call(cctx, method, map[string]any{}, nil); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	return nil
}

// pairPhone connects with a new setup code, has admin approve the request
// and returns the device token it is sent.
func (r *run) pairPhone(ctx context.Context, dial func(gateway.ClientOptions) (*gateway.Client, error)) (string, error) {
	pc, err := r.pairCode(ctx)
	if err != nil {
		return "", err
	}
	pending, err := dial(gateway.ClientOptions{SetupCode: pc.Code})
	if err != nil {
		return "", fmt.Errorf("connect with the setup code: %w", err)
	}
	defer func() { pending.Close(); <-pending.Done() }()
	if err := r.call(ctx, "device.pair.approve", map[string]any{"requestId": pending.Auth().RequestID,
		"idempotencyKey": fmt.Sprintf("soak-approve-%d", r.seq.Add(1))}, nil); err != nil {
		return "", err
	}
	deadline := time.After(time.Minute)
	for {
		select {
		case ev, open := <-pending.Events():
			if !open {
				return "", errors.New("pairing: the connection closed before device.pair.resolved")
			}
			if ev.Event != "device.pair.resolved" {
				continue
			}
			var p struct {
				Tokens map[string]string `json:"deviceTokens"`
			}
			if err := json.Unmarshal(ev.Payload, &p); err != nil {
				return "", fmt.Errorf("device.pair.resolved: %w", err)
			}
			if p.Tokens[gateway.RoleNode] == "" {
				return "", fmt.Errorf("device.pair.resolved without a node token: %.200s", ev.Payload)
			}
			return p.Tokens[gateway.RoleNode], nil
		case <-deadline:
			return "", errors.New("pairing: no device.pair.resolved within a minute")
		}
	}
}

// answerPhone answers location.get until c closes.
func (r *run) answerPhone(c *gateway.Client) {
	for ev := range c.Events() {
		var req nodes.InvokeRequestEvent
		if ev.Event != nodes.EventInvokeRequest || json.Unmarshal(ev.Payload, &req) != nil {
			continue
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = c.Call(ctx, nodes.MethodInvokeResult, map[string]any{"id": req.ID, "ok": true,
				"payload": map[string]any{"lat": 31.2304, "lon": 121.4737, "accuracyM": 12}}, nil)
		}()
	}
}

// nodeProc is one `atrium node` process.
type nodeProc struct {
	cmd    *exec.Cmd
	states chan string
	done   chan struct{}
}

// nodes runs Options.Nodes `atrium node` processes: each pairs once
// (approved by admin), then every NodeRestartEvery one of them is killed
// (SIGKILL) and started again on its state, which connects as paired.
func (r *run) nodes(ctx context.Context) {
	type host struct {
		d     *target
		state string
		p     *nodeProc
	}
	// Each start and wait is bounded on its own; the end of the load does
	// not cut one short (it would count as a failed restart).
	octx := context.WithoutCancel(ctx)
	hosts := make([]*host, r.o.Nodes)
	defer func() {
		for _, h := range hosts {
			if h != nil && h.p != nil {
				h.d.mu.Lock()
				h.d.up = false
				r.stopNode(h.p)
				h.d.mu.Unlock()
			}
		}
	}()
	urls := make([]string, len(hosts))
	for i := range hosts {
		pc, err := r.pairCode(ctx)
		if err != nil {
			r.op("node.pair", err)
			return
		}
		urls[i] = pc.URL
		h := &host{d: &target{command: "system.which", params: map[string]any{"name": "sh"}}, state: filepath.Join(r.o.Dir, fmt.Sprintf("node-%d", i))}
		hosts[i] = h
		p, st, err := r.startNode(octx, h.state, fmt.Sprintf("soak-node-%d", i), urls[i])
		h.p = p
		if err == nil && st["state"] == "pending" {
			err = r.call(ctx, "device.pair.approve", map[string]any{"requestId": st["requestId"],
				"idempotencyKey": fmt.Sprintf("soak-approve-%d", r.seq.Add(1))}, nil)
			if err == nil {
				err = p.wait(octx, "paired")
			}
		}
		r.op("node.pair", err)
		if err != nil {
			return
		}
		h.d.id = st["deviceId"]
		h.d.up = true
		r.addDevice(h.d)
	}
	for n := 0; n == 0 || pause(ctx, r.o.NodeRestartEvery); n++ {
		h := hosts[n%len(hosts)]
		h.d.mu.Lock()
		h.d.up = false
		if h.p != nil {
			kill(h.p.cmd)
			<-h.p.done
		}
		p, _, err := r.startNode(octx, h.state, fmt.Sprintf("soak-node-%d", n%len(hosts)), urls[n%len(hosts)])
		h.p = p
		if err == nil {
			err = p.wait(octx, "paired")
		}
		h.d.up = err == nil
		h.d.mu.Unlock()
		r.op("node.restart", err)
	}
}

// startNode starts `atrium node --json` on state and returns its first
// status line that is "pending" or "paired" (by field).
func (r *run) startNode(ctx context.Context, state, name, url string) (*nodeProc, map[string]string, error) {
	cmd := r.o.Command("node", "--json", "--state", state, "--name", name, "--url", url, "--ffmpeg", "atrium-soak-no-ffmpeg")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, fmt.Errorf("atrium node: %w", err)
	}
	logf, err := os.OpenFile(state+".log", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("atrium node: %w", err)
	}
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, nil, fmt.Errorf("atrium node: start: %w", err)
	}
	p := &nodeProc{cmd: cmd, states: make(chan string, 64), done: make(chan struct{})}
	first := make(chan map[string]string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				continue
			}
			st := map[string]string{}
			for k, v := range m {
				if s, ok := v.(string); ok {
					st[k] = s
				}
			}
			if st["state"] == "pending" || st["state"] == "paired" {
				select {
				case first <- st:
				default:
				}
			}
			select {
			case p.states <- st["state"]:
			default: // nobody waits for later states
			}
		}
		_ = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	select {
	case st := <-first:
		return p, st, nil
	case <-p.done:
		return p, nil, fmt.Errorf("atrium node %s ended at start (see %s.log)", name, state)
	case <-time.After(2 * time.Minute):
		return p, nil, fmt.Errorf("atrium node %s: no pending or paired state within 2 minutes", name)
	case <-ctx.Done():
		return p, nil, ctx.Err()
	}
}

// wait waits for the status state (bounded by 2 minutes).
func (p *nodeProc) wait(ctx context.Context, state string) error {
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case s := <-p.states:
			if s == state {
				return nil
			}
		case <-p.done:
			return fmt.Errorf("atrium node ended before %q", state)
		case <-deadline:
			return fmt.Errorf("atrium node: no %q within 2 minutes", state)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// stopNode ends a node process with SIGINT (SIGKILL after 30 s).
func (r *run) stopNode(p *nodeProc) {
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		kill(p.cmd)
		<-p.done
	}
}
