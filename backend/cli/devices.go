package cli

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	qrcode "github.com/skip2/go-qrcode"
)

// pairCode is device.pair.code's answer (the fields the CLI shows).
type pairCode struct {
	Code             string    `json:"code"`
	Display          string    `json:"display"`
	CodeID           string    `json:"codeId"`
	MaxWrongTries    int       `json:"maxWrongTries"`
	ExpiresAt        time.Time `json:"expiresAt"`
	URL              string    `json:"url"`
	URLs             []string  `json:"urls"`
	QRPNG            string    `json:"qrPng"`
	GatewayID        string    `json:"gatewayId"`
	Fingerprint      string    `json:"fingerprint"`
	FingerprintWords string    `json:"fingerprintWords"`
	SPKI             string    `json:"spki"`
	LoopbackOnly     bool      `json:"loopbackOnly"`
	Note             string    `json:"note"`
}

// runPair runs `atrium pair`: asks the running app of the state dir for a
// setup code and prints its QR code in the terminal with the code, the URL,
// the fingerprint words, the certificate's SHA-256 and its public key's
// SPKI hash (--png FILE also writes the QR as a PNG).
func runPair(ctx context.Context, args []string, o Options) error {
	var c common
	fs := newFlagSet("pair", o)
	c.registerApp(fs)
	c.registerJSON(fs)
	png := fs.String("png", "", "also write the QR code as a PNG to `file`")
	light := fs.Bool("light", false, "print the QR code for a light terminal background (dark modules as blocks)")
	pos, err := parse(fs, args, o)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: pair takes no arguments", errUsage)
	}
	r, err := c.dialRunningApp(ctx, o, "pair")
	if err != nil {
		return err
	}
	defer r.Close()
	var pc pairCode
	if err := r.call(ctx, "device.pair.code", nil, &pc); err != nil {
		return err
	}
	if *png != "" {
		b, err := base64.StdEncoding.DecodeString(pc.QRPNG)
		if err != nil {
			return fmt.Errorf("the app's QR PNG is not base64: %w", err)
		}
		if err := os.WriteFile(*png, b, 0o600); err != nil {
			return fmt.Errorf("write QR PNG: %w", err)
		}
	}
	if c.json {
		return printJSON(o.Stdout, pc)
	}
	if err := printQR(o.Stdout, pc.URL, !*light); err != nil {
		return err
	}
	fmt.Fprintf(o.Stdout, "\nSetup code: %s (valid until %s, single use)\n", pc.Display, pc.ExpiresAt.Local().Format("15:04:05"))
	if pc.MaxWrongTries > 0 {
		fmt.Fprintf(o.Stdout, "It is locked after %d wrong codes tried on the network (someone guessing); the device then says so: run atrium pair again for a new one.\n", pc.MaxWrongTries)
	}
	fmt.Fprintf(o.Stdout, "Open on the device: %s\n", pc.URL)
	for _, u := range pc.URLs[min(1, len(pc.URLs)):] {
		fmt.Fprintf(o.Stdout, "  or: %s\n", u)
	}
	if pc.FingerprintWords != "" {
		fmt.Fprintf(o.Stdout, "Certificate fingerprint: %s\n  (the device shows these words: they must match)\n", pc.FingerprintWords)
	}
	if pc.Fingerprint != "" {
		fmt.Fprintf(o.Stdout, "Certificate SHA-256: %s\n", pc.Fingerprint)
	}
	if pc.SPKI != "" {
		fmt.Fprintf(o.Stdout, "Public key (SPKI SHA-256, base64): %s\n  (to pin the gateway, e.g. chromium --ignore-certificate-errors-spki-list=%s)\n", pc.SPKI, pc.SPKI)
	}
	if pc.Note != "" {
		fmt.Fprintf(o.Stdout, "Note: %s\n", pc.Note)
	}
	fmt.Fprintln(o.Stdout, "Then approve the request: atrium nodes pending, atrium nodes approve REQUEST_ID")
	return nil
}

// printQR writes text's QR code with Unicode half blocks (two module rows
// per line), quiet zone included. dark: for a dark terminal background,
// the light modules are printed as blocks.
func printQR(w io.Writer, text string, dark bool) error {
	q, err := qrcode.New(text, qrcode.Medium)
	if err != nil {
		return fmt.Errorf("QR code: %w", err)
	}
	bm := q.Bitmap() // true = dark module; includes the quiet zone
	ink := func(y, x int) bool {
		if y >= len(bm) {
			return !dark // the row below the last: background
		}
		return bm[y][x] != dark
	}
	var b strings.Builder
	for y := 0; y < len(bm); y += 2 {
		for x := range bm[y] {
			switch top, bot := ink(y, x), ink(y+1, x); {
			case top && bot:
				b.WriteRune('█')
			case top:
				b.WriteRune('▀')
			case bot:
				b.WriteRune('▄')
			default:
				b.WriteByte(' ')
			}
		}
		b.WriteByte('\n')
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// nodes subcommands and the methods they call.
var nodesMethods = map[string]string{
	"pending": "device.pair.list", "approve": "device.pair.approve", "reject": "device.pair.reject",
	"list": "device.list", "rotate": "device.token.rotate", "revoke": "device.token.revoke", "remove": "device.remove",
	"scope": "device.scope.set",
}

// scopeHelp says what a device's memory scope is (approve --scope, nodes scope).
const scopeHelp = "what the device reaches in memory as an operator: authenticated (what the ACL grants `authenticated`), " +
	"role:NAME (acting as that role), admin (everything, like this computer)"

// runNodes runs `atrium nodes pending|approve|reject|list|scope|rotate|revoke|remove`
// against the running app (device.* methods, as admin), and the node
// commands describe|invoke|run|notify|location get (nodecmds.go).
func runNodes(ctx context.Context, args []string, o Options) error {
	sub, args := takeCommand(args)
	if sub == "canvas" { // nodes canvas present|eval|a2ui push (canvascmds.go)
		return runCanvas(ctx, args, o)
	}
	if verbs, ok := nodeSubGroups[sub]; ok { // nodes location get, nodes camera snap: subcommands of two words
		verb, rest := takeCommand(args)
		switch {
		case slices.Contains(verbs, verb):
			sub, args = sub+" "+verb, rest
		case verb == "" && slices.ContainsFunc(rest, isHelpFlag):
			sub, args = sub+" "+verbs[0], rest
		case verb == "":
			return fmt.Errorf("%w: nodes %s needs a subcommand: %s", errUsage, sub, strings.Join(verbs, ", "))
		default:
			return fmt.Errorf("%w: unknown nodes %s subcommand %q (%s)", errUsage, sub, verb, strings.Join(verbs, ", "))
		}
	}
	if ok, err := group("nodes", sub, args, o); !ok {
		return err
	}
	if slices.Contains(nodeCommandSubs, sub) {
		return runNodeCommand(ctx, sub, args, o)
	}
	var c common
	fs := newFlagSet("nodes "+sub, o)
	c.registerApp(fs)
	c.registerJSON(fs)
	var roles, commands, role, scope string
	switch sub {
	case "approve":
		fs.StringVar(&roles, "roles", "", "comma-separated roles to approve (default: every role requested)")
		fs.StringVar(&commands, "commands", "", "comma-separated commands to approve (default: every command declared; \"none\" for none)")
		fs.StringVar(&scope, "scope", "authenticated", scopeHelp)
	case "rotate", "revoke":
		fs.StringVar(&role, "role", "", "the role's token (operator or node; revoke: default every role)")
	}
	pos, err := parse(fs, args, o)
	if err != nil {
		return err
	}
	want := 1
	switch sub {
	case "pending", "list":
		want = 0
	case "scope":
		want = 2
	}
	if len(pos) != want {
		c, _ := lookup("nodes " + sub)
		return fmt.Errorf("%w: usage: %s", errUsage, c.usage())
	}
	if sub == "rotate" && role == "" {
		return fmt.Errorf("%w: nodes rotate needs --role operator|node", errUsage)
	}
	r, err := c.dialRunningApp(ctx, o, "nodes "+sub)
	if err != nil {
		return err
	}
	defer r.Close()
	params := map[string]any{}
	switch sub {
	case "approve":
		params["requestId"] = pos[0]
		params["scope"] = scope
		if roles != "" {
			params["roles"] = splitList(roles)
		}
		switch commands {
		case "":
		case "none":
			params["commands"] = []string{}
		default:
			params["commands"] = splitList(commands)
		}
	case "reject":
		params["requestId"] = pos[0]
	case "scope":
		params["deviceId"], params["scope"] = pos[0], pos[1]
	case "rotate", "revoke", "remove":
		params["deviceId"] = pos[0]
		if role != "" {
			params["role"] = role
		}
	}
	var res map[string]any
	if err := r.call(ctx, nodesMethods[sub], params, &res); err != nil {
		return err
	}
	if c.json {
		return printJSON(o.Stdout, res)
	}
	return printNodes(o.Stdout, sub, pos, res)
}

// printNodes shows a nodes subcommand's result for people.
func printNodes(w io.Writer, sub string, pos []string, res map[string]any) error {
	str := func(m map[string]any, k string) string {
		switch v := m[k].(type) {
		case string:
			return v
		case []any:
			var parts []string
			for _, e := range v {
				parts = append(parts, fmt.Sprint(e))
			}
			if len(parts) == 0 {
				return "-"
			}
			return strings.Join(parts, ",")
		case nil:
			return "-"
		default:
			return fmt.Sprint(v)
		}
	}
	rows := func(key string) []map[string]any {
		list, _ := res[key].([]any)
		out := make([]map[string]any, 0, len(list))
		for _, e := range list {
			if m, ok := e.(map[string]any); ok {
				out = append(out, m)
			}
		}
		return out
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	switch sub {
	case "pending":
		reqs := rows("pending")
		if len(reqs) == 0 {
			fmt.Fprintln(w, "No pairing requests are waiting.")
			return nil
		}
		fmt.Fprintln(tw, "REQUEST\tKIND\tNAME\tPLATFORM\tROLES\tCOMMANDS\tSCOPE NOW\tFROM\tEXPIRES")
		for _, q := range reqs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", str(q, "requestId"), str(q, "kind"), str(q, "displayName"), str(q, "platform"),
				str(q, "roles"), str(q, "commands"), str(q, "scope"), str(q, "remoteIp"), str(q, "expiresAt"))
		}
	case "list":
		ds := rows("devices")
		if len(ds) == 0 {
			fmt.Fprintln(w, "No paired devices.")
			return nil
		}
		fmt.Fprintln(tw, "DEVICE\tNAME\tPLATFORM\tROLES\tCOMMANDS\tSCOPE\tCONNECTED\tLAST SEEN")
		for _, d := range ds {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", str(d, "deviceId"), str(d, "displayName"), str(d, "platform"),
				str(d, "roles"), str(d, "commands"), str(d, "scope"), str(d, "connected"), str(d, "lastSeenAt"))
		}
	case "approve":
		d, _ := res["device"].(map[string]any)
		fmt.Fprintf(w, "Approved %s (%s): roles %s, commands %s, memory scope %s.\n", str(d, "displayName"), str(d, "deviceId"),
			str(d, "roles"), str(d, "commands"), str(d, "scope"))
	case "scope":
		d, _ := res["device"].(map[string]any)
		fmt.Fprintf(w, "%s (%s) now has memory scope %s; its live connections use it at once.\n", str(d, "displayName"), pos[0], str(d, "scope"))
	case "reject":
		fmt.Fprintf(w, "Rejected request %s.\n", pos[0])
	case "rotate":
		fmt.Fprintf(w, "Rotated the %s token of %s (sent to %s live connection(s)).\n", str(res, "role"), pos[0], str(res, "delivered"))
	case "revoke":
		fmt.Fprintf(w, "Revoked the token(s) of %s; %s connection(s) closed. The pairing is kept: the device can ask for a repair.\n", pos[0], str(res, "closed"))
	case "remove":
		fmt.Fprintf(w, "Removed %s; %s connection(s) closed.\n", pos[0], str(res, "closed"))
	}
	return tw.Flush()
}
