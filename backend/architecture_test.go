// Package backend_test enforces docs/ARCHITECTURE.md: which Atrium package may
// import which, that backend never imports Wails or the app shell, and that
// every package has a package doc comment.
package backend_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/atrium-dev/atrium"

// allowed mirrors the table in docs/ARCHITECTURE.md (keys and values are
// module-relative package paths; "." is the root package).
var allowed = map[string][]string{
	"backend/paths":               {},
	"backend/applock":             {},
	"backend/safefile":            {},
	"backend/acl":                 {},
	"backend/audit":               {},
	"backend/config":              {"backend/model", "backend/safefile", "backend/heartbeat", "backend/talk"},
	"backend/heartbeat":           {},
	"backend/statedb":             {},
	"backend/device":              {},
	"backend/gwid":                {"backend/safefile"},
	"backend/media":               {"backend/safefile"},
	"backend/rtc":                 {"backend/media"},
	"backend/upload":              {"backend/media"},
	"backend/live":                {"backend/gateway", "backend/nodes", "backend/media", "backend/audit"},
	"backend/talk":                {"backend/gateway", "backend/media", "backend/audit"},
	"backend/pairing":             {},
	"backend/discovery":           {},
	"backend/discovery/netnstest": {},
	"backend/memory/memorytest":   {},
	"backend/chromiumtest":        {},
	"backend/model/modeltest":     {},
	"backend/device/devicetest":   {"backend/device", "backend/gateway"},
	"backend/capture":             {},
	"backend/capture/xvfbtest":    {},
	"backend/nodehost":            {"backend/device", "backend/gwid", "backend/gateway", "backend/safefile", "backend/capture", "backend/rtc", "backend/live"},
	"backend/memory/chunk":        {},
	"backend/memory/hanzi":        {},
	"backend/memory/embed":        {"backend/memory/chunk", "backend/memory/hanzi"},
	"backend/memory/index":        {"backend/memory/chunk", "backend/memory/embed", "backend/memory/hanzi"},
	"backend/memory":              {"backend/memory/chunk", "backend/memory/embed", "backend/memory/index", "backend/memory/versions", "backend/acl", "backend/safefile"},
	"backend/history":             {},
	"backend/model":               {},
	"backend/chat":                {"backend/history", "backend/model", "backend/memory", "backend/memory/hanzi", "backend/convo", "backend/agent"},
	"backend/convo":               {"backend/model", "backend/memory/chunk"},
	"backend/agent":               {"backend/model"},
	"backend/worker":              {"backend/model"},
	"backend/agent/tools":         {"backend/agent", "backend/acl", "backend/guard", "backend/memory", "backend/safefile", "backend/nodes", "backend/media", "backend/canvas", "backend/collab"},
	"backend/nodes":               {"backend/gateway", "backend/audit", "backend/media"},
	"backend/canvas":              {"backend/gateway", "backend/nodes", "backend/audit", "backend/media"},
	"backend/gateway":             {"backend/device", "backend/pairing"},
	"backend/guard":               {"backend/acl", "backend/audit", "backend/memory"},
	"backend/route":               {"backend/memory/embed"},
	"backend/collab":              {"backend/acl", "backend/guard", "backend/memory"},
	"backend/mcpserve":            {"backend/acl", "backend/guard", "backend/memory"},
	"backend/mcpserve/mcptest":    {},
	"backend/api": {"backend/gateway", "backend/memory", "backend/chat", "backend/history", "backend/acl", "backend/audit", "backend/guard",
		"backend/collab", "backend/route", "backend/memory/embed", "backend/worker", "backend/config", "backend/model", "backend/media"},
	"backend/atrium": {"backend/paths", "backend/config", "backend/statedb", "backend/memory/chunk", "backend/convo",
		"backend/memory/embed", "backend/memory/index", "backend/memory/versions", "backend/memory", "backend/history",
		"backend/model", "backend/chat", "backend/gateway", "backend/api", "backend/acl", "backend/audit", "backend/guard",
		"backend/collab", "backend/route", "backend/worker", "backend/agent", "backend/agent/tools", "backend/applock",
		"backend/safefile", "backend/gwid", "backend/pairing", "backend/devices", "backend/device", "backend/nodes", "backend/discovery", "backend/media",
		"backend/rtc", "backend/canvas", "backend/upload", "backend/live", "backend/heartbeat", "backend/mcpserve", "backend/talk"},
	"backend/devices":         {"backend/gateway", "backend/pairing", "backend/device", "backend/audit"},
	"backend/memory/versions": {},
	"backend/bench/retrieval": {"backend/memory", "backend/memory/embed", "backend/memory/chunk"},
	"backend/bench/scale":     {"backend/memory", "backend/memory/embed", "backend/memory/chunk", "backend/memory/index"},
	"backend/bench/control":   {"backend/atrium", "backend/gateway", "backend/paths"},
	"backend/bench/soak":      {"backend/atrium", "backend/gateway", "backend/device", "backend/nodes"},
	"backend/cli": {"backend/device", "backend/atrium", "backend/paths", "backend/memory", "backend/config", "backend/gateway",
		"backend/bench/retrieval", "backend/bench/scale", "backend/bench/control", "backend/bench/soak", "backend/acl", "backend/audit", "backend/guard", "backend/worker",
		"backend/safefile", "backend/applock", "backend/nodehost", "backend/discovery", "backend/gwid", "backend/nodes", "backend/mcpserve"},
	"backend/e2e": {"backend/gwid"},
	"app":         {},
	"frontend":    {},
	".":           {"app", "backend/cli", "frontend"},
	// build tools, run by build/*.sh; they import no Atrium package.
	"build/pkgtool": {},
}

// pkgInfo is what the test learns about one directory's package.
type pkgInfo struct {
	imports     map[string]bool // import paths of the package's non-test files
	testImports map[string]bool // import paths of its _test.go files
	hasDoc      bool
	nonTest     bool
}

// testOnly are packages any test may import besides its package's own rules:
// the package under test itself (external _test packages) and statedb, which
// opens SQLite exactly as the app does.
var testOnly = []string{"backend/statedb"}

// testAllowed are extra imports one package's tests may make to build the
// real parts they run against (docs/ARCHITECTURE.md, "Tests").
var testAllowed = map[string][]string{
	// collab's tests build a real memory engine with its version store and
	// a real guard with its audit log.
	"backend/collab": {"backend/audit", "backend/memory/versions"},
	// mcpserve's tests do the same for the server they call through the
	// SDK's client.
	"backend/mcpserve": {"backend/audit", "backend/memory/versions", "backend/mcpserve/mcptest"},
	// agent/tools' tests build the same real stack and drive the loop
	// with the real OpenAI-compatible client against a scripted server.
	"backend/agent/tools": {"backend/audit", "backend/memory/versions", "backend/model", "backend/gateway", "backend/model/modeltest"},
	// bench/control's tests re-execute their binary as the app's workers
	// (TestMain runs worker.Command).
	"backend/bench/control": {"backend/worker"},
	// discovery's and the wiring's mDNS tests run in a network namespace
	// of their own.
	"backend/discovery": {"backend/discovery/netnstest"},
	// The wiring's tests also run a real `atrium node` host (nodehost)
	// against the real app.
	"backend/atrium": {"backend/discovery/netnstest", "backend/memory/memorytest", "backend/model/modeltest", "backend/device/devicetest",
		"backend/nodehost", "backend/mcpserve/mcptest"},
	// The tests that damage an index on disk (the wiring's above too)
	// share memory/memorytest.
	"backend/memory":       {"backend/memory/memorytest"},
	"backend/memory/index": {"backend/memory/memorytest"},
	// The tests that run headless Chromium start it through chromiumtest.
	"backend/device": {"backend/chromiumtest"},
	"backend/gwid":   {"backend/chromiumtest"},
	"backend/e2e":    {"backend/chromiumtest", "backend/model/modeltest", "backend/capture/xvfbtest"},
	"backend/rtc":    {"backend/chromiumtest", "backend/upload"}, // the HTTPS fallback in the same throughput run
	// The frontend's A2UI browser benchmark and Canvas screenshots (frontend/bench_test.go).
	"frontend": {"backend/chromiumtest"},
	// The screen tests run Xvfb through capture/xvfbtest (e2e's above too).
	"backend/capture": {"backend/capture/xvfbtest"},
	// The scripted OpenAI-compatible server is model/modeltest (the
	// wiring's and agent/tools' tests above too); its own tests run the
	// real client against it.
	"backend/model/modeltest": {"backend/model"},
	"backend/model":           {"backend/model/modeltest"},
	"backend/chat":            {"backend/model/modeltest"},
	"backend/agent":           {"backend/model/modeltest"},
	"backend/worker":          {"backend/model/modeltest"},
	// Device keys and the signed device connect are device/devicetest's
	// (the wiring's tests above too).
	"backend/devices": {"backend/device/devicetest"},
	"backend/cli":     {"backend/memory/memorytest", "backend/device/devicetest", "backend/rtc", "backend/mcpserve/mcptest"},
}

func TestImportRules(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	pkgs := scan(t, root)
	if len(pkgs) < 10 {
		t.Fatalf("found only %d packages under %s; is the test running from backend/?", len(pkgs), root)
	}
	var dirs []string
	for d := range pkgs {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, dir := range dirs {
		p := pkgs[dir]
		if dir == "backend" { // this test itself
			continue
		}
		rules, ok := allowed[dir]
		if !ok {
			t.Errorf("package %s is not in docs/ARCHITECTURE.md and this test's table", dir)
			continue
		}
		if p.nonTest && !p.hasDoc {
			t.Errorf("package %s has no package doc comment", dir)
		}
		ok2 := map[string]bool{}
		for _, r := range rules {
			ok2[r] = true
		}
		check := func(imp string, test bool) {
			if strings.HasPrefix(imp, "github.com/wailsapp/") && strings.HasPrefix(dir, "backend") {
				t.Errorf("%s imports %s: backend must never import Wails", dir, imp)
			}
			if !strings.HasPrefix(imp, module) {
				return
			}
			rel := strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
			if rel == "" {
				rel = "."
			}
			if ok2[rel] || test && (rel == dir || slices.Contains(testOnly, rel) || slices.Contains(testAllowed[dir], rel)) {
				return
			}
			t.Errorf("%s imports %s, which docs/ARCHITECTURE.md does not allow", dir, rel)
		}
		for imp := range p.imports {
			check(imp, false)
		}
		for imp := range p.testImports {
			check(imp, true)
		}
	}
}

func scan(t *testing.T, root string) map[string]*pkgInfo {
	t.Helper()
	pkgs := map[string]*pkgInfo{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata" || name == "bin" || name == "dist") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		p := pkgs[rel]
		if p == nil {
			p = &pkgInfo{imports: map[string]bool{}, testImports: map[string]bool{}}
			pkgs[rel] = p
		}
		isTest := strings.HasSuffix(path, "_test.go")
		if !isTest {
			p.nonTest = true
			if d := f.Doc.Text(); strings.HasPrefix(d, "Package ") || strings.HasPrefix(d, "Command ") {
				p.hasDoc = true
			}
		}
		for _, imp := range f.Imports {
			if isTest {
				p.testImports[strings.Trim(imp.Path.Value, `"`)] = true
			} else {
				p.imports[strings.Trim(imp.Path.Value, `"`)] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "docs", "ARCHITECTURE.md")); err != nil {
		t.Fatalf("docs/ARCHITECTURE.md: %v", err)
	}
	return pkgs
}

// TestUnixFilesConstrained: Go's file-name constraints know GOOS and GOARCH
// names only, not "unix", so a file named x_unix.go or x_unix_test.go builds
// on Windows too unless it says //go:build. Each such file must, or the
// Windows cross-vet (build/vet-cross.sh) fails on what it refers to.
func TestUnixFilesConstrained(t *testing.T) {
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git" || d.Name() == "dist") {
			return filepath.SkipDir
		}
		name := d.Name()
		if d.IsDir() || !(strings.HasSuffix(name, "_unix.go") || strings.HasSuffix(name, "_unix_test.go")) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), "//go:build") {
			t.Errorf("%s: named _unix but has no //go:build line: it builds on Windows too", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
