// Package control is the control-center benchmark (issue 5; SPEC §6
// "time to a usable window depends on the number of active profiles, not
// on the total", SPEC §3 "Gateway ↔ agent worker"): it creates a workspace
// with many profiles (memory/roles/<r>/config.md personas), starts the real
// app (package atrium: gateway on a free port, memory, chat, the worker
// pool) with some of them active as spawned worker instances, and
// measures:
//
//   - the time from the start until the UI can be used: a client has
//     hello-ok and a profiles.list answer, and the embedded UI's index.html
//     is served; and until every active instance is ready;
//   - the app's resident memory (RSS) once started, and the sum of the
//     workers' RSS;
//   - gateway throughput with many concurrent WebSocket clients: each does
//     the handshake, then health / profiles.list requests in a loop, and
//     listens to the chat events of the active instances, which stream
//     answers from a scripted OpenAI-compatible model server all the time
//     (one driver connection per instance sends the next question as soon
//     as an answer ends). The load clients read frames by their prefixes
//     rather than decoding them (client.go), so that their own work takes
//     little of the CPU the gateway is measured on.
//     Reported: requests/s, chat events delivered/s, messages/s (requests,
//     responses and events), and the latency of a chat.chunk from the
//     moment the model server produced it (a timestamp in its delta) to its
//     arrival at each client: p50, p99, max.
//
// The app runs in this process (the load clients too), so RSS under load
// includes the clients; the RSS "after start" does not. The workers are
// this binary re-executed (`atrium worker`), as in the app.
package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/atrium-dev/atrium/backend/atrium"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/paths"
)

// Defaults of Options.
const (
	DefaultProfiles      = 100
	DefaultActive        = 10
	DefaultClients       = 200
	DefaultDuration      = 10 * time.Second
	DefaultChunks        = 40
	DefaultChunkInterval = 50 * time.Millisecond
)

// Options configure Run. Dir and UI are required.
type Options struct {
	// Dir is the working folder: the workspace and the app's home are
	// created in it.
	Dir string
	// UI is the built frontend the gateway serves (its index.html is
	// fetched to count the UI as usable).
	UI fs.FS
	// Profiles is the number of profiles created (default DefaultProfiles),
	// Active how many of them run as instances (default DefaultActive, at
	// most Profiles and 16, the pool's limit).
	Profiles, Active int
	// Clients is the number of concurrent WebSocket clients of the load
	// phase (default DefaultClients); Duration its length (default
	// DefaultDuration).
	Clients  int
	Duration time.Duration
	// RequestInterval is a client's pause between two requests (default
	// 0: as fast as the answers come, which saturates the machine).
	RequestInterval time.Duration
	// Chunks per scripted answer (default DefaultChunks), ChunkInterval
	// between two of its chunks (default DefaultChunkInterval).
	Chunks        int
	ChunkInterval time.Duration
	// Logger receives progress; the app's own records go to it at warning
	// level and above. Default: discard.
	Logger *slog.Logger
}

// Report is the benchmark's result (sizes in bytes, times in ms).
type Report struct {
	Date    string `json:"date"`
	Machine string `json:"machine"`
	CPUs    int    `json:"cpus"`
	// LoadAvg is the machine's 1-minute load average when the run started
	// (/proc/loadavg; other processes compete for the CPUs).
	LoadAvg  float64 `json:"loadAvg"`
	Profiles int     `json:"profiles"`
	Active   int     `json:"active"`
	Clients  int     `json:"clients"`
	// RequestIntervalMs is Options.RequestInterval.
	RequestIntervalMs float64 `json:"requestIntervalMs"`

	// UsableMs: start (before the app is built) → hello-ok, profiles.list
	// (with the whole light index) and index.html all answered.
	UsableMs float64 `json:"usableMs"`
	// InstancesReadyMs: start → every active instance ready.
	InstancesReadyMs float64 `json:"instancesReadyMs"`
	// AppRSS after start with the instances ready (before any load
	// client); WorkersRSS the sum over the workers then, and WorkersPSS
	// the sum of their proportional set sizes (/proc/<pid>/smaps_rollup:
	// the pages of the binary they share are split among the processes
	// mapping them, so the sum does not count them ten times); AppRSSLoad
	// the peak during the load phase (includes the load clients).
	AppRSS     int64 `json:"appRssBytes"`
	WorkersRSS int64 `json:"workersRssBytes"`
	WorkersPSS int64 `json:"workersPssBytes"`
	AppRSSLoad int64 `json:"appRssLoadBytes"`

	LoadSeconds    float64 `json:"loadSeconds"`
	Requests       int64   `json:"requests"`
	RequestsPerSec float64 `json:"requestsPerSec"`
	RequestP99Ms   float64 `json:"requestP99Ms"`
	// Events: chat events received by the load clients.
	Events       int64   `json:"events"`
	EventsPerSec float64 `json:"eventsPerSec"`
	// MessagesPerSec: WebSocket messages per second through the gateway
	// (requests + responses + events to the load clients).
	MessagesPerSec float64 `json:"messagesPerSec"`
	// Chunk latency: the model server's timestamp → a load client's receipt.
	ChunkSamples int     `json:"chunkSamples"`
	ChunkP50Ms   float64 `json:"chunkP50Ms"`
	ChunkP99Ms   float64 `json:"chunkP99Ms"`
	ChunkMaxMs   float64 `json:"chunkMaxMs"`
	// Answers: chat runs that ended with chat.final during the load;
	// RunErrors those that did not; ClientErrors failed requests or lost
	// connections (a client the gateway found too slow is disconnected,
	// never silently skipped: SPEC §3).
	Answers      int64 `json:"answers"`
	RunErrors    int64 `json:"runErrors"`
	ClientErrors int64 `json:"clientErrors"`
	// RunErrorCauses and ClientErrorCauses say what went wrong, one line
	// per error (which instance or client, which request, the error or
	// the gateway's answer), the first maxCauses of each.
	RunErrorCauses    []string `json:"runErrorCauses,omitempty"`
	ClientErrorCauses []string `json:"clientErrorCauses,omitempty"`
}

// maxCauses is how many error causes of each kind a Report keeps.
const maxCauses = 20

// causes counts errors and keeps the first maxCauses of them; safe for
// concurrent use.
type causes struct {
	mu    sync.Mutex
	n     int64
	first []string
}

func (c *causes) add(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	if len(c.first) < maxCauses {
		c.first = append(c.first, err.Error())
	}
}

func (c *causes) get() (int64, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n, append([]string(nil), c.first...)
}

// Run creates the workspace, starts the app and measures (see the package
// doc). ctx ends it early (with an error). The app is stopped and its
// workers gone when Run returns.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Dir == "" || o.UI == nil {
		return nil, errors.New("bench control: Dir and UI are required")
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Profiles, DefaultProfiles)
	def(&o.Active, DefaultActive)
	def(&o.Clients, DefaultClients)
	def(&o.Chunks, DefaultChunks)
	if o.Duration <= 0 {
		o.Duration = DefaultDuration
	}
	if o.ChunkInterval <= 0 {
		o.ChunkInterval = DefaultChunkInterval
	}
	o.Active = min(o.Active, o.Profiles, 16)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	log := o.Logger
	ws := filepath.Join(o.Dir, "workspace")
	names, err := makeWorkspace(ws, o.Profiles)
	if err != nil {
		return nil, err
	}
	mdl, err := startModel(o.Chunks, o.ChunkInterval)
	if err != nil {
		return nil, err
	}
	defer mdl.Close()
	env := map[string]string{"OPENAI_BASE_URL": mdl.url + "/v1", "OPENAI_API_KEY": "bench", "OPENAI_MODEL": "scripted"}

	rep := &Report{Date: time.Now().UTC().Format(time.RFC3339), Machine: cpuModel(), CPUs: runtime.NumCPU(), LoadAvg: loadAvg(),
		Profiles: o.Profiles, Active: o.Active, Clients: o.Clients, RequestIntervalMs: ms(o.RequestInterval)}
	log.Info("bench control: starting the app", "profiles", o.Profiles, "active", o.Active)
	t0 := time.Now()
	appLog := slog.New(&levelHandler{Handler: o.Logger.Handler(), min: slog.LevelWarn})
	a, err := atrium.New(ctx, atrium.Options{Layout: paths.Layout{Home: filepath.Join(o.Dir, "home"), Workspace: ws},
		Port: -1, UI: o.UI, Version: "bench", Getenv: func(k string) string { return env[k] }, Logger: appLog})
	if err != nil {
		return nil, fmt.Errorf("bench control: %w", err)
	}
	defer a.Close()
	if err := a.Listen(); err != nil {
		return nil, fmt.Errorf("bench control: %w", err)
	}
	runCtx, stopApp := context.WithCancel(context.WithoutCancel(ctx))
	runDone := make(chan error, 1)
	go func() { runDone <- a.Run(runCtx) }()
	defer func() {
		stopApp()
		if err := <-runDone; err != nil {
			log.Warn("bench control: app run", "err", err)
		}
	}()

	// The active instances start while the UI becomes usable, as they would
	// at a real start-up.
	spawnErr := make(chan error, 1)
	go func() { spawnErr <- spawnActive(ctx, a, names[:o.Active]) }()
	if err := waitUsable(ctx, a, o.Profiles); err != nil {
		return nil, err
	}
	rep.UsableMs = ms(time.Since(t0))
	if err := <-spawnErr; err != nil {
		return nil, err
	}
	instances, err := waitReady(ctx, a, o.Active)
	if err != nil {
		return nil, err
	}
	rep.InstancesReadyMs = ms(time.Since(t0))
	runtime.GC()
	rep.AppRSS = rss(os.Getpid())
	for _, st := range a.Pool.List() {
		rep.WorkersRSS += rss(st.PID)
		rep.WorkersPSS += procField(st.PID, "smaps_rollup", "Pss:")
	}
	log.Info("bench control: app ready", "usable_ms", rep.UsableMs, "instances_ready_ms", rep.InstancesReadyMs,
		"app_rss", rep.AppRSS, "workers_rss", rep.WorkersRSS)

	if err := load(ctx, a, instances, o, rep); err != nil {
		return rep, err
	}
	return rep, nil
}

// makeWorkspace writes n role folders with a persona each and returns the
// role ids in order.
func makeWorkspace(ws string, n int) ([]string, error) {
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("r%03d", i)
		dir := filepath.Join(ws, "memory", "roles", names[i])
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("bench control: workspace: %w", err)
		}
		persona := fmt.Sprintf("---\ndescription: benchmark role %d\ncapabilities: [bench]\n---\n"+
			"You are role %d of the control-center benchmark. 你是第 %d 个角色。\n", i, i, i)
		if err := os.WriteFile(filepath.Join(dir, "config.md"), []byte(persona), 0o644); err != nil {
			return nil, fmt.Errorf("bench control: workspace: %w", err)
		}
	}
	return names, nil
}

// dial opens one operator connection to the app.
func dial(ctx context.Context, a *atrium.App, id string) (*gateway.Client, error) {
	return gateway.Dial(ctx, gateway.ClientOptions{URL: a.WSURL(), Token: a.Token,
		Client: gateway.ClientInfo{ID: "bench-" + id, Version: "bench", Platform: runtime.GOOS, Mode: "bench", InstanceID: id}})
}

// waitUsable returns once hello-ok, profiles.list with the whole index and
// the UI's index.html have all been answered.
func waitUsable(ctx context.Context, a *atrium.App, profiles int) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cl, err := dial(ctx, a, "usable")
	if err != nil {
		return fmt.Errorf("bench control: hello: %w", err)
	}
	defer cl.Close()
	var list struct {
		Index []json.RawMessage `json:"index"`
	}
	if err := cl.Call(ctx, "profiles.list", map[string]any{}, &list); err != nil {
		return fmt.Errorf("bench control: profiles.list: %w", err)
	}
	if len(list.Index) != profiles {
		return fmt.Errorf("bench control: profiles.list has %d profiles in its index, want %d", len(list.Index), profiles)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a.Gateway.Addr()+"/", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("bench control: index.html: %w", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(strings.ToLower(string(body)), "<html") {
		return fmt.Errorf("bench control: index.html: status %d, %d bytes (%v)", resp.StatusCode, len(body), err)
	}
	return nil
}

// spawnActive spawns one instance of each role (retrying while the pool
// is not running yet).
func spawnActive(ctx context.Context, a *atrium.App, roles []string) error {
	deadline := time.Now().Add(30 * time.Second)
	for _, r := range roles {
		for {
			_, err := a.Pool.Spawn(r)
			if err == nil {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("bench control: spawn %s: %w", r, err)
			}
			time.Sleep(5 * time.Millisecond) // App.Run is starting the pool
		}
	}
	return nil
}

// waitReady waits until n instances are ready and returns their ids.
func waitReady(ctx context.Context, a *atrium.App, n int) ([]string, error) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		var ready []string
		for _, st := range a.Pool.List() {
			if st.State == "ready" {
				ready = append(ready, st.InstanceID)
			}
		}
		if len(ready) == n {
			return ready, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("bench control: %d of %d instances ready", len(ready), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// load runs the load phase and fills rep's throughput and latency fields.
func load(ctx context.Context, a *atrium.App, instances []string, o Options, rep *Report) error {
	log := o.Logger
	dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	clients := make([]*loadClient, 0, o.Clients)
	defer func() {
		for _, c := range clients {
			c.close()
		}
	}()
	for i := range o.Clients {
		cl, err := dialLoad(dctx, a.WSURL(), a.Token, "c"+strconv.Itoa(i))
		if err != nil {
			return fmt.Errorf("bench control: %w", err)
		}
		clients = append(clients, cl)
	}
	log.Info("bench control: clients connected", "clients", o.Clients)

	var (
		requests, answers   atomic.Int64
		clientErrs, runErrs causes
		mu                  sync.Mutex
		reqLat              []float64
	)
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	// The drivers: one connection per instance asks it again as soon as an
	// answer ends.
	for i, id := range instances {
		drv, err := dial(dctx, a, "driver"+strconv.Itoa(i))
		if err != nil {
			return fmt.Errorf("bench control: driver %s: %w", id, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer drv.Close()
			drive(lctx, drv, id, "bench-"+id, &answers, &runErrs)
		}()
	}
	start := time.Now()
	peak := make(chan int64, 1)
	go func() { peak <- peakRSS(lctx) }()
	for _, cl := range clients {
		wg.Add(1)
		go func() { // requests in a loop
			defer wg.Done()
			var lat []float64
			methods := []string{"health", "profiles.list"}
			for n := 0; lctx.Err() == nil; n++ {
				t := time.Now()
				if err := cl.call(lctx, n, methods[n%2]); err != nil {
					if !errors.Is(err, errStopped) {
						clientErrs.add(err)
					}
					break
				}
				lat = append(lat, ms(time.Since(t)))
				requests.Add(1)
				if o.RequestInterval > 0 {
					select {
					case <-lctx.Done():
					case <-time.After(o.RequestInterval):
					}
				}
			}
			mu.Lock()
			reqLat = append(reqLat, lat...)
			mu.Unlock()
		}()
	}
	select {
	case <-time.After(o.Duration):
	case <-ctx.Done():
	}
	elapsed := time.Since(start)
	var events int64
	for _, c := range clients {
		events += c.events.Load()
	}
	stop()
	wg.Wait()
	rep.AppRSSLoad = <-peak
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("bench control: %w", err)
	}
	var chunkLat []float64
	for _, c := range clients {
		if err := c.lostErr(); err != nil {
			clientErrs.add(err)
		}
		c.close()
		chunkLat = append(chunkLat, c.lat...)
	}
	clients = nil
	sec := elapsed.Seconds()
	rep.LoadSeconds = sec
	rep.Requests, rep.Events = requests.Load(), events
	rep.RequestsPerSec = float64(rep.Requests) / sec
	rep.EventsPerSec = float64(rep.Events) / sec
	rep.MessagesPerSec = float64(2*rep.Requests+rep.Events) / sec
	rep.RequestP99Ms = quantile(reqLat, 0.99)
	rep.ChunkSamples = len(chunkLat)
	rep.ChunkP50Ms, rep.ChunkP99Ms, rep.ChunkMaxMs = quantile(chunkLat, 0.5), quantile(chunkLat, 0.99), quantile(chunkLat, 1)
	rep.Answers = answers.Load()
	rep.RunErrors, rep.RunErrorCauses = runErrs.get()
	rep.ClientErrors, rep.ClientErrorCauses = clientErrs.get()
	log.Info("bench control: load done", "requests_per_sec", rep.RequestsPerSec, "events_per_sec", rep.EventsPerSec,
		"chunk_p99_ms", rep.ChunkP99Ms, "answers", rep.Answers)
	return nil
}

// drive sends a message to instance id in session, waits for the run's end
// and repeats until ctx is done; the last run is waited for (bounded), so
// the app is idle when the load ends.
func drive(ctx context.Context, cl *gateway.Client, id, session string, answers *atomic.Int64, runErrs *causes) {
	for n := 0; ctx.Err() == nil; n++ {
		var res struct {
			RunID string `json:"runId"`
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		err := cl.Call(cctx, "chat.send", map[string]any{"profileId": id, "sessionId": session,
			"message": "bench question " + strconv.Itoa(n), "idempotencyKey": session + "-" + strconv.Itoa(n)}, &res)
		if err != nil {
			cancel()
			runErrs.add(fmt.Errorf("instance %s: question %d: chat.send: %w", id, n, err))
			time.Sleep(50 * time.Millisecond)
			continue
		}
		err = waitRun(cctx, cl, res.RunID)
		cancel()
		if err != nil {
			runErrs.add(fmt.Errorf("instance %s: question %d: run %s: %w", id, n, res.RunID, err))
		} else {
			answers.Add(1)
		}
	}
}

// waitRun waits for run's terminal event: nil for chat.final, else an
// error with the event's payload or why none came.
func waitRun(ctx context.Context, cl *gateway.Client, runID string) error {
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("no end of the run: %w", ctx.Err())
		case e, open := <-cl.Events():
			if !open {
				return errors.New("no end of the run: the driver's connection closed")
			}
			switch e.Event {
			case "chat.final", "chat.error", "chat.cancelled":
				var p struct {
					RunID string `json:"runId"`
				}
				if json.Unmarshal(e.Payload, &p) == nil && p.RunID == runID {
					if e.Event == "chat.final" {
						return nil
					}
					return fmt.Errorf("%s %.300s", e.Event, e.Payload)
				}
			}
		}
	}
}

// scriptedModel is an OpenAI-compatible streaming server: every answer is
// chunks deltas "@<unix ns>;w<i> " interval apart, then a usage chunk.
type scriptedModel struct {
	url string
	srv *http.Server
}

func startModel(chunks int, interval time.Duration) (*scriptedModel, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench control: model server: %w", err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fl, _ := w.(http.Flusher)
		t := time.NewTicker(interval)
		defer t.Stop()
		for i := 1; i <= chunks; i++ {
			if i > 1 {
				select {
				case <-r.Context().Done():
					return
				case <-t.C:
				}
			}
			delta := "@" + strconv.FormatInt(time.Now().UnixNano(), 10) + ";w" + strconv.Itoa(i) + " "
			if _, err := fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", delta); err != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
		}
		fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":%d}}\n\ndata: [DONE]\n\n", chunks)
	})
	m := &scriptedModel{url: "http://" + ln.Addr().String(), srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = m.srv.Serve(ln) }()
	return m, nil
}

// Close stops the server.
func (m *scriptedModel) Close() { _ = m.srv.Close() }

// peakRSS samples this process's RSS every 200 ms until ctx is done and
// returns the largest.
func peakRSS(ctx context.Context) int64 {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	peak := rss(os.Getpid())
	for {
		select {
		case <-ctx.Done():
			return max(peak, rss(os.Getpid()))
		case <-t.C:
			peak = max(peak, rss(os.Getpid()))
		}
	}
}

// rss is a process's resident set size in bytes from /proc (0 where there
// is no /proc or the process is gone).
func rss(pid int) int64 { return procField(pid, "status", "VmRSS:") }

// procField reads a "<key> <n> kB" line of /proc/<pid>/<file> in bytes (0
// when there is none).
func procField(pid int, file, key string) int64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/" + file)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == key {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// loadAvg is the 1-minute load average (0 without /proc).
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// cpuModel is /proc/cpuinfo's first "model name" (else GOARCH).
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return runtime.GOARCH
}

// quantile is the q-quantile (nearest rank) of xs; 0 for none.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// levelHandler passes on the records at min and above.
type levelHandler struct {
	slog.Handler
	min slog.Level
}

func (h *levelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h *levelHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &levelHandler{Handler: h.Handler.WithAttrs(as), min: h.min}
}

func (h *levelHandler) WithGroup(name string) slog.Handler {
	return &levelHandler{Handler: h.Handler.WithGroup(name), min: h.min}
}
