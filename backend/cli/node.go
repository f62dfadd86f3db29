package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/atrium-dev/atrium/backend/discovery"
	"github.com/atrium-dev/atrium/backend/gwid"
	"github.com/atrium-dev/atrium/backend/nodehost"
)

// nodeHelp is `atrium node --help`'s text below the description.
const nodeHelp = "The first time, pair with the URL `atrium pair` shows on the gateway (its QR\n" +
	"code): --url 'https://HOST:PORT/pair#c=…&g=…&f=…'; or --discover --code CODE\n" +
	"to find the gateway on the LAN by mDNS; or --gateway https://HOST:PORT --code\n" +
	"CODE --gateway-id ID --fingerprint HEX. Approve the request on the gateway\n" +
	"(Nodes panel, or `atrium nodes approve`). Later runs need no flags: the state\n" +
	"dir keeps the key, the gateway, its pinned certificate and the token.\n\n" +
	"State dir: --state, else ATRIUM_NODE_HOME, else ~/.atrium-node. What\n" +
	"system.run may run is in its exec-approvals.json (mode deny, allowlist, ask\n" +
	"or full; ask, the default, puts each command not on the allowlist to the\n" +
	"person on the gateway).\n\n" +
	"With ffmpeg (--ffmpeg, default ffmpeg from PATH) the node also serves\n" +
	"camera.list, camera.snap, camera.clip (Linux: the V4L2 cameras /dev/video*,\n" +
	"front the first, back the second), screen.snapshot and screen.record (Linux:\n" +
	"x11grab of $DISPLAY, X screen N with screen N; a Wayland session without\n" +
	"XWayland is not supported yet); each file goes to the gateway over a WebRTC\n" +
	"data channel. Without ffmpeg they are not offered, and the node says so when\n" +
	"it starts."

type nodeFlags struct {
	state, gateway, url, code, name, fingerprint, gatewayID string
	discover                                                bool
	discoverIfaces                                          string
	discoverWait                                            time.Duration
	verbose                                                 bool
	ffmpeg                                                  string
}

func runNode(ctx context.Context, args []string, o Options) error {
	fs := newFlagSet("node", o)
	var f nodeFlags
	var c common // --json only: the node's own state is --state
	c.registerJSON(fs)
	fs.StringVar(&f.state, "state", "", "node state `dir`ectory (env ATRIUM_NODE_HOME, default ~/.atrium-node)")
	fs.StringVar(&f.gateway, "gateway", "", "the gateway's `URL` (https://HOST:PORT, or the pairing URL)")
	fs.StringVar(&f.url, "url", "", "the pairing `URL` from `atrium pair` / the QR code (code, gateway id, fingerprint)")
	fs.StringVar(&f.code, "code", "", "setup `code` (XXXX-XXXX) for the first pairing")
	fs.StringVar(&f.name, "name", "", "the `name` this computer shows on the gateway (default: the host name)")
	fs.StringVar(&f.fingerprint, "fingerprint", "", "the gateway's TLS certificate SHA-256 `hex` to pin (first contact)")
	fs.StringVar(&f.gatewayID, "gateway-id", "", "the gateway's `id` (first contact without the pairing URL)")
	fs.BoolVar(&f.discover, "discover", false, "find the gateway on the LAN by mDNS (_atrium-gw._tcp)")
	fs.StringVar(&f.discoverIfaces, "discover-interfaces", "", "comma-separated network `interfaces` to browse (default: every multicast one)")
	fs.DurationVar(&f.discoverWait, "discover-wait", 3*time.Second, "how long to listen for mDNS answers")
	fs.BoolVar(&f.verbose, "verbose", false, "log every connection and command to standard error")
	fs.StringVar(&f.ffmpeg, "ffmpeg", "ffmpeg", "the ffmpeg `executable` for the camera and screen commands (a path, or a name looked up in PATH;\n"+
		"without it they are not offered)")
	pos, err := parse(fs, args, o)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: node takes no arguments (got %q)", errUsage, pos[0])
	}
	target, err := f.target()
	if err != nil {
		return err
	}
	dir := f.state
	if dir == "" {
		if dir, err = nodehost.DefaultDir(o.Getenv); err != nil {
			return err
		}
	}
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(o.Stderr, &slog.HandlerOptions{Level: level}))
	st, err := nodehost.OpenState(dir, log)
	if err != nil {
		return err
	}
	var h *nodehost.Host
	opts := nodehost.Options{State: st, Target: target, DisplayName: f.name, Version: o.Version, Log: log, FFmpeg: f.ffmpeg,
		OnStatus: nodeStatusPrinter(o, c.json, st.DeviceID(), func() []string { return h.Commands() })}
	if f.discover {
		var ifaces []string
		if f.discoverIfaces != "" {
			ifaces = strings.Split(f.discoverIfaces, ",")
		}
		opts.Discover = func(ctx context.Context) ([]nodehost.Target, error) {
			return browseGateways(ctx, ifaces, f.discoverWait)
		}
	}
	h, err = nodehost.New(opts)
	if err != nil {
		return err
	}
	left, why := h.LeftOut()
	switch {
	case c.json:
		line := map[string]any{"state": "starting", "deviceId": st.DeviceID(), "commands": h.Commands(), "caps": h.Caps()}
		if len(left) > 0 {
			line["leftOut"], line["leftOutReason"] = left, why.Error()
		}
		data, _ := json.Marshal(line)
		fmt.Fprintln(o.Stdout, string(data))
	default:
		fmt.Fprintf(o.Stdout, "atrium node: device %s, state %s\n", st.DeviceID(), dir)
		if len(left) > 0 {
			fmt.Fprintf(o.Stdout, "not serving %s: %v\n", strings.Join(left, ", "), why)
		}
	}
	return h.Run(ctx)
}

// target combines the pairing flags into first-contact input.
func (f *nodeFlags) target() (nodehost.Target, error) {
	if f.gateway != "" && f.url != "" {
		return nodehost.Target{}, fmt.Errorf("%w: give --gateway or --url, not both", errUsage)
	}
	var t nodehost.Target
	if raw := f.gateway + f.url; raw != "" {
		var err error
		if t, err = nodehost.ParseGatewayURL(raw); err != nil {
			return t, fmt.Errorf("%w: %v", errUsage, err)
		}
	}
	if f.code != "" {
		t.SetupCode = f.code
	}
	if f.fingerprint != "" {
		fp, err := gwid.ParseFingerprint(f.fingerprint)
		if err != nil {
			return t, fmt.Errorf("%w: --fingerprint: %v", errUsage, err)
		}
		if t.TLSSHA256 != "" && !strings.EqualFold(t.TLSSHA256, fmt.Sprintf("%x", fp)) {
			return t, fmt.Errorf("%w: --fingerprint differs from the pairing URL's", errUsage)
		}
		t.TLSSHA256 = fmt.Sprintf("%x", fp)
	}
	if f.gatewayID != "" {
		id := strings.ToLower(f.gatewayID)
		if t.GatewayID != "" && t.GatewayID != id {
			return t, fmt.Errorf("%w: --gateway-id differs from the pairing URL's", errUsage)
		}
		t.GatewayID = id
	}
	return t, nil
}

// browseGateways finds gateways by mDNS. What it finds is a hint: the host
// pins only what it had not pinned yet.
func browseGateways(ctx context.Context, ifaces []string, wait time.Duration) ([]nodehost.Target, error) {
	found, err := discovery.Browse(ctx, discovery.BrowseOptions{Interfaces: ifaces, Wait: wait})
	if err != nil {
		return nil, err
	}
	return gatewayTargets(found), nil
}

// gatewayTargets turns browsed gateways into targets: each at the first of
// its addresses the node can use (discovery orders them IPv4, IPv6,
// link-local IPv6 with its zone, so an IPv6 address is used when that is
// what the gateway offers); a gateway without an id or a usable address
// is left out.
func gatewayTargets(found []discovery.Gateway) []nodehost.Target {
	var out []nodehost.Target
	for _, g := range found {
		if g.GatewayID == "" {
			continue
		}
		for _, u := range g.URLs() {
			t, err := nodehost.ParseGatewayURL(u)
			if err != nil {
				continue
			}
			t.GatewayID, t.TLSSHA256 = g.GatewayID, g.TLSSHA256
			out = append(out, t)
			break
		}
	}
	return out
}

// nodeStatusPrinter tells the person what the node is doing: a line per
// change, or one JSON object per line with --json; served is what the
// node declares, called once it is paired.
func nodeStatusPrinter(o Options, asJSON bool, deviceID string, served func() []string) func(nodehost.Status) {
	last := ""
	return func(s nodehost.Status) {
		if asJSON {
			line := map[string]any{"state": s.State, "deviceId": deviceID, "gatewayId": s.GatewayID, "url": s.URL}
			if s.RequestID != "" {
				line["requestId"] = s.RequestID
			}
			if s.Err != nil {
				line["error"] = s.Err.Error()
			}
			if s.Retry > 0 {
				line["retryMs"] = s.Retry.Milliseconds()
			}
			data, _ := json.Marshal(line)
			fmt.Fprintln(o.Stdout, string(data))
			return
		}
		switch s.State {
		case "connecting":
			if last == "connecting" || last == "disconnected" {
				return // one line per outage, not per attempt
			}
			fmt.Fprintf(o.Stdout, "connecting to %s\n", s.URL)
		case "pending":
			fmt.Fprintf(o.Stdout, "waiting for approval (request %s): approve it on the gateway, in the Nodes panel or with `atrium nodes approve %s`\n", s.RequestID, s.RequestID)
		case "paired":
			fmt.Fprintf(o.Stdout, "connected to gateway %s as a paired node; serving %s\n", shortID(s.GatewayID), strings.Join(served(), ", "))
		case "repair":
			fmt.Fprintln(o.Stdout, "the gateway no longer accepts this node's token; asking it to repair the pairing (the key is kept)")
		case "disconnected":
			if last != "disconnected" {
				fmt.Fprintf(o.Stdout, "disconnected (%v); retrying with backoff\n", errText(s.Err))
			}
		}
		last = s.State
	}
}

func errText(err error) string {
	if err == nil {
		return "connection closed"
	}
	return err.Error()
}

func shortID(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
