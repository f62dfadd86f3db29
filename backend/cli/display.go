package cli

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// displayUsable reports (as nil) whether a desktop window can be opened. On
// Linux and the BSDs that means a Wayland compositor or an X server that
// accepts a connection — not just a DISPLAY variable, which can be stale
// (an SSH session's, an Xvfb that exited), in which case GTK would abort
// the process. Other systems always have a display.
func displayUsable(getenv func(string) string) error {
	if runtime.GOOS != "linux" && !strings.HasSuffix(runtime.GOOS, "bsd") {
		return nil
	}
	var errs []error
	if w := getenv("WAYLAND_DISPLAY"); w != "" {
		p := w
		if !filepath.IsAbs(p) {
			p = filepath.Join(getenv("XDG_RUNTIME_DIR"), w)
		}
		if err := dialOnce("unix", p); err == nil {
			return nil
		} else {
			errs = append(errs, fmt.Errorf("WAYLAND_DISPLAY=%s: %w", w, err))
		}
	}
	d := getenv("DISPLAY")
	if d == "" {
		if len(errs) == 0 {
			return errors.New("DISPLAY and WAYLAND_DISPLAY are not set")
		}
		return errors.Join(errs...)
	}
	network, addr, err := x11Address(d)
	if err == nil {
		err = dialOnce(network, addr)
		if err != nil && network == "unix" && runtime.GOOS == "linux" {
			// Many X servers listen in the abstract namespace too.
			err = dialOnce("unix", "@"+addr)
		}
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("DISPLAY=%s: %w", d, err))
		return errors.Join(errs...)
	}
	return nil
}

// x11Address turns a DISPLAY value ("[host]:N[.screen]") into the socket
// an X client connects to: /tmp/.X11-unix/XN for a local display, TCP port
// 6000+N on host otherwise (X11 protocol, "Display Names").
func x11Address(display string) (network, addr string, err error) {
	i := strings.LastIndexByte(display, ':')
	if i < 0 {
		return "", "", fmt.Errorf("malformed DISPLAY %q", display)
	}
	host, rest := display[:i], display[i+1:]
	if dot := strings.IndexByte(rest, '.'); dot >= 0 {
		rest = rest[:dot]
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 {
		return "", "", fmt.Errorf("malformed DISPLAY %q", display)
	}
	if host == "" || host == "unix" || strings.HasPrefix(host, "/") {
		return "unix", "/tmp/.X11-unix/X" + strconv.Itoa(n), nil
	}
	return "tcp", net.JoinHostPort(host, strconv.Itoa(6000+n)), nil
}

func dialOnce(network, addr string) error {
	c, err := net.DialTimeout(network, addr, time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

// SystemLanguages returns the person's languages from the environment as
// BCP 47 tags, preferred first, without repeats: $LANGUAGE (a
// colon-separated list), else the first set of $LC_ALL, $LC_MESSAGES,
// $LANG ("zh_CN.UTF-8" → "zh-CN"); "C" and "POSIX" name no language. The
// desktop window hands them to the UI: WebKitGTK's navigator.languages
// does not follow them (it needs the locale installed).
func SystemLanguages(getenv func(string) string) []string {
	var raw []string
	if l := getenv("LANGUAGE"); l != "" {
		raw = strings.Split(l, ":")
	}
	for _, k := range []string{"LC_ALL", "LC_MESSAGES", "LANG"} {
		if v := getenv(k); v != "" {
			raw = append(raw, v)
			break
		}
	}
	var out []string
	for _, r := range raw {
		r, _, _ = strings.Cut(r, ".") // encoding
		r, _, _ = strings.Cut(r, "@") // modifier
		if r == "" || r == "C" || r == "POSIX" {
			continue
		}
		tag := strings.ReplaceAll(r, "_", "-")
		if !slices.Contains(out, tag) {
			out = append(out, tag)
		}
	}
	return out
}
