// Package audit is Atrium's audit log (SPEC §5.1 "Audit"): every access
// decision, allowed or denied, is one JSON line in
// `$ATRIUM_HOME/audit/YYYY-MM-DD.jsonl`:
//
//	{"timestamp":"2026-02-11T14:30:22.123Z","operation":"read","role":"code-expert",
//	 "target":"roles/writer/style-guide.md","result":"denied","reason":"...",
//	 "session":"s-1","ip":"192.168.1.42"}
//
// Timestamps are UTC, RFC 3339 with milliseconds; the day file is chosen by
// the entry's UTC date. The folder is created 0700 and files 0600. Each
// Record opens the day file in append mode, writes the whole line with one
// write and closes it, so lines from several goroutines — or several
// processes (the app and the CLI) on a local file system — never
// interleave, a file rotated or deleted by hand is simply recreated, and a
// line that could not be written is reported to the caller as an error:
// Record never drops an entry silently (it does not fsync unless
// Options.Sync is set, so a power loss may lose the last lines; a crash of
// the process does not).
//
// Tail reads entries back, newest first, across day files, reading each file
// backwards so that a long history costs only what is returned; a corrupt
// line (torn write, hand edit) is skipped and counted, never fatal.
//
// It imports no other Atrium package.
package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Results of a decision.
const (
	Allowed = "allowed"
	Denied  = "denied"
)

// Result is Allowed when allowed, else Denied.
func Result(allowed bool) string {
	if allowed {
		return Allowed
	}
	return Denied
}

// TimeLayout is the timestamp format: RFC 3339, UTC, milliseconds.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// MaxFieldBytes caps each string field of a line; a longer value is cut at
// a UTF-8 boundary and ends with "…[truncated]".
const MaxFieldBytes = 2048

// ErrInvalidEntry: Record was given an entry without an operation or with a
// result other than "allowed" or "denied".
var ErrInvalidEntry = errors.New("audit: invalid entry")

// Entry is one decision.
type Entry struct {
	Timestamp time.Time `json:"-"` // zero: Options.Now() at Record
	Operation string    `json:"operation"`
	Role      string    `json:"role"`   // the acting role; "admin" for the person
	Target    string    `json:"target"` // the path or object
	Result    string    `json:"result"` // Allowed or Denied
	Reason    string    `json:"reason"`
	Session   string    `json:"session"`
	IP        string    `json:"ip,omitempty"`
}

// wire is the JSON form of an Entry, with the timestamp first.
type wire struct {
	Timestamp string `json:"timestamp"`
	Operation string `json:"operation"`
	Role      string `json:"role"`
	Target    string `json:"target"`
	Result    string `json:"result"`
	Reason    string `json:"reason"`
	Session   string `json:"session"`
	IP        string `json:"ip,omitempty"`
}

// MarshalJSON writes the wire form (timestamp in TimeLayout, UTC).
func (e Entry) MarshalJSON() ([]byte, error) {
	return json.Marshal(wire{
		Timestamp: e.Timestamp.UTC().Format(TimeLayout), Operation: e.Operation, Role: e.Role,
		Target: e.Target, Result: e.Result, Reason: e.Reason, Session: e.Session, IP: e.IP,
	})
}

// UnmarshalJSON reads the wire form; the timestamp must be RFC 3339.
func (e *Entry) UnmarshalJSON(b []byte) error {
	var w wire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	ts, err := time.Parse(time.RFC3339Nano, w.Timestamp)
	if err != nil {
		return fmt.Errorf("audit: timestamp %q: %w", w.Timestamp, err)
	}
	*e = Entry{Timestamp: ts.UTC(), Operation: w.Operation, Role: w.Role, Target: w.Target,
		Result: w.Result, Reason: w.Reason, Session: w.Session, IP: w.IP}
	return nil
}

// Options configures a Log.
type Options struct {
	// Dir is the folder of the day files, normally $ATRIUM_HOME/audit
	// (package paths owns that location). Required.
	Dir string
	// Now stamps entries recorded without a timestamp. Default time.Now.
	Now func() time.Time
	// Sync makes Record fsync each line before it returns. Default false.
	Sync bool
	// Logger receives "audit corrupt lines skipped". Default slog.Default().
	Logger *slog.Logger
}

// Log appends entries to day files and reads them back. Safe for concurrent
// use.
type Log struct {
	opts Options
	mu   sync.Mutex // serialises appends within the process
}

// New returns a Log writing under opts.Dir (created on first Record).
func New(opts Options) (*Log, error) {
	if opts.Dir == "" {
		return nil, errors.New("audit: Options.Dir is required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Log{opts: opts}, nil
}

// Dir returns the folder of the day files.
func (l *Log) Dir() string { return l.opts.Dir }

// FileName is the day file of t: "YYYY-MM-DD.jsonl" of its UTC date.
func FileName(t time.Time) string { return t.UTC().Format("2006-01-02") + ".jsonl" }

// Record appends e as one line (after a newline of its own if the file
// ends in a torn line) to the day file of its timestamp (Options.Now()
// when zero). It returns ErrInvalidEntry (wrapped) for an entry without an
// operation or with a result other than Allowed or Denied, and any error of
// creating the folder or writing the line; on error nothing was written
// (or, if the disk filled mid-line, a torn line that Tail skips).
func (l *Log) Record(e Entry) error {
	if e.Operation == "" {
		return fmt.Errorf("%w: no operation", ErrInvalidEntry)
	}
	if e.Result != Allowed && e.Result != Denied {
		return fmt.Errorf("%w: result %q (want %q or %q)", ErrInvalidEntry, e.Result, Allowed, Denied)
	}
	if e.Timestamp.IsZero() {
		e.Timestamp = l.opts.Now()
	}
	for _, f := range []*string{&e.Operation, &e.Role, &e.Target, &e.Reason, &e.Session, &e.IP} {
		*f = capField(*f)
	}
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("audit: encode entry: %w", err)
	}
	line = append(line, '\n')

	l.mu.Lock()
	defer l.mu.Unlock()
	if err := os.MkdirAll(l.opts.Dir, 0o700); err != nil {
		return fmt.Errorf("audit: create %s: %w", l.opts.Dir, err)
	}
	name := filepath.Join(l.opts.Dir, FileName(e.Timestamp))
	f, err := os.OpenFile(name, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit: open %s: %w", name, err)
	}
	// A torn last line (a crash or a full disk mid-write) would swallow
	// this entry: start on a fresh line instead.
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, st.Size()-1); err == nil && last[0] != '\n' {
			line = append([]byte{'\n'}, line...)
		}
	}
	if _, err := f.Write(line); err != nil {
		_ = f.Close()
		return fmt.Errorf("audit: write %s: %w", name, err)
	}
	if l.opts.Sync {
		if err := f.Sync(); err != nil {
			_ = f.Close()
			return fmt.Errorf("audit: sync %s: %w", name, err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("audit: close %s: %w", name, err)
	}
	return nil
}

// capField cuts s to MaxFieldBytes at a UTF-8 boundary.
func capField(s string) string {
	if len(s) <= MaxFieldBytes {
		return s
	}
	const mark = "…[truncated]"
	cut := MaxFieldBytes - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// dayFiles lists the day files in dir, newest first.
func dayFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("audit: list %s: %w", dir, err)
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		day, ok := strings.CutSuffix(n, ".jsonl")
		if !ok || e.IsDir() {
			continue
		}
		if _, err := time.Parse("2006-01-02", day); err != nil {
			continue
		}
		out = append(out, n)
	}
	// Names are ISO dates: lexical order is date order.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}
