package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeInstallsOnlyWhatEachTargetNeeds (issue 24 item 10): the Debian
// packages each make target would install, read from the Makefile's own
// recipes with dpkg, id and sudo replaced so that every package reads as
// missing and nothing is installed: running the app (deps-system, what
// `make run` uses) asks for no packaging or test tool; the tests ask for
// everything `make test` runs (the Windows vet and the package checks too).
func TestMakeInstallsOnlyWhatEachTargetNeeds(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	fake := t.TempDir()
	for name, body := range map[string]string{"dpkg": "exit 1", "id": "echo 1000", "sudo": "exit 1"} {
		if err := os.WriteFile(filepath.Join(fake, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	missing := func(target string) []string {
		t.Helper()
		cmd := exec.Command("make", "--no-print-directory", "-C", filepath.Join("..", ".."), target)
		cmd.Env = append(os.Environ(), "PATH="+fake+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("make %s succeeded with every package missing:\n%s", target, out)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if rest, ok := strings.CutPrefix(l, "Missing system packages:"); ok {
				return strings.Fields(rest)
			}
		}
		t.Fatalf("make %s printed no missing packages:\n%s", target, out)
		return nil
	}
	has := func(list []string, p string) bool {
		for _, x := range list {
			if x == p {
				return true
			}
		}
		return false
	}
	packaging := []string{"gcc-mingw-w64-x86-64", "nsis", "p7zip-full", "imagemagick", "chromium", "xvfb", "zbar-tools"}
	run := missing("deps-system")
	for _, p := range packaging {
		if has(run, p) {
			t.Errorf("make run would install %s: %v", p, run)
		}
	}
	for _, p := range []string{"build-essential", "libwebkit2gtk-4.1-dev", "libsqlite3-dev", "fonts-wqy-microhei", "bubblewrap"} {
		if !has(run, p) {
			t.Errorf("make run would not install %s, which building or running needs: %v", p, run)
		}
	}
	test := missing("deps-system-test")
	for _, p := range append(packaging, "build-essential", "libwebkit2gtk-4.1-dev", "espeak-ng", "ffmpeg") {
		if !has(test, p) {
			t.Errorf("make test would not install %s: %v", p, test)
		}
	}
	pkg := missing("deps-system-package")
	for _, p := range []string{"gcc-mingw-w64-x86-64", "nsis", "p7zip-full", "imagemagick", "libwebkit2gtk-4.1-dev"} {
		if !has(pkg, p) {
			t.Errorf("make package would not install %s: %v", p, pkg)
		}
	}
}
