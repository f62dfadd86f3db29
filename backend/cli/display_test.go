package cli

import (
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestX11Address(t *testing.T) {
	tests := []struct {
		display, network, addr string
		bad                    bool
	}{
		{":0", "unix", "/tmp/.X11-unix/X0", false},
		{":99.0", "unix", "/tmp/.X11-unix/X99", false},
		{"unix:3", "unix", "/tmp/.X11-unix/X3", false},
		{"localhost:10.0", "tcp", "localhost:6010", false},
		{"192.168.1.5:1", "tcp", "192.168.1.5:6001", false},
		{"nonsense", "", "", true},
		{":x", "", "", true},
	}
	for _, tt := range tests {
		n, a, err := x11Address(tt.display)
		if (err != nil) != tt.bad || n != tt.network || a != tt.addr {
			t.Errorf("x11Address(%q) = %q %q %v", tt.display, n, a, err)
		}
	}
}

func TestDisplayUsable(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("display probing applies to Linux")
	}
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	if err := displayUsable(env(nil)); err == nil {
		t.Error("no DISPLAY, no WAYLAND_DISPLAY: reported usable")
	}
	// A DISPLAY whose server is gone (display 4242 has no socket).
	if err := displayUsable(env(map[string]string{"DISPLAY": ":4242"})); err == nil || !strings.Contains(err.Error(), "DISPLAY=:4242") {
		t.Errorf("stale DISPLAY: err = %v", err)
	}
	// A Wayland socket that accepts connections.
	dir := t.TempDir()
	l, err := net.Listen("unix", filepath.Join(dir, "wayland-9"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if err := displayUsable(env(map[string]string{"WAYLAND_DISPLAY": "wayland-9", "XDG_RUNTIME_DIR": dir})); err != nil {
		t.Errorf("live Wayland socket: %v", err)
	}
}

func TestSystemLanguages(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"LANG": "zh_CN.UTF-8"}, "zh-CN"},
		{map[string]string{"LANGUAGE": "zh_TW:en_US", "LANG": "en_US.UTF-8"}, "zh-TW,en-US"},
		{map[string]string{"LC_ALL": "de_DE@euro", "LANG": "zh_CN.UTF-8"}, "de-DE"},
		{map[string]string{"LANG": "C.UTF-8"}, ""},
		{map[string]string{}, ""},
	} {
		got := strings.Join(SystemLanguages(func(k string) string { return c.env[k] }), ",")
		if got != c.want {
			t.Errorf("%v: %q, want %q", c.env, got, c.want)
		}
	}
}
