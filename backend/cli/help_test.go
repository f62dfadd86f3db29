package cli

import (
	"strings"
	"testing"
)

// TestHelp: every command and subcommand has its own usage (`--help`,
// `-h`, `atrium help CMD`), printed to stdout with exit status 0; a group
// (memory, agents, audit, bench) lists its subcommands. Nothing but the
// desktop's and `atrium help`'s usage is the overview of all commands.
func TestHelp(t *testing.T) {
	overviewLine := "Flags of every command" // a line of the overview only
	for _, c := range commands() {
		words := strings.Fields(c.name)
		for _, args := range [][]string{append(words, "--help"), append(words, "-h"), append([]string{"help"}, words...)} {
			code, out, errOut := runCLI(t, nil, args...)
			if code != 0 || errOut != "" {
				t.Errorf("%q: exit %d, stderr %q", args, code, errOut)
				continue
			}
			switch c.name {
			case "", "help":
				if !strings.Contains(out, overviewLine) {
					t.Errorf("%q is not the overview:\n%s", args, out)
				}
				continue
			}
			want := "Usage: atrium " + c.name
			if !strings.HasPrefix(out, want) || strings.Contains(out, overviewLine) {
				t.Errorf("%q: want its own usage starting %q, got:\n%s", args, want, out)
			}
		}
	}
	for _, g := range []string{"memory", "agents", "audit", "bench"} {
		subs := subcommands(g)
		if len(subs) == 0 {
			t.Fatalf("group %s has no subcommands", g)
		}
		for _, args := range [][]string{{g, "--help"}, {g, "-h"}, {g, "help"}, {"help", g}, {g, "--home", t.TempDir(), "--help"}} {
			code, out, errOut := runCLI(t, nil, args...)
			if code != 0 || errOut != "" || !strings.HasPrefix(out, "Usage: atrium "+g+" SUBCOMMAND") {
				t.Errorf("%q: exit %d\nstdout: %s\nstderr: %s", args, code, out, errOut)
				continue
			}
			for _, s := range subs {
				if !strings.Contains(out, "\n  "+strings.TrimPrefix(s.name, g+" ")+" ") {
					t.Errorf("%q does not list %q:\n%s", args, s.name, out)
				}
			}
		}
	}
	// A command's usage lists its own flags only.
	_, out, _ := runCLI(t, nil, "memory", "search", "--help")
	for _, f := range []string{"-max-results", "-min-score", "-mode", "-as", "-workspace", "-home", "-port", "-json"} {
		if !strings.Contains(out, "  "+f+" ") && !strings.Contains(out, "  "+f+"\n") {
			t.Errorf("memory search --help lacks %s:\n%s", f, out)
		}
	}
	_, out, _ = runCLI(t, nil, "memory", "index", "--help")
	for _, f := range []string{"-max-results", "-as", "-from", "-base"} {
		if strings.Contains(out, "  "+f+" ") {
			t.Errorf("memory index --help lists %s, which it does not take:\n%s", f, out)
		}
	}
	// pair and nodes talk to the app of --home whichever workspace it
	// serves: their usage lists --home, --port and --json, and says that
	// --workspace (accepted: scripts pass it to every command) is not
	// used; node has a state dir of its own and takes none of the three.
	for _, args := range [][]string{{"pair"}, {"nodes", "pending"}, {"nodes", "approve"}, {"nodes", "revoke"}} {
		_, out, _ := runCLI(t, nil, append(args, "--help")...)
		for _, f := range []string{"-home dir", "-port N", "-json", "-workspace dir\n    \tnot used", "whichever workspace it serves"} {
			if !strings.Contains(out, f) {
				t.Errorf("%v --help lacks %q:\n%s", args, f, out)
			}
		}
	}
	_, out, _ = runCLI(t, nil, "pair", "--help")
	for _, f := range []string{"-png file", "-light", "SPKI"} {
		if !strings.Contains(out, f) {
			t.Errorf("pair --help lacks %q:\n%s", f, out)
		}
	}
	_, out, _ = runCLI(t, nil, "node", "--help")
	for _, f := range []string{"-home", "-port", "-workspace"} {
		if strings.Contains(out, "  "+f+" ") {
			t.Errorf("node --help lists %s, which it does not use:\n%s", f, out)
		}
	}
	// Usage errors point at the command's own usage.
	for _, tc := range []struct {
		args []string
		hint string
	}{
		{[]string{"memory", "search", "--nope"}, "atrium memory search --help"},
		{[]string{"memory", "frob"}, "atrium memory --help"},
		{[]string{"memory"}, "atrium memory --help"},
		{[]string{"serve", "--port", "x"}, "atrium serve --help"},
		{[]string{"frobnicate"}, "atrium help"},
		{[]string{"help", "frobnicate"}, "atrium help"},
	} {
		code, _, errOut := runCLI(t, nil, tc.args...)
		if code != 2 || !strings.Contains(errOut, "Run '"+tc.hint+"' for usage.") {
			t.Errorf("%q: exit %d (want 2), stderr:\n%s", tc.args, code, errOut)
		}
	}
}
