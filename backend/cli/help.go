package cli

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// command is one command of the command line as its usage shows it.
type command struct {
	// name is the command and subcommand words ("memory search"); "" is
	// the desktop (atrium alone).
	name string
	// args follow the name in the usage line ("[flags] QUERY").
	args string
	// short is the overview's description (lines after the first are
	// continuation lines).
	short string
	// long is what the command's own usage adds below short ("" for
	// nothing).
	long string
}

// usage is the command's usage line ("atrium memory search [flags] QUERY").
func (c command) usage() string {
	return strings.Join(strings.Fields("atrium "+c.name+" "+c.args), " ")
}

// commands lists every command the usage shows, in the overview's order.
// Each gets its own usage (`atrium <command> --help`, `atrium help
// <command>`); a group (memory, agents, audit, bench) lists its
// subcommands.
func commands() []command {
	return []command{
		{"", "[flags]", "open the desktop window (or serve, when there is no display)", workspaceHelp + portHelp},
		{"serve", "[flags]", "run the gateway and UI at http://127.0.0.1:18789", workspaceHelp + portHelp},
		{"memory index", "[flags]", "index the workspace's Markdown memory now", ""},
		{"memory search", "[flags] QUERY", "hybrid (BM25 + vector) search",
			"--min-score is a hybrid score in 0..1: 0 means the default floor, calibrated\n" +
				"for the query's length (0.13-0.28), a negative value turns the floor off.\n" +
				"--mode keyword is the BM25 leg only, vector the\n" +
				"embedding leg only." + asHelp},
		{"memory get", "[flags] PATH", "print a memory file (--from N --lines M)", asHelp},
		{"memory write", "[flags] PATH", "write standard input to a memory file\n(--mode append|replace, --base VERSION)",
			"--base VERSION is the version the new content is based on (memory get --json\n" +
				"shows it); a file changed since then keeps the replaced text as a conflict." + asHelp},
		{"memory mv", "[flags] PATH NEWPATH", "rename a memory note (--base VERSION); its version moves with it",
			"Both paths must be writable (checked and audited on each); a look-alike or\n" +
				"taken NEWPATH is refused, as is a note changed since --base." + asHelp},
		{"memory status", "[flags]", "files, chunks, provider, model, last sync, ACL in force", ""},
		{"audit tail", "[flags]", "the newest access decisions (-n N, --role R,\n--result allowed|denied, --operation OP)",
			"Reads $ATRIUM_HOME/audit directly, with or without the app running."},
		{"agents list", "[flags]", "roles (profiles) under memory/roles with their config", ""},
		{"agents create", "[flags] ROLE \"DESCRIPTION\"", "cold start: config from the role template, ACL rule, index,\nand the new role's starting context (--capabilities a,b)", ""},
		{"agents spawn", "[flags] ROLE", "start an instance ROLE-k of a role in the running app\n(its own worker process); prints the instance id", ""},
		{"agents stop", "[flags] INSTANCE", "stop a running instance (e.g. coder-1)", ""},
		{"bench retrieval", "--set DIR [flags]", "retrieval quality of a BEIR-style set or LoCoMo workspaces:\nRecall@1/5/10, nDCG@10, MRR for keyword, vector, hybrid;\nhit@k, empty answers and absent questions with the defaults",
			"--no-defaults skips the searches with the product's defaults and the absent\n" +
				"questions; --dump FILE writes one JSON line per question searched with them\n" +
				"(no-floor scores, first relevant rank, query length: floor calibration)."},
		{"bench scale", "[flags]", "index scale benchmark: index time, disk, RSS, search latency\n(bench reads ../shared/corpora or $ATRIUM_CORPORA)", ""},
		{"bench control", "[flags]", "control-center benchmark: 100 profiles, 10 worker instances,\ntime to a usable UI, RSS, throughput and chunk latency with\n200 clients", ""},
		{"bench soak", "[flags]", "soak: a real atrium serve for --duration (default 30m) with phones,\n`atrium node` processes, chat, search, writes, MCP clients and disk\nedits; RSS, goroutines and descriptors flat, no write lost", ""},
		{"pair", "[flags]", "show a pairing QR code (setup code, URL, fingerprint words)\nfrom the running app; --png FILE writes it as a PNG", pairHelp},
		{"collab list", "[flags]", "collaborations between roles: who asked whom, status, expiry\n(--status S, --as ROLE)", appHelp},
		{"collab show", "[flags] ID", "one collaboration: its history, result and shared view\n(the person's)", appHelp},
		{"collab request", "[flags] --as FROM --to ROLE", "open a collaboration as role FROM (--task T --context PATHS,\n--ttl SECONDS); prints its id and token (shown once)", appHelp},
		{"collab accept", "[flags] ID", "accept a pending collaboration (the person, or --as ROLE --token T)", collabHelp},
		{"collab decline", "[flags] ID", "decline a pending collaboration (--reason R)", collabHelp},
		{"collab complete", "[flags] ID", "complete an accepted collaboration (--output TEXT;\n--as ROLE --token T --importance X)", collabHelp},
		{"nodes pending", "[flags]", "pairing requests waiting for approval", appHelp},
		{"nodes approve", "[flags] REQUEST_ID", "approve a request (--roles operator,node --commands a,b|none:\na subset of what the device asked for; --scope authenticated|role:NAME|admin:\nwhat it reaches in memory, default authenticated)", appHelp},
		{"nodes reject", "[flags] REQUEST_ID", "reject a request", appHelp},
		{"nodes list", "[flags]", "paired devices (roles, commands, memory scope, connected, last seen)", appHelp},
		{"nodes scope", "[flags] DEVICE_ID SCOPE", "change a device's memory scope (authenticated, role:NAME or admin;\nits live connections use it at once)", appHelp},
		{"nodes rotate", "[flags] DEVICE_ID --role ROLE", "issue a new device token (sent to the device if connected)", appHelp},
		{"nodes revoke", "[flags] DEVICE_ID", "revoke a device's token(s) (--role ROLE; the pairing is kept\nso the device can ask for a repair)", appHelp},
		{"nodes remove", "[flags] DEVICE_ID", "delete a device's pairing", appHelp},
		{"nodes describe", "[flags] NODE", "a node's platform, connections, caps, commands and invokes in flight\n(NODE: a name, an id or id prefix, or caps:CAP)", nodeTargetHelp + appHelp},
		{"nodes invoke", "[flags] --node NODE --command C", "run any command a node may run (--params JSON); prints its\nJSON result", nodeTargetHelp + invokeHelp + appHelp},
		{"nodes run", "[flags] --node NODE -- COMMAND...", "run a program on a node (system.run; --cwd DIR, --timeout T):\nits stdout, stderr and exit code become this command's", nodeTargetHelp + runHelp + appHelp},
		{"nodes notify", "[flags] --node NODE --title T", "show a notification on a node (system.notify; --body TEXT)", nodeTargetHelp + appHelp},
		{"nodes camera snap", "[flags] --node NODE", "take a photo on a node (camera.snap; --facing front|back|both):\nprints where it is stored, its size and SHA-256", nodeTargetHelp + snapHelp + appHelp},
		{"nodes camera clip", "[flags] --node NODE", "record a clip on a node (camera.clip; --duration 10s, --facing front|back):\nprints where it is stored, its size and SHA-256", nodeTargetHelp + clipHelp + appHelp},
		{"nodes screen record", "[flags] --node NODE", "record a node's screen (screen.record; --duration 15s, --fps 10, --screen N):\nprints where it is stored, its size and SHA-256", nodeTargetHelp + recordHelp + appHelp},
		{"nodes screen snapshot", "[flags] --node NODE", "a picture of a node's screen (screen.snapshot; --format png|jpeg, --screen N):\nprints where it is stored, its size and SHA-256", nodeTargetHelp + shotHelp + appHelp},
		{"nodes location get", "[flags] --node NODE", "where a node is (location.get; --accuracy coarse|balanced|precise;\noff on a phone until its person turns it on)", nodeTargetHelp + locationHelp + appHelp},
		{"nodes canvas present", "[flags] --node NODE --target URL", "show a web page on a node's Canvas or the app's (--node desktop), in a\nsandboxed frame (--html FILE instead of --target; --x --y --width --height)", canvasHelp + nodeTargetHelp + appHelp},
		{"nodes canvas eval", "[flags] --node NODE --js EXPR", "run JavaScript inside the page presented there (an --html page; never\nin the app); prints its value as JSON", canvasHelp + nodeTargetHelp + appHelp},
		{"nodes canvas a2ui push", "[flags] --node NODE --jsonl FILE", "push A2UI JSON Lines (v0.8 or v0.9) to a node's Canvas or the app's\n(--node desktop); refused lines as FILE:LINE: reason", canvasHelp + nodeTargetHelp + appHelp},
		{"mcp", "[flags]", "serve memory to an MCP client (Claude Desktop, Cursor, Codex, Claude Code)\nover standard input and output, as one role (--as ROLE)", mcpHelp},
		{"mcp token create", "--as ROLE --name NAME [flags]", "a bearer token for one MCP client of the gateway's /mcp, acting as ROLE\n(printed once; only its hash is kept)", mcpTokenHelp},
		{"mcp token list", "[flags]", "the MCP clients' tokens: name, role, created, last used, revoked", mcpTokenHelp},
		{"mcp token revoke", "[flags] TOKEN_ID", "revoke a client's token (its next request is refused)", mcpTokenHelp},
		{"node", "[flags]", "run this computer as a node of an Atrium gateway (pair once,\nthen serve system.run, system.which, system.notify, and with ffmpeg\ncamera.* and screen.*)", nodeHelp},
		{"version", "", "print the version", ""},
		{"help", "[COMMAND [SUBCOMMAND]]", "this overview, or a command's usage", ""},
	}
}

// Help texts shared by several commands.
const (
	mcpHelp = "Tools memory_search, memory_get, memory_write and memory_note, the memory\n" +
		"files the role may read as resources (atrium:///PATH), and the prompt\n" +
		"memory_layers. Without --as the client gets only what the ACL grants\n" +
		"`authenticated`. Every call is checked by the ACL and audited as the role.\n" +
		"When an app runs on this state dir and serves the workspace, the calls go to it\n" +
		"through its gateway; otherwise the workspace is opened here for each call and\n" +
		"released after it (an app that starts meanwhile gets it).\n" +
		"Example for a client's settings: {\"command\": \"atrium\", \"args\": [\"mcp\", \"--as\", \"writer\"]}.\n" +
		"The app also serves MCP over HTTP at http://127.0.0.1:18789/mcp with a token\n" +
		"(atrium mcp token create)."
	mcpTokenHelp = "A token lets one MCP client call the gateway's /mcp (streamable HTTP) as one\n" +
		"role: send it as Authorization: Bearer TOKEN. It goes through the running app\n" +
		"when there is one (admin only), else state.db directly; either way audited.\n" +
		"Settings shows the same tokens and each client's configuration snippet."
	canvasHelp = "--node desktop is the app's own Canvas (every window and browser of the person).\n" +
		"A push answers once the target reports it rendered (within 10 s); what is not\n" +
		"rendered is kept and shown when the Canvas opens, and the command exits 1.\n" +
		"The first invalid line stops a push: the lines before it apply.\n\n"
	workspaceHelp = "The workspace must exist, except the default ~/Atrium on the first start (it\n" +
		"is created then); --create-workspace creates a new one where --workspace or\n" +
		"ATRIUM_WORKSPACE points. Only one app runs per state dir (--home): a second\n" +
		"one is refused and names the running app's address.\n\n"
	portHelp = "The gateway listens on 127.0.0.1, port --port, else gateway.port in\n" +
		"$ATRIUM_HOME/config.json, else 18789 (OpenClaw's gateway uses 18789 too).\n" +
		"--bind lan (or gateway.bind) adds HTTPS/WSS listeners on every LAN address, --bind IP\n" +
		"on that address, same port, with the gateway's own certificate ($ATRIUM_HOME/keys);\n" +
		"the URLs and the certificate's fingerprint are printed at start and shown in Settings.\n" +
		"Plain HTTP on those addresses is refused. When bound to the LAN the gateway is\n" +
		"announced by mDNS (_atrium-gw._tcp)."
	pairHelp = "The QR code holds the URL of the gateway's pairing page with a one-time setup\n" +
		"code (10 minutes, single use), the gateway id and the TLS certificate's\n" +
		"fingerprint. Below it: the fingerprint words (the device shows the same), the\n" +
		"certificate's SHA-256 and its public key's SPKI hash (base64 SHA-256, what a\n" +
		"browser's --ignore-certificate-errors-spki-list or a pin takes). --light prints\n" +
		"the QR code for a light terminal background.\n" +
		"With the gateway on loopback only, no phone can reach the URL: start it with\n" +
		"--bind lan.\n\n" + appHelp
	appHelp = "This command talks to the running app of the state dir (--home, ATRIUM_HOME):\n" +
		"its gateway.json says where the app listens (--port overrides it). Pairing and\n" +
		"devices belong to the app, whichever workspace it serves: --workspace is not used."
	invokeHelp = "--params is the command's params as a JSON object (default {}); --timeout is how\n" +
		"long the node has (default 30s, at most 10m). The result's payload is printed\n" +
		"as JSON (--json: the whole result, {nodeId, command, ok, payload, error}); a\n" +
		"failure the node reports exits 1 with its code and message.\n\n"
	runHelp = "The node's stdout and stderr are written to this command's, and its exit code\n" +
		"is this command's: 124 when the node stopped it at the timeout, 128+N when a\n" +
		"signal killed it. atrium's own failures exit 1 (2 for a usage mistake), which a\n" +
		"command can also return: --json prints the whole result with exitCode.\n" +
		"--timeout (default 2m) is capped by the node's exec-approvals.json timeoutMs\n" +
		"(default 2 minutes). A node whose approvals say ask puts the command to the\n" +
		"person in the Atrium window: this command prints that it waits for that\n" +
		"approval, and the wait counts against --timeout. --env NAME=VALUE (repeatable)\n" +
		"sets variables the node's envAllowlist lets through. Ctrl+C stops the waiting\n" +
		"here only: the command runs on on the node until it ends or its timeout.\n\n"
	snapHelp = "--facing both (the default) takes one photo with each camera, the second on the\n" +
		"device that took the first. Each photo lands in the app's media folder\n" +
		"($ATRIUM_HOME/media/<id>.jpg, beside its JSON sidecar); this command prints its\n" +
		"path, size, dimensions and SHA-256 (checked against the file), and --out DIR\n" +
		"copies it there too. A phone takes photos while its page is in use (in the\n" +
		"background it answers NODE_BACKGROUND_UNAVAILABLE); its browser asks the person\n" +
		"the first time, which counts against --timeout (default 60s).\n\n"
	clipHelp = "--duration is 0.5s to 60s (default 5s), with sound unless --no-audio. The clip\n" +
		"lands in the app's media folder ($ATRIUM_HOME/media/<id>.webm or .mp4, beside\n" +
		"its JSON sidecar); this command prints its path, size, length and SHA-256\n" +
		"(checked against the file), and --out DIR copies it there too. --timeout\n" +
		"defaults to the duration plus 60s.\n\n"
	recordHelp = "--duration is 0.5s to 60s (default 10s), --fps 1 to 30 (default 10). A browser\n" +
		"node asks its person which screen or window to share (several displays: the\n" +
		"person picks one there); a phone offers no screen capture. `atrium node` records\n" +
		"with ffmpeg: the whole display, or X screen N of it with --screen N (Linux;\n" +
		"Windows: monitor N, macOS: \"Capture screen N\"). The recording lands\n" +
		"in the app's media folder ($ATRIUM_HOME/media, beside its JSON sidecar); this\n" +
		"command prints its path, size, length and SHA-256 (checked against the file),\n" +
		"and --out DIR copies it there too. --timeout defaults to the duration plus 60s.\n\n"
	shotHelp = "--format png (default) or jpeg (--quality 0.05…1), --max-width N pixels,\n" +
		"--screen N as for screen record. The picture lands in the app's media folder\n" +
		"($ATRIUM_HOME/media, beside its JSON sidecar); this command prints its path, size,\n" +
		"dimensions and SHA-256 (checked against the file), and --out DIR copies it there\n" +
		"too. --timeout defaults to 60s.\n\n"
	locationHelp = "--accuracy: coarse (about 1 km; a position up to 10 minutes old will do),\n" +
		"balanced (the default: the device's ordinary fix, up to a minute old) or precise\n" +
		"(GPS, fresh). A phone answers only while its person has turned location on in\n" +
		"the phone page (off by default; \"while the page is in use\"); otherwise the\n" +
		"answer is FORBIDDEN and says so.\n\n"
	asHelp = "\n\n--as ROLE acts as that role (one of the workspace's roles, or main), checked\n" +
		"and audited exactly as that role (SPEC §5.1); without it you act as admin."
)

// overview is the general usage: every command with its description, the
// flags most commands share and the environment.
func overview() string {
	var b strings.Builder
	b.WriteString("Atrium — a local-first home for a team of AI agents.\n\nUsage:\n")
	for _, c := range commands() {
		entry(&b, 36, c.usage(), c.short)
	}
	b.WriteString(`
Run 'atrium COMMAND --help' or 'atrium help COMMAND' for a command's usage and flags.

Flags of every command but bench, node, version and help (before or after the command):
  --workspace DIR   Markdown memory (env ATRIUM_WORKSPACE, default ~/Atrium); pair and
                    nodes do not use it: they talk to the app of --home, whatever it serves
  --home DIR        state dir (env ATRIUM_HOME, default ~/.atrium)
  --port N          gateway port on 127.0.0.1 (default gateway.port in config.json, else 18789)
  --json            machine-readable output (memory, agents, audit, pair and nodes; node too)

Environment: ATRIUM_LOG=debug|info|warn|error; OPENAI_API_KEY, OPENAI_BASE_URL,
OPENAI_MODEL select an OpenAI-compatible model (see README).
`)
	return b.String()
}

// lookup returns the command called name.
func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// subcommands returns the commands of group ("memory": index, search, ...),
// in order.
func subcommands(group string) []command {
	var out []command
	for _, c := range commands() {
		if strings.HasPrefix(c.name, group+" ") {
			out = append(out, c)
		}
	}
	return out
}

// subNames is the list of a group's subcommand words ("index, search,
// get, write or status").
func subNames(group string) string {
	var names []string
	for _, c := range subcommands(group) {
		names = append(names, strings.TrimPrefix(c.name, group+" "))
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// printHelp prints the usage of the command whose flag set fs is: the
// overview and the desktop's flags for atrium alone, else the command's
// usage line, description and flags.
func printHelp(fs *flag.FlagSet, o Options) {
	if fs.Name() == "atrium" {
		fmt.Fprint(o.Stdout, overview())
		fmt.Fprintln(o.Stdout, "\nFlags of 'atrium' (the desktop window):")
	} else {
		printCommand(o.Stdout, fs.Name())
		fmt.Fprintln(o.Stdout, "\nFlags:")
	}
	fs.SetOutput(o.Stdout)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// printCommand prints a command's usage line and descriptions.
func printCommand(w io.Writer, name string) {
	c, _ := lookup(name)
	fmt.Fprintf(w, "Usage: %s\n\n", c.usage())
	short := strings.ReplaceAll(c.short, "\n", " ")
	fmt.Fprintf(w, "%s\n", wrap(strings.ToUpper(short[:1])+short[1:]+".", 78))
	if c.long != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.long))
	}
}

// printGroup prints a group's usage: its subcommands.
func printGroup(w io.Writer, group string) {
	fmt.Fprintf(w, "Usage: atrium %s SUBCOMMAND [flags]\n\nSubcommands:\n", group)
	for _, c := range subcommands(group) {
		entry(w, 40, strings.TrimPrefix(c.name, group+" ")+" "+c.args, c.short)
	}
	fmt.Fprintf(w, "\nRun 'atrium %s SUBCOMMAND --help' for a subcommand's usage and flags.\n", group)
}

// entry writes one line of a command list: name in a column of width,
// then desc, whose further lines are indented to the same column.
func entry(w io.Writer, width int, name, desc string) {
	for i, l := range strings.Split(desc, "\n") {
		if i > 0 {
			name = ""
		}
		fmt.Fprintf(w, "  %-*s %s\n", width, name, l)
	}
}

// isHelpFlag reports whether arg asks for help (-h, -help, --help).
func isHelpFlag(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "--h":
		return true
	}
	return false
}

// group checks the subcommand of a command group: the group's usage for
// `atrium GROUP --help` or `atrium GROUP help` (flag.ErrHelp: exit 0),
// and a usage error naming the subcommands when sub is missing or
// unknown. ok is true when sub is one of the group's subcommands.
func group(name, sub string, args []string, o Options) (ok bool, err error) {
	if sub == "help" || sub == "" && slices.ContainsFunc(args, isHelpFlag) {
		printGroup(o.Stdout, name)
		return false, flag.ErrHelp
	}
	if sub == "" {
		return false, fmt.Errorf("%w: %s needs a subcommand: %s", errUsage, name, subNames(name))
	}
	if _, known := lookup(name + " " + sub); !known {
		return false, fmt.Errorf("%w: unknown %s subcommand %q (%s)", errUsage, name, sub, subNames(name))
	}
	return true, nil
}

// helpHint is the command whose usage Main suggests after a usage error
// in args: "atrium memory search --help", "atrium memory --help" or
// "atrium help".
func helpHint(args []string) string {
	cmd, rest := takeCommand(args)
	if _, ok := lookup(cmd); ok && cmd != "" && cmd != "help" {
		return "atrium " + cmd + " --help"
	}
	if len(subcommands(cmd)) == 0 {
		return "atrium help"
	}
	sub, rest := takeCommand(rest)
	if _, ok := lookup(cmd + " " + sub); ok {
		return "atrium " + cmd + " " + sub + " --help"
	}
	if verb, _ := takeCommand(rest); verb != "" { // nodes location get
		if _, ok := lookup(cmd + " " + sub + " " + verb); ok {
			return "atrium " + cmd + " " + sub + " " + verb + " --help"
		}
	}
	return "atrium " + cmd + " --help"
}

// wrap breaks text into lines of at most width bytes between words.
func wrap(text string, width int) string {
	var b strings.Builder
	n := 0
	for i, word := range strings.Fields(text) {
		switch {
		case i == 0:
		case n+1+len(word) > width:
			b.WriteByte('\n')
			n = 0
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += len(word)
	}
	return b.String()
}
