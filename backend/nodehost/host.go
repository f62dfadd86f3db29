package nodehost

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/atrium-dev/atrium/backend/capture"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/gwid"
	"github.com/atrium-dev/atrium/backend/rtc"
)

// Events and methods of the node protocol (docs/PROTOCOL.md).
const (
	EventInvokeRequest   = "node.invoke.request"
	EventPairResolved    = "device.pair.resolved"
	EventTokenRotated    = "device.token.rotated"
	MethodInvokeResult   = "node.invoke.result"
	MethodExecAsk        = "node.exec.ask"
	MethodPairStatus     = "device.pair.status"
	MethodPresenceUpdate = "presence.update"
	reasonTokenMismatch  = "device_token_mismatch"
	reasonRateLimited    = "rate_limited"
	decisionApproved     = "approved"
	decisionRejected     = "rejected"
	decisionExpired      = "expired"
	defaultInvokeTimeout = 30 * time.Second
	// MaxRetryAfter caps the wait a gateway may ask for before the next
	// connect (a refusal's retryAfterMs, an HTTP Retry-After).
	MaxRetryAfter = 15 * time.Minute
	// refusers answer requests beyond MaxConcurrent in parallel.
	refusers = 4
)

// Sentinel errors that end Host.Run: the person has to act.
var (
	// ErrNotPaired: the gateway does not know this device and no setup code
	// was given.
	ErrNotPaired = errors.New("this device is not paired with the gateway")
	// ErrRejected: the person rejected the pairing request.
	ErrRejected = errors.New("the pairing request was rejected")
	// ErrExpired: the first pairing request expired unanswered.
	ErrExpired = errors.New("the pairing request expired before anyone approved it")
	// ErrPairing: the gateway refused the first pairing (a wrong, used or
	// expired setup code, too many tries).
	ErrPairing = errors.New("the gateway refused to pair")
	// ErrPinMismatch: the gateway's TLS certificate is not the pinned one, or
	// a given fingerprint differs from the pinned one.
	ErrPinMismatch = errors.New("TLS fingerprint mismatch")
	// ErrOtherGateway: node.json pairs this host with another gateway.
	ErrOtherGateway = errors.New("this node is paired with another gateway")
	// ErrNoGateway: not enough is known to reach a gateway.
	ErrNoGateway = errors.New("no gateway to connect to")
)

// Options configure a Host. Zero values take the documented defaults.
type Options struct {
	// State is the opened state dir (required).
	State *State
	// Approvals is the exec approvals file (default: the one in State.Dir,
	// created with mode "ask" when missing).
	Approvals *ApprovalsFile
	// Target is first-contact input (the pairing URL, --gateway,
	// --fingerprint, --gateway-id, --code). A pinned fingerprint or gateway
	// id in node.json is never replaced by it: a difference is an error.
	// Its URL replaces the saved one (the gateway moved).
	Target Target
	// Discover finds gateways on the LAN (mDNS, package discovery) when
	// neither Target nor node.json has a URL; also used again when the
	// saved address stops answering. Fingerprints found this way are hints
	// for the first contact only.
	Discover func(ctx context.Context) ([]Target, error)
	// DisplayName is what the host calls itself (default: the host name).
	DisplayName string
	// Version is reported in connect client.version.
	Version string
	// Notifier is system.notify's notifier (default "notify-send").
	Notifier string
	// Log receives the host's log lines (default: discard). Tokens and
	// setup codes are never logged.
	Log *slog.Logger
	// MinBackoff and MaxBackoff bound the reconnect delay (defaults 500 ms
	// and 30 s); each failed attempt doubles it, with jitter (half fixed,
	// half random).
	MinBackoff, MaxBackoff time.Duration
	// MaxConcurrent caps invocations running at once (default 8). A
	// request beyond it is answered at once with node.invoke.result error
	// UNAVAILABLE, retryable (nothing waits in a queue on the host); the
	// gateway then fails that node.invoke with UNAVAILABLE. Other events
	// (token rotations, pairing decisions) never wait behind requests.
	MaxConcurrent int
	// DialTimeout bounds one connect attempt (default 20 s).
	DialTimeout time.Duration
	// OnStatus, if set, is told of each status change (for the CLI).
	OnStatus func(Status)
	// StatusPoll is how often a pending host asks device.pair.status, in
	// case a decision event was missed or the request ended without one
	// (default 30 s).
	StatusPoll time.Duration
	// LastInput reports how long ago the person last gave this computer
	// input (keyboard, mouse), and false when the platform cannot say
	// (default: LastInput, see idle_*.go). A paired host sends it as
	// presence.update {lastInputSeconds} on connect and every
	// PresenceInterval; while it is unknown nothing is sent (after a known
	// value: null, which clears it).
	LastInput func() (time.Duration, bool)
	// PresenceInterval is how often the host reports LastInput (default
	// 60 s).
	PresenceInterval time.Duration
	// FFmpeg is the ffmpeg executable of the default Capture: a path, or a
	// name looked up in PATH (default "ffmpeg").
	FFmpeg string
	// Capture serves the media commands (camera.*, screen.*) through
	// ffmpeg (default capture.New with FFmpeg and the other defaults).
	// They are declared only when its ffmpeg was found (Host.LeftOut says
	// why not).
	Capture *capture.Capturer
	// Sender sends a media command's file (default: an rtc.Sender whose
	// ICE candidates are on the address this computer reaches the gateway
	// from).
	Sender Sender
}

// Status is the host's situation, for people.
type Status struct {
	// State is "connecting", "pending" (waiting for approval; RequestID),
	// "paired" (connected, serving), "disconnected" (Err says why; the host
	// retries after Retry), "repair" (the token was refused; asking again).
	State     string
	GatewayID string
	URL       string
	RequestID string
	Retry     time.Duration
	Err       error
}

// Host is `atrium node`'s connection to its gateway and the commands it
// serves. Create with New, then Run.
type Host struct {
	o   Options
	log *slog.Logger
	cmd *Commander
	// dialURL etc. are the current target (Run's goroutine only).
	target Target
	// tx are the media transfers being sent (node.media.cancel).
	tx transfers
}

// New checks o and applies the defaults.
func New(o Options) (*Host, error) {
	if o.State == nil {
		return nil, errors.New("nodehost: Options.State is required")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Approvals == nil {
		o.Approvals = NewApprovalsFile(o.State.Dir)
	}
	if err := o.Approvals.Ensure(); err != nil {
		return nil, err
	}
	if o.DisplayName == "" {
		o.DisplayName = o.State.Config().DisplayName
	}
	if o.DisplayName == "" {
		o.DisplayName, _ = os.Hostname()
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 500 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = o.MinBackoff
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = 8
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 20 * time.Second
	}
	if o.StatusPoll <= 0 {
		o.StatusPoll = 30 * time.Second
	}
	if o.LastInput == nil {
		o.LastInput = LastInput
	}
	if o.PresenceInterval <= 0 {
		o.PresenceInterval = 60 * time.Second
	}
	if o.Capture == nil {
		o.Capture = capture.New(capture.Options{FFmpeg: o.FFmpeg})
	}
	h := &Host{o: o, log: o.Log}
	h.cmd = &Commander{Runner: &Runner{Approvals: o.Approvals, Log: o.Log}, Notifier: o.Notifier, Log: o.Log,
		Capture: o.Capture, transfers: &h.tx}
	if left, why := h.LeftOut(); len(left) > 0 {
		h.log.Warn("media commands not declared", "commands", strings.Join(left, ","), "reason", why.Error())
	}
	return h, nil
}

// Commands is what the host declares at connect: Commands(), and
// MediaCommands() when ffmpeg was found.
func (h *Host) Commands() []string { return h.cmd.served() }

// Caps is the capability list declared at connect: system, and camera and
// screen when ffmpeg was found.
func (h *Host) Caps() []string {
	if h.o.Capture.Available() == nil {
		return append(Caps(), CapCamera, CapScreen)
	}
	return Caps()
}

// LeftOut is the commands this host serves only with ffmpeg and why they
// are not declared (an error wrapping capture.ErrFFmpegNotFound that says
// how to install it); nil, nil when ffmpeg was found.
func (h *Host) LeftOut() ([]string, error) {
	if err := h.o.Capture.Available(); err != nil {
		return MediaCommands(), err
	}
	return nil, nil
}

// Backoff is the delay before reconnect attempt n (0-based): min·2ⁿ capped
// at max, of which half is fixed and half uniformly random (r in [0,1)).
func Backoff(n int, minD, maxD time.Duration, r float64) time.Duration {
	d := minD
	for i := 0; i < n && d < maxD; i++ {
		d *= 2
	}
	d = min(d, maxD)
	return d/2 + time.Duration(r*float64(d/2))
}

func (h *Host) status(s Status) {
	s.GatewayID, s.URL = h.target.GatewayID, h.target.URL
	if h.o.OnStatus != nil {
		h.o.OnStatus(s)
	}
}

// outcome is what one connection attempt led to.
type outcome struct {
	helloOK    bool          // the handshake succeeded (reset the backoff)
	again      bool          // reconnect at once (a token arrived or was dropped)
	unreached  bool          // the gateway could not be reached (network)
	retryAfter time.Duration // the gateway asked to wait this long before the next try
}

// Run connects, pairs if needed, serves commands and reconnects until ctx
// ends (then nil) or something only a person can fix happens: ErrNotPaired,
// ErrRejected, ErrExpired, ErrPairing, ErrPinMismatch, ErrOtherGateway,
// ErrNoGateway (wrapped with details).
func (h *Host) Run(ctx context.Context) error {
	if err := h.resolve(ctx); err != nil {
		return err
	}
	code := h.target.SetupCode
	attempt, quick := 0, 0
	const maxQuick = 3
	for {
		h.status(Status{State: "connecting"})
		out, err := h.session(ctx, code)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && isFatal(err) {
			return err
		}
		if out.helloOK {
			// A pending request exists now (or the device is paired): the
			// code is spent; a reconnect asks with the proof alone.
			code = ""
			attempt = 0
		}
		// Reconnect at once after a token arrived or was dropped, but never
		// in a tight loop (a gateway that keeps refusing what it just gave).
		if out.again && quick < maxQuick {
			quick++
			continue
		}
		quick = 0
		wait := Backoff(attempt, h.o.MinBackoff, h.o.MaxBackoff, rand.Float64())
		attempt++
		if out.retryAfter > 0 {
			// The gateway said when: wait that long (never less), plus a
			// little jitter so that hosts it refused together spread out.
			wait = min(out.retryAfter, MaxRetryAfter) + time.Duration(rand.Float64()*float64(h.o.MinBackoff))
		}
		h.log.Info("node disconnected; reconnecting", "in", wait.Round(time.Millisecond), "err", err)
		h.status(Status{State: "disconnected", Retry: wait, Err: err})
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		if out.unreached && h.o.Discover != nil && h.o.Target.URL == "" {
			h.rediscover(ctx)
		}
	}
}

func isFatal(err error) bool {
	for _, e := range []error{ErrNotPaired, ErrRejected, ErrExpired, ErrPairing, ErrPinMismatch, ErrOtherGateway, ErrNoGateway} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// resolve combines node.json, Options.Target and discovery into h.target.
func (h *Host) resolve(ctx context.Context) error {
	cfg := h.o.State.Config()
	in := h.o.Target
	if in.GatewayID != "" && cfg.GatewayID != "" && !strings.EqualFold(in.GatewayID, cfg.GatewayID) {
		return fmt.Errorf("%w: node.json has gateway %s, asked for %s (use another --state for another gateway)", ErrOtherGateway, short(cfg.GatewayID), short(in.GatewayID))
	}
	if in.TLSSHA256 != "" && cfg.TLSSHA256 != "" && !strings.EqualFold(in.TLSSHA256, cfg.TLSSHA256) {
		return fmt.Errorf("%w: the pinned fingerprint in node.json is %s, the given one %s; if the gateway's certificate really changed, remove tlsSha256 from %s", ErrPinMismatch, short(cfg.TLSSHA256), short(in.TLSSHA256), ConfigFileName)
	}
	saved := Target{URL: cfg.GatewayURL, GatewayID: cfg.GatewayID, TLSSHA256: cfg.TLSSHA256}
	// Pinned values first; a newly given URL replaces the saved address.
	t := Target{URL: in.URL, GatewayID: saved.GatewayID, TLSSHA256: saved.TLSSHA256, SetupCode: in.SetupCode}.merge(in).merge(saved)
	if t.URL == "" && h.o.Discover != nil {
		found, err := h.discover(ctx, t)
		if err != nil {
			return err
		}
		t = t.merge(found)
	}
	switch {
	case t.URL == "":
		return fmt.Errorf("%w: give the pairing URL (--url), --gateway, or --discover", ErrNoGateway)
	case t.GatewayID == "":
		return fmt.Errorf("%w: the gateway id is unknown: use the pairing URL from `atrium pair` (--url), --discover, or --gateway-id", ErrNoGateway)
	case strings.HasPrefix(t.URL, "wss:") && t.TLSSHA256 == "":
		return fmt.Errorf("%w: no TLS fingerprint to pin for %s: use the pairing URL (--url), --discover, or --fingerprint", ErrNoGateway, t.URL)
	}
	h.target = t
	return nil
}

// discover browses for gateways and picks the one for t (its gateway id
// when known, else the only one found).
func (h *Host) discover(ctx context.Context, t Target) (Target, error) {
	found, err := h.o.Discover(ctx)
	if err != nil {
		return Target{}, fmt.Errorf("%w: discovery: %v", ErrNoGateway, err)
	}
	var match []Target
	for _, g := range found {
		if t.GatewayID == "" || strings.EqualFold(g.GatewayID, t.GatewayID) {
			match = append(match, g)
		}
	}
	switch {
	case len(match) == 0 && t.GatewayID != "":
		return Target{}, fmt.Errorf("%w: discovery found no gateway with id %s (%d others)", ErrNoGateway, short(t.GatewayID), len(found))
	case len(match) == 0:
		return Target{}, fmt.Errorf("%w: discovery found no gateway", ErrNoGateway)
	case len(match) > 1 && t.GatewayID == "":
		var names []string
		for _, g := range match {
			names = append(names, g.URL+" (id "+short(g.GatewayID)+")")
		}
		return Target{}, fmt.Errorf("%w: discovery found several gateways, say which with --gateway or --gateway-id: %s", ErrNoGateway, strings.Join(names, ", "))
	}
	g := match[0]
	if t.TLSSHA256 != "" && g.TLSSHA256 != "" && !strings.EqualFold(g.TLSSHA256, t.TLSSHA256) {
		// A hint never overrides the pin; the TLS handshake decides.
		h.log.Warn("advertised TLS fingerprint differs from the pinned one; keeping the pinned one", "gatewayId", short(g.GatewayID))
	}
	h.log.Info("gateway discovered", "url", g.URL, "gatewayId", short(g.GatewayID))
	return g, nil
}

// rediscover looks for the paired gateway at a new address.
func (h *Host) rediscover(ctx context.Context) {
	g, err := h.discover(ctx, Target{GatewayID: h.target.GatewayID, TLSSHA256: h.target.TLSSHA256})
	if err != nil || g.URL == h.target.URL {
		return
	}
	h.log.Info("gateway found at a new address", "url", g.URL)
	h.target.URL = g.URL
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12] + "…"
	}
	return s
}

// peerCert records the certificate a connection's TLS handshake accepted.
type peerCert struct {
	mu        sync.Mutex
	der, spki string // hex SHA-256
}

// httpClient is the HTTP client of a wss:// dial: TLS pinned to the
// certificate fingerprint, or to the public key learned with it (a renewal
// by the gateway keeps its key). nil for ws:// (loopback).
func (h *Host) httpClient(seen *peerCert) (*http.Client, error) {
	if !strings.HasPrefix(h.target.URL, "wss:") {
		return nil, nil
	}
	fp, err := gwid.ParseFingerprint(h.target.TLSSHA256)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPinMismatch, err)
	}
	spki := strings.ToLower(h.o.State.Config().TLSSPKISHA256)
	tc := gwid.PinnedClientConfig(fp)
	strict := tc.VerifyConnection
	tc.VerifyConnection = func(cs tls.ConnectionState) error {
		err := strict(cs)
		if len(cs.PeerCertificates) == 0 {
			return err
		}
		leaf := cs.PeerCertificates[0]
		keySum := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
		if err != nil && (spki == "" || hex.EncodeToString(keySum[:]) != spki) {
			return err
		}
		derSum := sha256.Sum256(leaf.Raw)
		seen.mu.Lock()
		seen.der, seen.spki = hex.EncodeToString(derSum[:]), hex.EncodeToString(keySum[:])
		seen.mu.Unlock()
		return nil
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}, nil
}

// session is one connection: dial, then wait for approval or serve until
// it closes.
func (h *Host) session(ctx context.Context, code string) (outcome, error) {
	cfg := h.o.State.Config()
	token := cfg.Tokens[gateway.RoleNode]
	in := newInbox(h.o.MaxConcurrent, h.log)
	var seen peerCert
	hc, err := h.httpClient(&seen)
	if err != nil {
		return outcome{}, err
	}
	if hc != nil {
		defer hc.CloseIdleConnections()
	}
	opts := gateway.ClientOptions{
		URL: h.target.URL, Device: h.o.State.Key(), GatewayID: h.target.GatewayID,
		DeviceToken: token, HTTPClient: hc, Role: gateway.RoleNode,
		Caps: h.Caps(), Commands: h.Commands(), OnEvent: in.handle,
		Client: gateway.ClientInfo{ID: "atrium-node", Version: h.o.Version, Platform: runtime.GOOS + "/" + runtime.GOARCH,
			Mode: "node", InstanceID: h.o.State.DeviceID(), DisplayName: h.o.DisplayName},
	}
	if token == "" {
		opts.SetupCode = code
	}
	dctx, cancel := context.WithTimeout(ctx, h.o.DialTimeout)
	c, err := gateway.Dial(dctx, opts)
	cancel()
	if err != nil {
		return h.dialFailed(err, token, code, cfg)
	}
	defer c.Close()
	if err := h.saveTarget(&seen); err != nil {
		return outcome{helloOK: true}, err
	}
	a := c.Auth()
	if tok := a.DeviceTokens[gateway.RoleNode]; tok != "" {
		if err := h.storeToken(tok); err != nil {
			return outcome{helloOK: true}, err
		}
		if a.Status != gateway.AuthPaired {
			return outcome{helloOK: true, again: true}, nil
		}
	}
	switch a.Status {
	case gateway.AuthPaired:
		h.log.Info("node connected", "gatewayId", short(h.target.GatewayID), "deviceId", short(h.o.State.DeviceID()))
		h.status(Status{State: "paired"})
		return outcome{helloOK: true}, h.serve(ctx, c, in)
	case gateway.AuthPending:
		return h.waitApproval(ctx, c, in, a.RequestID, token == "" && cfg.PairedAt == "")
	}
	return outcome{helloOK: true}, fmt.Errorf("gateway admitted this node as %q, status %q; expected a paired node", a.Role, a.Status)
}

// dialFailed classifies a failed connect.
func (h *Host) dialFailed(err error, token, code string, cfg Config) (outcome, error) {
	var ge *gateway.Error
	if errors.As(err, &ge) {
		reason, _ := ge.Details["reason"].(string)
		if reason == reasonRateLimited {
			// Too many tries from here (setup codes): not the person's
			// mistake. Wait as long as the gateway says and try again
			// with the same code.
			wait, _ := gateway.RetryAfter(err)
			h.log.Warn("the gateway limits connects from here; waiting", "retryAfter", wait)
			return outcome{retryAfter: wait}, fmt.Errorf("connect refused (rate limited): %w", err)
		}
		if reason == reasonTokenMismatch && token != "" {
			// The gateway no longer accepts our token (rotated or revoked
			// elsewhere, or it lost it). Drop only the token and ask again
			// with the proof: a repair request. The key stays.
			h.log.Warn("device token refused; dropping it and asking for a repair", "gatewayId", short(h.target.GatewayID))
			h.status(Status{State: "repair", Err: err})
			if serr := h.storeToken(""); serr != nil {
				return outcome{}, serr
			}
			return outcome{again: true}, nil
		}
		firstPairing := token == "" && cfg.PairedAt == ""
		switch {
		case ge.Code == gateway.CodeNotPaired && code == "":
			return outcome{}, fmt.Errorf("%w (%s): pair it with a setup code from `atrium pair` (--url or --code)", ErrNotPaired, ge.Message)
		case firstPairing && code != "" && (ge.Code == gateway.CodeUnauthorized || ge.Code == gateway.CodeForbidden || ge.Code == gateway.CodeNotPaired || ge.Code == gateway.CodeInvalidRequest):
			return outcome{}, fmt.Errorf("%w: %s", ErrPairing, ge.Message)
		}
		return outcome{}, fmt.Errorf("connect refused: %w", err)
	}
	if errors.Is(err, gwid.ErrFingerprintMismatch) {
		if cfg.GatewayID == "" {
			return outcome{}, fmt.Errorf("%w: %v", ErrPinMismatch, err)
		}
		// Paired already: keep trying (a person may restore the certificate)
		// but say it loudly each time.
		h.log.Error("gateway TLS certificate is not the pinned one; refusing to connect", "url", h.target.URL, "err", err)
		return outcome{unreached: true}, err
	}
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		return outcome{}, err
	}
	var ue *gateway.UpgradeError
	if errors.As(err, &ue) {
		// The gateway answered, but not with a WebSocket (e.g. 503 while
		// its connection caps are full): try again when it says.
		wait, _ := gateway.RetryAfter(err)
		return outcome{retryAfter: wait}, err
	}
	return outcome{unreached: true}, err
}

// saveTarget records the gateway in node.json after a successful
// handshake: the first contact pins the fingerprint, its key and the id; a
// certificate renewed with the pinned key is re-pinned.
func (h *Host) saveTarget(seen *peerCert) error {
	seen.mu.Lock()
	der, spki := seen.der, seen.spki
	seen.mu.Unlock()
	if der != "" && der != strings.ToLower(h.target.TLSSHA256) {
		h.log.Info("gateway certificate renewed with the pinned key; pin updated", "gatewayId", short(h.target.GatewayID))
		h.target.TLSSHA256 = der
	}
	cfg := h.o.State.Config()
	t := h.target
	if spki == "" {
		spki = cfg.TLSSPKISHA256
	}
	if cfg.GatewayURL == t.URL && cfg.GatewayID == t.GatewayID && cfg.TLSSHA256 == t.TLSSHA256 && cfg.TLSSPKISHA256 == spki && cfg.DisplayName == h.o.DisplayName {
		return nil
	}
	return h.o.State.Update(func(c *Config) {
		c.GatewayURL, c.GatewayID, c.TLSSHA256, c.TLSSPKISHA256, c.DisplayName = t.URL, t.GatewayID, t.TLSSHA256, spki, h.o.DisplayName
	})
}

// storeToken saves (or, with "", drops) the node token.
func (h *Host) storeToken(tok string) error {
	return h.o.State.Update(func(c *Config) {
		if tok == "" {
			delete(c.Tokens, gateway.RoleNode)
			return
		}
		if c.Tokens == nil {
			c.Tokens = map[string]string{}
		}
		c.Tokens[gateway.RoleNode] = tok
		if c.PairedAt == "" {
			c.PairedAt = time.Now().UTC().Format(time.RFC3339)
		}
	})
}

// pairResolved is device.pair.resolved as the pending device receives it.
type pairResolved struct {
	RequestID    string            `json:"requestId"`
	DeviceID     string            `json:"deviceId"`
	Decision     string            `json:"decision"`
	DeviceTokens map[string]string `json:"deviceTokens"`
}

// waitApproval waits on a pending connection for the person's decision:
// the device.pair.resolved event, or (every StatusPoll, for an event
// missed or a request that ended without one) device.pair.status.
func (h *Host) waitApproval(ctx context.Context, c *gateway.Client, in *inbox, requestID string, first bool) (outcome, error) {
	h.log.Info("waiting for approval on the gateway", "requestId", requestID, "deviceId", short(h.o.State.DeviceID()))
	h.status(Status{State: "pending", RequestID: requestID})
	poll := time.NewTicker(h.o.StatusPoll)
	defer poll.Stop()
	for {
		var r pairResolved
		select {
		case <-ctx.Done():
			return outcome{helloOK: true}, nil
		case <-poll.C:
			var st struct {
				Status       string            `json:"status"`
				DeviceTokens map[string]string `json:"deviceTokens"`
			}
			pctx, cancel := context.WithTimeout(ctx, h.o.DialTimeout)
			err := c.Call(pctx, MethodPairStatus, struct{}{}, &st)
			cancel()
			if ctx.Err() != nil {
				return outcome{helloOK: true}, nil
			}
			if err != nil {
				// A connection that cannot answer is dead: reconnect.
				return outcome{helloOK: true}, fmt.Errorf("device.pair.status: %w", err)
			}
			switch st.Status {
			case "approved":
				r = pairResolved{RequestID: requestID, Decision: decisionApproved, DeviceTokens: st.DeviceTokens}
			case "none":
				// Rejected or expired without an event reaching us.
				r = pairResolved{RequestID: requestID, Decision: decisionExpired}
			default:
				continue
			}
		case <-in.controlWake:
			var ok bool
			if r, ok = h.pairDecision(in); !ok {
				continue
			}
		case <-c.Done():
			// The reader took every event before the close: a decision
			// sent just before it (a rejection is followed by 4001) is
			// in the inbox.
			var ok bool
			if r, ok = h.pairDecision(in); !ok {
				return outcome{helloOK: true}, fmt.Errorf("connection closed while waiting for approval: %w", c.Err())
			}
		}
		switch r.Decision {
		case decisionApproved:
			tok := r.DeviceTokens[gateway.RoleNode]
			if tok == "" {
				return outcome{helloOK: true}, fmt.Errorf("%w: approved without the node role (approve it with role node)", ErrPairing)
			}
			if err := h.storeToken(tok); err != nil {
				return outcome{helloOK: true}, err
			}
			h.log.Info("pairing approved", "requestId", r.RequestID)
			return outcome{helloOK: true, again: true}, nil
		case decisionRejected:
			return outcome{helloOK: true}, fmt.Errorf("%w (request %s)", ErrRejected, r.RequestID)
		case decisionExpired:
			if first {
				return outcome{helloOK: true}, fmt.Errorf("%w (request %s is no longer pending); run again with a new code", ErrExpired, r.RequestID)
			}
			// A repair: ask again.
			return outcome{helloOK: true, again: true}, nil
		}
	}
}

// pairDecision returns the first device.pair.resolved for this device
// among the control events received so far.
func (h *Host) pairDecision(in *inbox) (pairResolved, bool) {
	for _, ev := range in.takeControl() {
		if ev.Event != EventPairResolved {
			continue
		}
		var r pairResolved
		if err := json.Unmarshal(ev.Payload, &r); err != nil {
			h.log.Warn("bad device.pair.resolved event", "err", err)
			continue
		}
		if r.DeviceID != "" && r.DeviceID != h.o.State.DeviceID() {
			continue
		}
		return r, true
	}
	return pairResolved{}, false
}

// invokeRequest is node.invoke.request's payload.
type invokeRequest struct {
	ID        string          `json:"id"`
	Command   string          `json:"command"`
	Params    json.RawMessage `json:"params"`
	TimeoutMs int64           `json:"timeoutMs"`
}

// invokeResult is node.invoke.result's params.
type invokeResult struct {
	ID      string        `json:"id"`
	OK      bool          `json:"ok"`
	Payload any           `json:"payload,omitempty"`
	Error   *CommandError `json:"error,omitempty"`
	Media   *MediaRef     `json:"media,omitempty"`
}

// mediaID is the transfer id in a media command's params ("" when none).
func mediaID(params json.RawMessage) string {
	var p struct {
		Transfer transferParams `json:"transfer"`
	}
	_ = json.Unmarshal(params, &p)
	return p.Transfer.ID
}

type tokenRotated struct {
	Role        string `json:"role"`
	DeviceToken string `json:"deviceToken"`
}

// serve answers invocations until the connection ends or ctx does:
// MaxConcurrent workers run the admitted requests, the refusers answer
// the others UNAVAILABLE at once, and this loop applies the control events
// and watches for a silent connection.
func (h *Host) serve(ctx context.Context, c *gateway.Client, in *inbox) error {
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// Runs still going when the connection ends are stopped: their results
	// can no longer be delivered (the caller was told the node went).
	defer func() { cancel(); wg.Wait() }()
	for range h.o.MaxConcurrent {
		wg.Go(func() {
			for {
				select {
				case <-sctx.Done():
					return
				case req := <-in.runs:
					h.invoke(sctx, c, req)
					in.done()
				}
			}
		})
	}
	for range refusers {
		wg.Go(func() {
			for {
				id, ok := in.takeRefusal()
				if !ok {
					select {
					case <-sctx.Done():
						return
					case <-in.refuseWake:
						continue
					}
				}
				signal(in.refuseWake) // more may wait: let another refuser take them
				h.reply(sctx, c, invokeResult{ID: id, Error: &CommandError{Code: CodeUnavailable, Retryable: true,
					Message: fmt.Sprintf("node busy: %d commands running, try again later", h.o.MaxConcurrent)}})
			}
		})
	}
	wg.Go(func() { h.reportInput(sctx, c) })
	silence := h.maxSilence(c)
	quiet := time.NewTimer(silence)
	defer quiet.Stop()
	for {
		select {
		case <-ctx.Done():
			h.applyControl(in)
			return nil
		case <-quiet.C:
			// No tick: the network went away without closing the socket.
			h.applyControl(in)
			h.log.Warn("the gateway went silent; reconnecting", "silentFor", silence)
			c.CloseNow()
			return fmt.Errorf("no frame from the gateway for %s", silence)
		case <-c.Done():
			// Every event read before the close is in the inbox: a token
			// rotated just before a close is kept.
			h.applyControl(in)
			return fmt.Errorf("connection closed: %w", c.Err())
		case <-in.alive:
			quiet.Reset(silence)
		case <-in.controlWake:
			h.applyControl(in)
		}
	}
}

// applyControl applies the control events received so far: a rotated
// node token is saved.
func (h *Host) applyControl(in *inbox) {
	for _, ev := range in.takeControl() {
		if ev.Event == EventMediaCancel {
			var mc struct {
				TransferID string `json:"transferId"`
				Code       string `json:"code"`
			}
			if json.Unmarshal(ev.Payload, &mc) == nil && h.tx.stop(mc.TransferID, mc.Code) {
				h.log.Info("media transfer cancelled by the gateway", "transfer", mc.TransferID, "code", mc.Code)
			}
			continue
		}
		if ev.Event != EventTokenRotated {
			continue
		}
		var r tokenRotated
		if err := json.Unmarshal(ev.Payload, &r); err != nil || r.Role != gateway.RoleNode || r.DeviceToken == "" {
			continue
		}
		if err := h.storeToken(r.DeviceToken); err != nil {
			h.log.Error("rotated device token not saved", "err", err)
			continue
		}
		h.log.Info("device token rotated")
	}
}

// reportInput sends presence.update {lastInputSeconds} now and every
// PresenceInterval while ctx lasts: the value of Options.LastInput, or
// null once after a known value when it becomes unknown; nothing while it
// was never known. A gateway that does not take it (an older one) is not
// asked again on this connection.
func (h *Host) reportInput(ctx context.Context, c *gateway.Client) {
	t := time.NewTicker(h.o.PresenceInterval)
	defer t.Stop()
	known := false
	for {
		if d, ok := h.o.LastInput(); ok || known {
			var secs *float64
			if ok {
				v := d.Seconds()
				secs = &v
			}
			known = ok
			if !h.sendInput(ctx, c, secs) {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sendInput sends one presence.update (secs nil: null, unknown); false
// when the gateway refuses the method itself.
func (h *Host) sendInput(ctx context.Context, c *gateway.Client, secs *float64) bool {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := c.Call(rctx, MethodPresenceUpdate, map[string]*float64{"lastInputSeconds": secs}, nil)
	var ge *gateway.Error
	if errors.As(err, &ge) && (ge.Code == gateway.CodeNotFound || ge.Code == gateway.CodeForbidden || ge.Code == gateway.CodeInvalidRequest) {
		h.log.Warn("the gateway does not take presence.update; not reporting input", "err", err)
		return false
	}
	if err != nil && ctx.Err() == nil {
		h.log.Debug("presence.update failed", "err", err)
	}
	return true
}

// maxSilence is how long a connection may go without any frame from the
// gateway (it sends a tick every policy.tickIntervalMs) before the host
// takes it for dead: three tick intervals.
func (h *Host) maxSilence(c *gateway.Client) time.Duration {
	tick := time.Duration(c.Hello().Policy.TickIntervalMs) * time.Millisecond
	if tick <= 0 {
		tick = 30 * time.Second
	}
	return 3 * tick
}

// invoke runs one command and sends its result.
func (h *Host) invoke(ctx context.Context, c *gateway.Client, req invokeRequest) {
	timeout := defaultInvokeTimeout
	if req.TimeoutMs > 0 {
		timeout = time.Duration(req.TimeoutMs) * time.Millisecond
	}
	ictx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := *h.cmd
	runner := *cmd.Runner
	runner.Ask = func(ctx context.Context, q AskRequest) (string, error) {
		var out struct {
			Decision string `json:"decision"`
		}
		if err := c.Call(ctx, MethodExecAsk, q, &out); err != nil {
			return "", err
		}
		return out.Decision, nil
	}
	cmd.Runner = &runner
	cmd.Signal = func(ctx context.Context, sdp string) (string, error) {
		var out struct {
			SDP string `json:"sdp"`
		}
		if err := c.Call(ctx, MethodMediaOffer, map[string]string{"transferId": mediaID(req.Params), "sdp": sdp}, &out); err != nil {
			return "", fmt.Errorf("node.media.offer: %w", err)
		}
		return out.SDP, nil
	}
	cmd.Send = h.o.Sender
	if cmd.Send == nil {
		snd := &rtc.Sender{}
		if ip := bindIPFor(h.target.URL); ip != nil {
			snd.Config.BindIPs = []net.IP{ip}
		}
		cmd.Send = snd.Send
	}
	cmd.Call = func(ctx context.Context, method string, params, out any) error {
		return c.Call(ctx, method, params, out)
	}
	cmd.Background = ctx
	if ip := bindIPFor(h.target.URL); ip != nil {
		cmd.LiveConfig.BindIPs = []net.IP{ip}
	}
	start := time.Now()
	payload, err := cmd.Invoke(ictx, req.Command, req.Params)
	res := invokeResult{ID: req.ID, OK: err == nil, Payload: payload}
	if mr, ok := payload.(*MediaResult); ok {
		res.Payload, res.Media = mr.Payload, &mr.Media
	}
	if err != nil {
		var ce *CommandError
		if !errors.As(err, &ce) {
			ce = cmdErr(CodeInternal, "%s: %v", req.Command, err)
		}
		res.Payload, res.Error = nil, ce
	}
	h.log.Info("node.invoke answered", "command", req.Command, "ok", res.OK, "ms", time.Since(start).Milliseconds())
	h.reply(ctx, c, res)
}

func (h *Host) reply(ctx context.Context, c *gateway.Client, res invokeResult) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := c.Call(rctx, MethodInvokeResult, res, nil); err != nil {
		h.log.Warn("node.invoke.result not delivered", "id", res.ID, "err", err)
	}
}
