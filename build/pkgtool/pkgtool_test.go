package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tc-hib/winres"
	"howett.net/plist"
)

const sourceIcon = "../appicon.png" // tests run in build/pkgtool

func TestNumeric(t *testing.T) {
	for in, want := range map[string]string{
		"v1.2.3":                  "1.2.3.0",
		"v1.2.3-4-gabc1234":       "1.2.3.4",
		"v1.2.3-4-gabc1234-dirty": "1.2.3.4",
		"v0.9":                    "0.9.0.0",
		"0.9":                     "0.0.0.0", // no v: not a release tag
		"1234567":                 "0.0.0.0", // a bare hash of digits only
		"v2":                      "2.0.0.0",
		"4b89b15":                 "0.0.0.0",
		"4b89b15-dirty":           "0.0.0.0",
		"dev":                     "0.0.0.0",
		"v1.2.3-rc1":              "0.0.0.0", // not git describe of a release tag
	} {
		n, err := Numeric(in)
		if err != nil || dotted(n, 4) != want {
			t.Errorf("Numeric(%q) = %s, %v; want %s", in, dotted(n, 4), err, want)
		}
	}
	if _, err := Numeric("v1.70000.0"); err == nil {
		t.Error("Numeric accepted a part above 65535")
	}
}

// goBuild cross-compiles a program with an empty main (and the files in extra) for
// goos/goarch into dir, with CGO off; it returns the binary's path.
func goBuild(t *testing.T, dir, goos, goarch string, ldflags string, extra map[string][]byte) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"go.mod":  []byte("module hello\n\ngo 1.22\n"),
		"main.go": []byte("package main\n\nfunc main() {}\n"),
	}
	for k, v := range extra {
		files[k] = v
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "hello")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=mod")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s/%s: %v\n%s", goos, goarch, err, b)
	}
	return out
}

// TestWindowsResources links the resources WriteSyso makes into a real Windows program and
// checks it as build/package-test.sh checks atrium.exe; each defect CheckExe exists to
// catch (console subsystem, no resources, another version) is built and must be refused.
func TestWindowsResources(t *testing.T) {
	const v = "v1.2.3-4-gabc1234"
	tmp := t.TempDir()
	syso := filepath.Join(tmp, "rsrc_windows_amd64.syso")
	if err := WriteSyso(syso, sourceIcon, v); err != nil {
		t.Fatal(err)
	}
	res, err := os.ReadFile(syso)
	if err != nil {
		t.Fatal(err)
	}
	gui := goBuild(t, filepath.Join(tmp, "gui"), "windows", "amd64", "-H=windowsgui", map[string][]byte{"rsrc_windows_amd64.syso": res})
	rep, err := CheckExe(gui, v)
	if err != nil {
		t.Fatalf("CheckExe of a GUI program with the resources: %v", err)
	}
	if s := rep.String(); !strings.Contains(s, "PE32+ amd64") || !strings.Contains(s, "WINDOWS_GUI") ||
		!strings.Contains(s, "1.2.3.4") || !strings.Contains(s, v) || !strings.Contains(s, "manifest Atrium 1.2.3.4") {
		t.Errorf("report %q lacks what was checked", s)
	}
	if _, err := CheckExe(gui, "v1.2.4"); err == nil || !strings.Contains(err.Error(), "VERSIONINFO") {
		t.Errorf("CheckExe with another version: %v, want a VERSIONINFO error", err)
	}
	if _, err := CheckInstaller(gui, v); err == nil || !strings.Contains(err.Error(), "PE32 386") {
		t.Errorf("CheckInstaller of the app: %v, want a format error", err)
	}
	console := goBuild(t, filepath.Join(tmp, "console"), "windows", "amd64", "", map[string][]byte{"rsrc_windows_amd64.syso": res})
	if _, err := CheckExe(console, v); err == nil || !strings.Contains(err.Error(), "WINDOWS_CUI") {
		t.Errorf("CheckExe of a console program: %v, want a subsystem error", err)
	}
	bare := goBuild(t, filepath.Join(tmp, "bare"), "windows", "amd64", "-H=windowsgui", nil)
	if _, err := CheckExe(bare, v); err == nil || !strings.Contains(err.Error(), "icon") {
		t.Errorf("CheckExe of a program without resources: %v, want an icon error", err)
	}
	linux := goBuild(t, filepath.Join(tmp, "linux"), "linux", "amd64", "", nil)
	if _, err := CheckExe(linux, v); err == nil {
		t.Error("CheckExe accepted a Linux ELF binary")
	}
}

func TestICO(t *testing.T) {
	out := filepath.Join(t.TempDir(), "atrium.ico")
	if err := WriteICO(out, sourceIcon); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := winres.LoadICO(f); err != nil {
		t.Fatalf("the .ico does not load: %v", err)
	}
	small := filepath.Join(t.TempDir(), "small.png")
	if err := exec.Command("convert", sourceIcon, "-resize", "64x64", small).Run(); err == nil {
		if err := WriteICO(out, small); err == nil || !strings.Contains(err.Error(), "at least 256") {
			t.Errorf("WriteICO from a 64 px image: %v, want a size error", err)
		}
	}
}

// TestMacApp makes the .app bundle as docs/MACOS.md does (without a Mac: the binaries are
// pure-Go programs cross-compiled here, joined by llvm-lipo when installed) and checks it.
func TestMacApp(t *testing.T) {
	const v = "v0.4.1-7-g0123abc"
	tmp := t.TempDir()
	app := filepath.Join(tmp, "Atrium.app")
	if err := WriteApp(app, sourceIcon, "", v); err != nil {
		t.Fatal(err)
	}
	rep, err := CheckApp(app, v, false)
	if err != nil {
		t.Fatalf("CheckApp of the bundle without binary: %v", err)
	}
	if rep.Binary != "absent" || !strings.Contains(rep.String(), "0.4.1 (v0.4.1-7-g0123abc)") {
		t.Errorf("report %q", rep)
	}
	data, err := os.ReadFile(filepath.Join(app, "Contents", "Info.plist"))
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if _, err := plist.Unmarshal(data, &generic); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"CFBundleExecutable": "atrium", "CFBundleShortVersionString": "0.4.1",
		"CFBundleVersion": "0.4.1", "AtriumVersion": v, "CFBundlePackageType": "APPL", "NSHighResolutionCapable": true} {
		if generic[k] != want {
			t.Errorf("Info.plist %s = %v, want %v", k, generic[k], want)
		}
	}
	if !bytes.HasPrefix(data, []byte(`<?xml version="1.0" encoding="UTF-8"?>`)) {
		t.Errorf("Info.plist is not an XML plist: %.60s", data)
	}
	if _, err := CheckApp(app, "v0.4.2", false); err == nil {
		t.Error("CheckApp accepted another version")
	}
	if _, err := CheckApp(app, v, true); err == nil {
		t.Error("CheckApp accepted a bundle without its binary when one is required")
	}

	arm := goBuild(t, filepath.Join(tmp, "arm64"), "darwin", "arm64", "-s -w", nil)
	if err := WriteApp(app, sourceIcon, arm, v); err != nil {
		t.Fatal(err)
	}
	if _, err := CheckApp(app, v, true); err == nil || !strings.Contains(err.Error(), "universal") {
		t.Errorf("CheckApp of a bundle with a thin arm64 binary: %v, want a universal-binary error", err)
	}
	lipo, err := exec.LookPath("llvm-lipo-14")
	if err != nil {
		if lipo, err = exec.LookPath("lipo"); err != nil {
			t.Log("no llvm-lipo-14 or lipo on PATH: the universal binary is not checked")
			return
		}
	}
	amd := goBuild(t, filepath.Join(tmp, "amd64"), "darwin", "amd64", "-s -w", nil)
	fat := filepath.Join(tmp, "atrium-universal")
	if b, err := exec.Command(lipo, "-create", "-output", fat, arm, amd).CombinedOutput(); err != nil {
		t.Fatalf("lipo: %v\n%s", err, b)
	}
	if err := WriteApp(app, sourceIcon, fat, v); err != nil {
		t.Fatal(err)
	}
	rep, err = CheckApp(app, v, true)
	if err != nil {
		t.Fatalf("CheckApp of a bundle with a universal binary: %v", err)
	}
	if rep.Binary != "universal (amd64, arm64)" {
		t.Errorf("binary %q", rep.Binary)
	}
}
