package config

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// fuzzSeeds are config.json texts from the tests and testdata.
func fuzzSeeds(f *testing.F) [][]byte {
	var out [][]byte
	for _, name := range []string{"handwritten.json", "handwritten.golden.json", "handwritten.patch.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b)
	}
	for _, s := range []string{
		`{}`, ``, `null`, `[]`, `{"//":1,"//":2}`, `{"gateway":{"port":70000}}`, `{"gateway":{"bind":"lan"}}`,
		`{"workspace":"relative"}`, `{"model":{"provider":"nope"}}`, `{"unknown":1}`, `{"model":{"baseUrl":"ftp://x"}}`,
		`{"profiles":{"":{}}}`, `{"memory":{"search":{"vectorWeight":2}}}`, `{"agents":{"heartbeat":{"every":"-1s"}}}`,
		`{"a":{"b":` + string(bytes.Repeat([]byte("["), 200)),
	} {
		out = append(out, []byte(s))
	}
	return out
}

// FuzzLoad feeds any bytes as config.json (a file people edit by hand,
// README "Settings"). Properties: Load never panics; an accepted config
// written back with json.Marshal loads to the same Config; the ordered
// reader the Settings editor uses (decodeOrdered/encodeOrdered, keeping
// comments and key order) round-trips every document it accepts.
func FuzzLoad(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	dir := f.TempDir()
	path, again := filepath.Join(dir, "config.json"), filepath.Join(dir, "again.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			return
		}
		if v, err := decodeOrdered(data); err == nil {
			out, err := encodeOrdered(v)
			if err != nil {
				t.Fatalf("encodeOrdered of a decoded document: %v", err)
			}
			v2, err := decodeOrdered(out)
			if err != nil {
				t.Fatalf("encodeOrdered wrote %q, which does not decode: %v", out, err)
			}
			out2, err := encodeOrdered(v2)
			if err != nil || !bytes.Equal(out, out2) {
				t.Fatalf("ordered round trip is not stable: %q -> %q (%v)", out, out2, err)
			}
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(path)
		if err != nil {
			return
		}
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("marshal loaded config: %v", err)
		}
		if err := os.WriteFile(again, b, 0o600); err != nil {
			t.Fatal(err)
		}
		c2, err := Load(again)
		if err != nil {
			t.Fatalf("loaded config written back does not load: %v\n%s", err, b)
		}
		if !reflect.DeepEqual(c, c2) {
			b2, _ := json.Marshal(c2)
			t.Fatalf("config round trip changed it:\n%s\n%s", b, b2)
		}
	})
}

// FuzzPatch applies any bytes as a Settings patch (config.patch, a JSON
// merge patch from the UI or a phone) to any config file. Properties: a
// refused patch leaves the file byte for byte as it was; an accepted one
// leaves a file that Load reads as exactly `after`, and comment keys that
// the patch does not touch stay in the file.
func FuzzPatch(f *testing.F) {
	seeds := fuzzSeeds(f)
	for i, s := range seeds {
		f.Add(s, seeds[(i+2)%len(seeds)])
	}
	path := filepath.Join(f.TempDir(), "config.json")
	f.Fuzz(func(t *testing.T, file, patch []byte) {
		if len(file)+len(patch) > 64<<10 {
			return
		}
		if err := os.WriteFile(path, file, 0o600); err != nil {
			t.Fatal(err)
		}
		_, after, err := NewStore(path).Patch(json.RawMessage(patch))
		got, rerr := os.ReadFile(path)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if err != nil {
			if !bytes.Equal(got, file) {
				t.Fatalf("refused patch (%v) changed the file:\n%q\n%q", err, file, got)
			}
			return
		}
		c, err := Load(path)
		if err != nil {
			t.Fatalf("file written by Patch does not load: %v\n%s", err, got)
		}
		if !reflect.DeepEqual(c, after) {
			t.Fatalf("Patch returned %+v but the file loads as %+v", after, c)
		}
		if v, err := decodeOrdered(file); err == nil && hasComment(v) {
			if o, ok := v.(*object); ok {
				pv, _ := decodeOrdered(patch)
				po, _ := pv.(*object)
				nv, err := decodeOrdered(got)
				no, _ := nv.(*object)
				if err != nil || no == nil {
					t.Fatalf("patched file is not an object: %v", err)
				}
				for _, m := range o.members {
					k := m.key
					if !isComment(k) || (po != nil && po.index(k) >= 0) {
						continue
					}
					if no.index(k) < 0 {
						t.Fatalf("comment key %q was lost by the patch", k)
					}
				}
			}
		}
	})
}
