package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Limits of Tail.
const (
	DefaultTail = 100     // entries returned when n ≤ 0
	MaxTail     = 10000   // entries returned at most
	maxLine     = 1 << 20 // a longer line is corrupt (Record writes far less)
	readBlock   = 64 << 10
)

// Filter selects entries; zero fields match everything.
type Filter struct {
	Operation    string
	Role         string
	Result       string // Allowed or Denied
	Session      string
	TargetPrefix string    // the target starts with this
	Since, Until time.Time // inclusive bounds on the timestamp
	// HideRoutine leaves out the Routine entries (what a viewer hides by
	// default; they stay in the log).
	HideRoutine bool
}

// Routine reports whether e is a routine entry: an allowed listing
// (operations files, conflicts, sessions.list, collab.list: what the UI
// asks on every refresh) or an allowed read by admin (get, search: the
// person looking at their own memory). Denied decisions and what roles
// and devices read are never routine.
func Routine(e Entry) bool {
	if e.Result != Allowed {
		return false
	}
	switch e.Operation {
	case "files", "conflicts", "sessions.list", "collab.list":
		return true
	case "get", "search":
		return e.Role == "admin"
	}
	return false
}

func (f Filter) match(e Entry) bool {
	switch {
	case f.HideRoutine && Routine(e):
		return false
	case f.Operation != "" && e.Operation != f.Operation,
		f.Role != "" && e.Role != f.Role,
		f.Result != "" && e.Result != f.Result,
		f.Session != "" && e.Session != f.Session,
		f.TargetPrefix != "" && !strings.HasPrefix(e.Target, f.TargetPrefix),
		!f.Since.IsZero() && e.Timestamp.Before(f.Since),
		!f.Until.IsZero() && e.Timestamp.After(f.Until):
		return false
	}
	return true
}

// Report is what TailReport read.
type Report struct {
	Entries []Entry // newest first
	Corrupt int     // lines skipped because they were not a valid entry
	Files   int     // day files read
}

// Tail returns up to n entries matching f, newest first (n ≤ 0 means
// DefaultTail; at most MaxTail). Corrupt lines are skipped (see
// TailReport for their count). An error is returned only when the folder
// or a day file cannot be read.
func (l *Log) Tail(n int, f Filter) ([]Entry, error) {
	r, err := l.TailReport(n, f)
	return r.Entries, err
}

// TailReport is Tail with the count of corrupt lines and files read. Day
// files are read newest first, each from its end; "newest" is file order,
// which is time order up to the interleaving of concurrent writers.
func (l *Log) TailReport(n int, f Filter) (Report, error) {
	if n <= 0 {
		n = DefaultTail
	}
	n = min(n, MaxTail)
	files, err := dayFiles(l.opts.Dir)
	if err != nil {
		return Report{}, err
	}
	var rep Report
	for _, name := range files {
		day, _ := time.Parse("2006-01-02", strings.TrimSuffix(name, ".jsonl"))
		if !f.Until.IsZero() && day.After(f.Until.UTC()) {
			continue
		}
		if !f.Since.IsZero() && day.Add(24*time.Hour).Before(f.Since.UTC()) {
			break
		}
		rep.Files++
		full := filepath.Join(l.opts.Dir, name)
		err := eachLineBackward(full, func(line []byte) bool {
			var e Entry
			if line == nil || json.Unmarshal(line, &e) != nil || e.Operation == "" || (e.Result != Allowed && e.Result != Denied) {
				rep.Corrupt++
				return true
			}
			if f.match(e) {
				rep.Entries = append(rep.Entries, e)
			}
			return len(rep.Entries) < n
		})
		if err != nil {
			return rep, err
		}
		if len(rep.Entries) >= n {
			break
		}
	}
	if rep.Corrupt > 0 {
		l.opts.Logger.Warn("audit corrupt lines skipped", "dir", l.opts.Dir, "count", rep.Corrupt)
	}
	return rep, nil
}

// eachLineBackward calls fn for each non-empty line of the file, last line
// first, until fn returns false. A line longer than maxLine is passed as nil
// (corrupt).
func eachLineBackward(name string, fn func(line []byte) bool) error {
	file, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("audit: open %s: %w", name, err)
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return fmt.Errorf("audit: stat %s: %w", name, err)
	}
	pos := st.Size()
	var carry []byte // the start of the file's text after pos, up to the first newline
	oversized := false
	for pos > 0 {
		size := min(int64(readBlock), pos)
		pos -= size
		buf := make([]byte, size, int(size)+len(carry))
		if _, err := file.ReadAt(buf, pos); err != nil {
			return fmt.Errorf("audit: read %s: %w", name, err)
		}
		data := append(buf, carry...)
		for {
			i := bytes.LastIndexByte(data, '\n')
			if i < 0 {
				break
			}
			line := data[i+1:]
			data = data[:i]
			switch {
			case oversized:
				oversized = false
				if !fn(nil) {
					return nil
				}
			case len(line) > 0:
				if !fn(line) {
					return nil
				}
			}
		}
		carry = data
		if len(carry) > maxLine {
			carry, oversized = nil, true
		}
	}
	switch {
	case oversized:
		fn(nil)
	case len(carry) > 0:
		fn(carry)
	}
	return nil
}
