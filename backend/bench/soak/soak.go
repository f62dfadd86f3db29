// Package soak is the soak benchmark (issue 26, item 6): a real `atrium
// serve` in a process of its own on loopback, with everything that talks
// to it at once for a bounded time — phones (device-signed WebSocket
// clients that pair by setup code, answer node.invoke, disconnect,
// reconnect and now and then pair again with a new key), `atrium node`
// processes (paired once, killed with SIGKILL and restarted), chat
// (`chat.send` to the main profile, answered by a scripted
// OpenAI-compatible model server), searches and writes through the
// gateway, MCP clients (the SDK's client over streamable HTTP `/mcp` with
// a bearer token, and `atrium mcp` over stdio started again and again),
// and edits of the workspace made on disk behind the app's back.
//
// Every Options.SampleEvery it samples the app process: RSS
// (/proc/PID/status VmRSS), open file descriptors (/proc/PID/fd) and
// goroutines (`health`'s process.goroutines, given to admin only). After
// Options.WarmUp the three must be flat: see Flat for the criterion. At the
// end the load stops, the app syncs its index (`memory.sync`), and every
// acknowledged write is checked: on disk (the file holds the write's
// unique token) and found by `memory.search` for that token; the same
// holds for the files edited on disk, and a file deleted on disk is no
// longer found.
//
// The caller gives the binary (Options.Command): `atrium bench soak` runs
// its own executable, the tests their test binary re-executed as the
// command line.
package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
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
)

// Defaults of Options.
const (
	DefaultDuration         = 30 * time.Minute
	DefaultSampleEvery      = 5 * time.Second
	DefaultPhones           = 3
	DefaultNodes            = 2
	DefaultPace             = 250 * time.Millisecond
	DefaultNodeRestartEvery = 30 * time.Second
	DefaultPhoneCycle       = 20 * time.Second
)

// Bounds of Flat: how much the median of the last third of the samples
// after the warm-up may exceed the median of the first third.
const (
	// RSSGrowthFraction and RSSGrowthSlack: RSS may grow by this fraction
	// of the baseline plus this many bytes (the Go heap's target moves
	// with the live heap, the index's caches fill).
	RSSGrowthFraction = 0.20
	RSSGrowthSlack    = 24 << 20
	// GoroutineGrowth and FDGrowth: at most this many more goroutines and
	// descriptors (or 10 % of the baseline when that is more): what one
	// sample may catch in flight (a connection being set up, a stdio MCP
	// process starting), far less than one per connection, session or
	// process of a 30-minute run.
	GoroutineGrowth = 25
	FDGrowth        = 15
)

// Options configure Run. Dir and Command are required.
type Options struct {
	// Dir is the working folder: the workspace, the app's home and the
	// nodes' state go in it.
	Dir string
	// Command returns the atrium binary to run with args (the caller sets
	// its environment; Run adds to it). Required.
	Command func(args ...string) *exec.Cmd
	// Duration of the load (default DefaultDuration); WarmUp the part of
	// it whose samples are not judged (default a sixth of Duration).
	Duration, WarmUp time.Duration
	// SampleEvery is the sampling period (default DefaultSampleEvery).
	SampleEvery time.Duration
	// Phones and Nodes: how many of each (defaults DefaultPhones,
	// DefaultNodes; Nodes may be 0 with NoNodes).
	Phones, Nodes int
	NoNodes       bool
	// Pace is each driver's pause between two operations (default
	// DefaultPace): a soak, not a stress test.
	Pace time.Duration
	// NodeRestartEvery: one node process is killed and started again this
	// often (default DefaultNodeRestartEvery); PhoneCycle: how long a
	// phone stays connected before it disconnects and comes back (default
	// DefaultPhoneCycle).
	NodeRestartEvery, PhoneCycle time.Duration
	// Logger receives progress (default: discard).
	Logger *slog.Logger
}

// Sample is one look at the app process.
type Sample struct {
	// AtSeconds since the load started.
	AtSeconds float64 `json:"atSeconds"`
	// RSSBytes is /proc/PID/status VmRSS: RSSAnonBytes (RssAnon: the Go
	// heap and stacks, SQLite's and other C allocations) plus
	// RSSFileBytes (RssFile: the binary's pages, the index's mapped
	// segments).
	RSSBytes     int64 `json:"rssBytes"`
	RSSAnonBytes int64 `json:"rssAnonBytes"`
	RSSFileBytes int64 `json:"rssFileBytes"`
	// HeapLiveBytes is the Go heap live after the last GC (`health`'s
	// process.heapLiveBytes: runtime/metrics /gc/heap/live:bytes).
	HeapLiveBytes int64 `json:"heapLiveBytes"`
	Goroutines    int   `json:"goroutines"`
	FDs           int   `json:"fds"`
}

// Report is the soak's result.
type Report struct {
	Date    string  `json:"date"`
	Machine string  `json:"machine"`
	CPUs    int     `json:"cpus"`
	LoadAvg float64 `json:"loadAvg"` // 1-minute load average at the start (/proc/loadavg)
	// DurationSeconds of the load, WarmUpSeconds of it not judged.
	DurationSeconds float64  `json:"durationSeconds"`
	WarmUpSeconds   float64  `json:"warmUpSeconds"`
	Samples         []Sample `json:"samples"`
	// Baseline and End: the medians of the first and last third of the
	// samples after the warm-up (per field); Slope*PerHour: least-squares
	// slopes over the samples after the warm-up.
	Baseline              Sample           `json:"baseline"`
	End                   Sample           `json:"end"`
	RSSSlopePerHour       float64          `json:"rssBytesSlopePerHour"`
	HeapSlopePerHour      float64          `json:"heapLiveBytesSlopePerHour"`
	GoroutineSlopePerHour float64          `json:"goroutinesSlopePerHour"`
	FDSlopePerHour        float64          `json:"fdsSlopePerHour"`
	Ops                   map[string]int64 `json:"ops"`
	Errors                map[string]int64 `json:"errors"`
	ErrorCauses           []string         `json:"errorCauses,omitempty"`
	WritesChecked         int              `json:"writesChecked"`
	Lost                  []string         `json:"lost,omitempty"`
	Problems              []string         `json:"problems,omitempty"`
}

// ErrSoak is returned (wrapped, with the reasons) when the soak found a
// problem: samples not flat after the warm-up, a write lost, or an
// operation that failed.
var ErrSoak = errors.New("soak failed")

// Run starts the app and the load, samples, checks, and returns the
// report; err wraps ErrSoak when Report.Problems is not empty, or says why
// the soak could not run.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Dir == "" || o.Command == nil {
		return nil, errors.New("bench soak: Dir and Command are required")
	}
	if o.Duration <= 0 {
		o.Duration = DefaultDuration
	}
	if o.WarmUp <= 0 || o.WarmUp >= o.Duration {
		o.WarmUp = o.Duration / 6
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur(&o.SampleEvery, DefaultSampleEvery)
	defDur(&o.Pace, DefaultPace)
	defDur(&o.NodeRestartEvery, DefaultNodeRestartEvery)
	defDur(&o.PhoneCycle, DefaultPhoneCycle)
	if o.Phones <= 0 {
		o.Phones = DefaultPhones
	}
	if o.NoNodes {
		o.Nodes = 0
	} else if o.Nodes <= 0 {
		o.Nodes = DefaultNodes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	r := &run{o: o, log: o.Logger, ws: filepath.Join(o.Dir, "workspace"), home: filepath.Join(o.Dir, "home"),
		ops: map[string]int64{}, errs: map[string]int64{}, files: map[string]string{}}
	rep := &Report{Date: time.Now().UTC().Format(time.RFC3339), Machine: cpuModel(), CPUs: runtime.NumCPU(), LoadAvg: loadAvg(),
		DurationSeconds: o.Duration.Seconds(), WarmUpSeconds: o.WarmUp.Seconds()}
	if err := r.seed(); err != nil {
		return nil, err
	}
	mdl, err := startModel()
	if err != nil {
		return nil, err
	}
	defer mdl.Close()
	stop, err := r.startApp(ctx, mdl)
	if err != nil {
		return nil, err
	}
	defer stop()

	r.log.Info("soak: load starting", "duration", o.Duration.String(), "phones", o.Phones, "nodes", o.Nodes, "pid", r.pid)
	loadCtx, endLoad := context.WithTimeout(ctx, o.Duration)
	defer endLoad()
	r.start = time.Now()
	var wg sync.WaitGroup
	drivers := []func(context.Context){r.chat, r.writes, r.noteLines, r.searches, r.mcpHTTP, r.mcpStdio, r.disk, r.invokes}
	for i := range o.Phones {
		drivers = append(drivers, func(ctx context.Context) { r.phone(ctx, i) })
	}
	if o.Nodes > 0 {
		drivers = append(drivers, r.nodes)
	}
	for _, d := range drivers {
		wg.Add(1)
		go func() { defer wg.Done(); d(loadCtx) }()
	}
	samples := r.sampleUntil(loadCtx)
	// Drivers finish their operation in flight (each bounded by its own
	// deadline) and stop.
	wg.Wait()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("bench soak: %w", ctx.Err())
	}
	rep.Samples = samples
	judge(rep, o.WarmUp)
	r.log.Info("soak: load done, checking the writes", "samples", len(samples))
	rep.WritesChecked, rep.Lost = r.check(ctx)
	r.mu.Lock()
	rep.Ops, rep.Errors, rep.ErrorCauses = r.ops, r.errs, r.causes
	r.mu.Unlock()
	for k, n := range rep.Errors {
		rep.Problems = append(rep.Problems, fmt.Sprintf("%d failed %s operation(s)", n, k))
	}
	if len(rep.Lost) > 0 {
		rep.Problems = append(rep.Problems, fmt.Sprintf("%d acknowledged write(s) lost", len(rep.Lost)))
	}
	sort.Strings(rep.Problems)
	if len(rep.Problems) > 0 {
		return rep, fmt.Errorf("bench soak: %w: %s", ErrSoak, strings.Join(rep.Problems, "; "))
	}
	return rep, nil
}

// run is one soak's state.
type run struct {
	o         Options
	log       *slog.Logger
	ws, home  string
	pid       int
	addr      string
	gatewayID string
	admin     *gateway.Client
	start     time.Time

	mu     sync.Mutex
	ops    map[string]int64
	errs   map[string]int64
	causes []string
	// files: workspace-relative path → the unique token of its last
	// acknowledged content ("" for a file deleted on disk); notes: tokens
	// of acknowledged memory.note lines by daily file.
	files map[string]string
	notes []ackedNote
	// devices: the phones and nodes node.invoke may be sent to.
	devices []*target
	seq     atomic.Int64
}

type ackedNote struct{ path, token string }

// op counts one operation of kind; a non-nil err is counted as its error
// (the first 20 causes are kept).
func (r *run) op(kind string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops[kind]++
	if err != nil {
		r.errs[kind]++
		if len(r.causes) < 20 {
			r.causes = append(r.causes, kind+": "+err.Error())
		}
		r.log.Warn("soak: operation failed", "kind", kind, "err", err)
	}
}

// token is a new word found nowhere else in the workspace.
func (r *run) token(kind string) string {
	return fmt.Sprintf("soak%sx%dq", kind, r.seq.Add(1))
}

// acked records path's last acknowledged content token.
func (r *run) acked(path, token string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.files[path] = token
}

// pause waits d or until ctx is done; false when ctx is done.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// seed writes the workspace: a role "writer" (the MCP clients' role) and a
// few notes.
func (r *run) seed() error {
	files := map[string]string{
		"memory/roles/writer/about.md": "# Writer\n\nThe writer keeps the manuscript notes.\n",
		"memory/global/team.md":        "# Team\n\nThe launch code name is Bluebird. 发布代号是蓝鸟。\n",
		"MEMORY.md":                    "# Memory\n\nSoak workspace.\n",
	}
	for i := range 20 {
		files[fmt.Sprintf("memory/global/note-%02d.md", i)] = fmt.Sprintf("# Note %d\n\nMeeting %d about the launch plan and chapter %d.\n", i, i, i%7)
	}
	for rel, text := range files {
		p := filepath.Join(r.ws, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("bench soak: workspace: %w", err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			return fmt.Errorf("bench soak: workspace: %w", err)
		}
	}
	return nil
}

// startApp starts `atrium serve` on a free loopback port with the
// scripted model and connects as admin; stop ends it (SIGINT, then SIGKILL
// after 30 s).
func (r *run) startApp(ctx context.Context, mdl *model) (stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench soak: free port: %w", err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	_ = ln.Close()
	cmd := r.o.Command("serve", "--home", r.home, "--workspace", r.ws, "--port", port)
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, "OPENAI_BASE_URL="+mdl.url+"/v1", "OPENAI_API_KEY=soak", "OPENAI_MODEL=scripted")
	logf, err := os.Create(filepath.Join(r.o.Dir, "serve.log"))
	if err != nil {
		return nil, fmt.Errorf("bench soak: %w", err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("bench soak: start atrium serve: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done); logf.Close() }()
	stop = func() {
		if r.admin != nil {
			r.admin.Close()
		}
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	r.pid = cmd.Process.Pid
	// gateway.json names this process once its gateway listens.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		info, err := atrium.ReadGatewayInfo(filepath.Join(r.home, "gateway.json"))
		if err == nil && info.PID == r.pid {
			r.addr, r.gatewayID = info.Addr, info.GatewayID
			break
		}
		select {
		case <-done:
			return nil, fmt.Errorf("bench soak: atrium serve ended at start (see %s)", filepath.Join(r.o.Dir, "serve.log"))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return nil, errors.New("bench soak: atrium serve did not listen within 3 minutes")
		}
	}
	r.admin, err = r.dialAdmin(ctx, "soak-admin")
	if err != nil {
		stop()
		return nil, err
	}
	go drain(r.admin)
	// The first index run, before the load: `memory.sync` waits for it.
	sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := r.admin.Call(sctx, "memory.sync", map[string]any{}, nil); err != nil {
		stop()
		return nil, fmt.Errorf("bench soak: first index run: %w", err)
	}
	return stop, nil
}

// dialAdmin connects with the app's operator token.
func (r *run) dialAdmin(ctx context.Context, id string) (*gateway.Client, error) {
	tok, err := os.ReadFile(filepath.Join(r.home, "gateway.token"))
	if err != nil {
		return nil, fmt.Errorf("bench soak: operator token: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	c, err := gateway.Dial(cctx, gateway.ClientOptions{URL: r.wsURL(), Token: strings.TrimSpace(string(tok)),
		Client: gateway.ClientInfo{ID: id, Version: "soak", Platform: runtime.GOOS, Mode: "bench", InstanceID: id}})
	if err != nil {
		return nil, fmt.Errorf("bench soak: connect as admin: %w", err)
	}
	return c, nil
}

func (r *run) wsURL() string { return "ws://" + r.addr + "/ws" }

// drain reads and drops c's events until it closes (a client's events
// are its to read; nobody else waits for these).
func drain(c *gateway.Client) {
	for range c.Events() {
	}
}

// call is an admin call bounded by a minute.
func (r *run) call(ctx context.Context, method string, params, out any) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := r.admin.Call(cctx, method, params, out); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	return nil
}

// sampleUntil samples the app process every SampleEvery until ctx is done.
func (r *run) sampleUntil(ctx context.Context) []Sample {
	var out []Sample
	t := time.NewTicker(r.o.SampleEvery)
	defer t.Stop()
	for {
		st := procStatus(r.pid)
		s := Sample{AtSeconds: time.Since(r.start).Seconds(), RSSBytes: st["VmRSS:"], RSSAnonBytes: st["RssAnon:"],
			RSSFileBytes: st["RssFile:"], FDs: procFDs(r.pid)}
		var h struct {
			Process struct {
				Goroutines    int   `json:"goroutines"`
				HeapLiveBytes int64 `json:"heapLiveBytes"`
			} `json:"process"`
		}
		err := r.call(ctx, "health", map[string]any{}, &h)
		r.op("sample", err)
		s.Goroutines, s.HeapLiveBytes = h.Process.Goroutines, h.Process.HeapLiveBytes
		out = append(out, s)
		r.log.Info("soak: sample", "at_s", int(s.AtSeconds), "rss_mib", s.RSSBytes>>20, "anon_mib", s.RSSAnonBytes>>20,
			"file_mib", s.RSSFileBytes>>20, "heap_mib", s.HeapLiveBytes>>20, "goroutines", s.Goroutines, "fds", s.FDs)
		select {
		case <-ctx.Done():
			return out
		case <-t.C:
		}
	}
}

// procStatus is /proc/PID/status's "<key>: <n> kB" lines in bytes, by
// key with its colon (empty without /proc).
func procStatus(pid int) map[string]int64 {
	out := map[string]int64{}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[2] == "kB" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			out[f[0]] = kb << 10
		}
	}
	return out
}

// procFDs counts /proc/PID/fd's entries (0 without it).
func procFDs(pid int) int {
	es, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return 0
	}
	return len(es)
}

// judge fills the report's baseline, end and slopes from the samples
// after the warm-up and adds a problem for each figure that is not flat.
func judge(rep *Report, warmUp time.Duration) {
	var post []Sample
	blind := 0
	for _, s := range rep.Samples {
		if s.Goroutines <= 0 || s.HeapLiveBytes <= 0 || s.RSSBytes <= 0 {
			blind++
		}
		if s.AtSeconds >= warmUp.Seconds() {
			post = append(post, s)
		}
	}
	if blind > 0 {
		// Without a figure a leak of it cannot be seen: an app whose
		// health says no process figures fails the soak.
		rep.Problems = append(rep.Problems, fmt.Sprintf("%d of %d samples lack the app's RSS, goroutines or live heap (health's process, /proc)", blind, len(rep.Samples)))
	}
	if len(post) < 6 {
		rep.Problems = append(rep.Problems, fmt.Sprintf("only %d samples after the warm-up (at least 6 needed to judge)", len(post)))
		return
	}
	third := len(post) / 3
	rep.Baseline, rep.End = medianSample(post[:third]), medianSample(post[len(post)-third:])
	rep.RSSSlopePerHour = slope(post, func(s Sample) float64 { return float64(s.RSSBytes) }) * 3600
	rep.HeapSlopePerHour = slope(post, func(s Sample) float64 { return float64(s.HeapLiveBytes) }) * 3600
	rep.GoroutineSlopePerHour = slope(post, func(s Sample) float64 { return float64(s.Goroutines) }) * 3600
	rep.FDSlopePerHour = slope(post, func(s Sample) float64 { return float64(s.FDs) }) * 3600
	rep.Problems = append(rep.Problems, Flat(rep.Baseline, rep.End)...)
}

// Flat says why end is not flat against baseline (nil when it is): RSS
// at most baseline × (1 + RSSGrowthFraction) + RSSGrowthSlack; goroutines
// and descriptors at most baseline + max(GoroutineGrowth or FDGrowth, 10 %
// of baseline). The medians of thirds of the run, not single samples, are
// compared, so a burst of work caught by one sample does not count, and
// no time is asserted: a leak of one goroutine or descriptor per
// connection, MCP session or process grows with the number of operations.
func Flat(baseline, end Sample) []string {
	var out []string
	if lim := int64(float64(baseline.RSSBytes)*(1+RSSGrowthFraction)) + RSSGrowthSlack; end.RSSBytes > lim {
		out = append(out, fmt.Sprintf("RSS grew from %d MiB to %d MiB (bound %d MiB)", baseline.RSSBytes>>20, end.RSSBytes>>20, lim>>20))
	}
	if lim := baseline.Goroutines + max(GoroutineGrowth, baseline.Goroutines/10); end.Goroutines > lim {
		out = append(out, fmt.Sprintf("goroutines grew from %d to %d (bound %d)", baseline.Goroutines, end.Goroutines, lim))
	}
	if lim := baseline.FDs + max(FDGrowth, baseline.FDs/10); end.FDs > lim {
		out = append(out, fmt.Sprintf("open file descriptors grew from %d to %d (bound %d)", baseline.FDs, end.FDs, lim))
	}
	return out
}

// medianSample is the per-field median of ss (not empty).
func medianSample(ss []Sample) Sample {
	med := func(f func(Sample) float64) float64 {
		xs := make([]float64, len(ss))
		for i, s := range ss {
			xs[i] = f(s)
		}
		sort.Float64s(xs)
		return xs[len(xs)/2]
	}
	return Sample{AtSeconds: med(func(s Sample) float64 { return s.AtSeconds }),
		RSSBytes:      int64(med(func(s Sample) float64 { return float64(s.RSSBytes) })),
		RSSAnonBytes:  int64(med(func(s Sample) float64 { return float64(s.RSSAnonBytes) })),
		RSSFileBytes:  int64(med(func(s Sample) float64 { return float64(s.RSSFileBytes) })),
		HeapLiveBytes: int64(med(func(s Sample) float64 { return float64(s.HeapLiveBytes) })),
		Goroutines:    int(med(func(s Sample) float64 { return float64(s.Goroutines) })),
		FDs:           int(med(func(s Sample) float64 { return float64(s.FDs) }))}
}

// slope is the least-squares slope of f over ss per second.
func slope(ss []Sample, f func(Sample) float64) float64 {
	n := float64(len(ss))
	var sx, sy, sxx, sxy float64
	for _, s := range ss {
		x, y := s.AtSeconds, f(s)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

// model is a scripted OpenAI-compatible streaming server: every answer is
// a few words in four chunks, then the usage.
type model struct {
	url string
	srv *http.Server
}

func startModel() (*model, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench soak: model server: %w", err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(req.Body, 8<<20))
		w.Header().Set("Content-Type", "text/event-stream")
		fl, _ := w.(http.Flusher)
		for _, word := range []string{"Noted: ", "the soak ", "is still ", "running."} {
			if _, err := fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", word); err != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
		}
		fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":4}}\n\ndata: [DONE]\n\n")
	})
	m := &model{url: "http://" + ln.Addr().String(), srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = m.srv.Serve(ln) }()
	return m, nil
}

// Close stops the server.
func (m *model) Close() { _ = m.srv.Close() }

// loadAvg is the 1-minute load average (0 without /proc).
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseFloat(strings.Fields(string(b) + " 0")[0], 64)
	return v
}

// cpuModel is /proc/cpuinfo's first "model name" (else GOARCH).
func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// kill ends a process at once (SIGKILL), as a crash or a pulled plug.
func kill(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
