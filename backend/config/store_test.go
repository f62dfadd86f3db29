package config

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.json")

func TestStorePatch(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	// A hand-written file: its keys are kept by a patch that does not touch them.
	hand := `{
  "memory": {"search": {"mmr": true}},
  "model": {"provider": "openai", "baseUrl": "http://127.0.0.1:9/v1", "apiKey": "sk-hand", "model": "a"}
}`
	if err := os.WriteFile(path, []byte(hand), 0o600); err != nil {
		t.Fatal(err)
	}
	s := NewStore(path)

	// A client sends back what it read (apiKeySet) and changes the model: the key stays.
	before, after, err := s.Patch(json.RawMessage(`{"model":{"model":"b","apiKeySet":true},"agents":{"exec":{"approval":"deny"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if before.Model.Model != "a" || after.Model.Model != "b" || after.Model.APIKey != "sk-hand" || !after.Memory.Search.MMR || after.Agents.Exec.Approval != "deny" {
		t.Fatalf("before %+v after %+v", before, after)
	}
	onDisk, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if onDisk.Model != after.Model || onDisk.Agents.Exec.Approval != "deny" {
		t.Fatalf("on disk %+v", onDisk)
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), "\n  \"model\": {\n") || strings.Contains(string(data), `"profiles"`) {
		t.Fatalf("file is not indented with only the set keys:\n%s", data)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}

	// null removes a key; a new key is set.
	if _, after, err = s.Patch(json.RawMessage(`{"model":{"apiKey":null},"profiles":{"writer":{"model":{"apiKey":"sk-w","model":"m"}}}}`)); err != nil {
		t.Fatal(err)
	}
	if after.Model.APIKey != "" || after.ProfileModel("writer").APIKey != "sk-w" {
		t.Fatalf("after %+v", after)
	}

	// Bad patches change nothing and say which key is wrong.
	good, _ := os.ReadFile(path)
	for _, bad := range []struct{ patch, want string }{
		{`[1]`, "JSON object"},
		{`{"model":{"provider":"gpt"}}`, `unknown model provider "gpt"`},
		{`{"gateway":{"port":70000}}`, "gateway.port 70000"},
		{`{"gateway":{"bind":"wifi"}}`, `gateway.bind "wifi": want "loopback", "lan" or one IP address`},
		{`{"gateway":{"bind":"0.0.0.0"}}`, `use "lan"`},
		{`{"gateway":{"bind":"127.0.0.1"}}`, `plain loopback listener`},
		{`{"gateway":{"bind":"fe80::1%eth0"}}`, `gateway.bind "fe80::1%eth0"`},
		{`{"gateway":{"port":"x"}}`, "gateway.port"},
		{`{"nonsense":1}`, `unknown field "nonsense"`},
		{`{"agents":{"exec":{"approval":"sometimes"}}}`, `agents.exec.approval "sometimes"`},
		{`{"memory":{"embedding":{"provider":"magic"}}}`, `memory.embedding.provider "magic"`},
	} {
		_, _, err := s.Patch(json.RawMessage(bad.patch))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("patch %s: err %v, want ErrInvalid with %q", bad.patch, err, bad.want)
		}
	}
	if now, _ := os.ReadFile(path); string(now) != string(good) {
		t.Fatalf("a refused patch changed the file:\n%s", now)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".config-*")); len(m) != 0 {
		t.Fatalf("temporary files left: %v", m)
	}
}

func TestStorePatchMalformedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte("{\n  \"model\": {,\n}"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := NewStore(path).Patch(json.RawMessage(`{"model":{"model":"x"}}`))
	if err == nil || !strings.Contains(err.Error(), path+":2:") {
		t.Fatalf("err %v, want the file's line", err)
	}
	if data, _ := os.ReadFile(path); string(data) != "{\n  \"model\": {,\n}" {
		t.Fatalf("malformed file was overwritten: %s", data)
	}
}

func TestStorePatchConcurrent(t *testing.T) {
	s := NewStore(filepath.Join(t.TempDir(), "config.json"))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			role := string(rune('a' + i))
			if _, _, err := s.Patch(json.RawMessage(`{"profiles":{"` + role + `":{"model":{"model":"m"}}}}`)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	c, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Profiles) != 8 {
		t.Fatalf("lost updates: %d profiles, want 8", len(c.Profiles))
	}
}

func TestRedact(t *testing.T) {
	var c Config
	c.Model.APIKey = "sk-main-secret"
	c.Profiles = map[string]Profile{"writer": {}, "apiKey": {}}
	c.Profiles["writer"] = Profile{Model: c.Model}
	c.Memory.Embedding.Provider, c.Memory.Embedding.APIKey = "openai", "sk-emb-secret"
	m, err := Redact(c)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(m)
	if strings.Contains(string(data), "secret") || strings.Contains(string(data), `"apiKey":"`) {
		t.Fatalf("a key leaked: %s", data)
	}
	model := m["model"].(map[string]any)
	writer := m["profiles"].(map[string]any)["writer"].(map[string]any)["model"].(map[string]any)
	emb := m["memory"].(map[string]any)["embedding"].(map[string]any)
	if model[KeySetField] != true || writer[KeySetField] != true || emb[KeySetField] != true {
		t.Fatalf("apiKeySet missing: %s", data)
	}
	if _, ok := m["profiles"].(map[string]any)["apiKey"].(map[string]any); !ok {
		t.Fatalf("a profile named apiKey was dropped: %s", data)
	}
}

// TestStorePatchKeepsTheFile: a patch of a hand-written config.json keeps
// the person's key order, comment keys ("//…") and characters; changed
// keys stay where they were, new keys go last (testdata/*.golden.json;
// -update rewrites it).
func TestStorePatchKeepsTheFile(t *testing.T) {
	hand, err := os.ReadFile(filepath.Join("testdata", "handwritten.json"))
	if err != nil {
		t.Fatal(err)
	}
	patch, err := os.ReadFile(filepath.Join("testdata", "handwritten.patch.json"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, hand, 0o600); err != nil {
		t.Fatal(err)
	}
	s := NewStore(path)
	before, after, err := s.Patch(patch)
	if err != nil {
		t.Fatal(err)
	}
	if before.Workspace != "~/Notes/Atrium" || after.Model.Model != "qwen2.5-14b" || after.Model.APIKey != "sk-local" ||
		after.Memory.Search.HalfLifeDays != 0 || !after.Memory.Search.MMR || after.ProfileModel("写作").Model != "qwen2.5-7b" {
		t.Fatalf("before %+v\nafter %+v", before, after)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "handwritten.golden.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("patched file:\n%s\nwant (%s):\n%s", got, golden, want)
	}
	// The file as written loads to the same settings; a second identical
	// patch writes the same bytes.
	if onDisk, err := Load(path); err != nil || onDisk.Model != after.Model || onDisk.Workspace != after.Workspace {
		t.Fatalf("reload: %+v, %v", onDisk, err)
	}
	if _, _, err := s.Patch(patch); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(path); string(again) != string(want) {
		t.Fatalf("a repeated patch changed the file:\n%s", again)
	}
}

func TestLoadCommentsAndWorkspace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	for _, c := range []struct{ body, want string }{
		{`{"//": "note", "model": {"// why": "x", "provider": "offline"}}`, ""},
		{`{"_note": "x"}`, `unknown field "_note"`},
		{`{"workspace": "notes"}`, `workspace "notes": want an absolute path`},
		{`{"workspace": "~/Atrium 记忆"}`, ""},
	} {
		if err := os.WriteFile(path, []byte(c.body), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(path)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.body, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: err %v, want %q", c.body, err, c.want)
		case c.want == "" && cfg.Workspace != "":
			home, _ := os.UserHomeDir()
			if w, err := cfg.WorkspaceDir(); err != nil || w != filepath.Join(home, "Atrium 记忆") {
				t.Errorf("WorkspaceDir %q %v", w, err)
			}
		}
	}
}

// TestTalkSettings: config.json's talk block (issue 27) is validated key by
// key, its two apiKeys are redacted like the models' and survive a client
// sending back what it read.
func TestTalkSettings(t *testing.T) {
	s := NewStore(filepath.Join(t.TempDir(), "config.json"))
	_, after, err := s.Patch(json.RawMessage(`{"talk":{"stt":{"baseUrl":"http://127.0.0.1:9","apiKey":"sk-stt-secret"},
		"tts":{"provider":"elevenlabs","apiKey":"xi-tts-secret","elevenlabs":{"stability":0.3}},"interrupt":"queue","keepAudio":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	if after.Talk.STT.APIKey != "sk-stt-secret" || after.Talk.TTS.APIKey != "xi-tts-secret" || !after.Talk.KeepAudio || after.Talk.Interrupt != "queue" {
		t.Fatalf("talk %+v", after.Talk)
	}
	m, err := Redact(after)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(m)
	tk := m["talk"].(map[string]any)
	if strings.Contains(string(data), "secret") || tk["stt"].(map[string]any)[KeySetField] != true || tk["tts"].(map[string]any)[KeySetField] != true {
		t.Fatalf("talk redacted: %s", data)
	}
	back, _ := json.Marshal(map[string]any{"talk": tk})
	if _, after, err = s.Patch(back); err != nil || after.Talk.STT.APIKey != "sk-stt-secret" || after.Talk.TTS.APIKey != "xi-tts-secret" {
		t.Fatalf("sending back what was read: %v %+v", err, after.Talk)
	}
	for patch, key := range map[string]string{
		`{"talk":{"stt":{"baseUrl":"ftp://x"}}}`:            "talk.stt.baseUrl",
		`{"talk":{"stt":{"language":"fr"}}}`:                "talk.stt.language",
		`{"talk":{"tts":{"provider":"kokoro"}}}`:            "talk.tts.provider",
		`{"talk":{"tts":{"provider":"openai"}}}`:            "talk.tts.baseUrl",
		`{"talk":{"tts":{"speed":3}}}`:                      "talk.tts.speed",
		`{"talk":{"tts":{"elevenlabs":{"stability":1.5}}}}`: "talk.tts.elevenlabs.stability",
		`{"talk":{"interrupt":"ignore"}}`:                   "talk.interrupt",
		`{"talk":{"continuous":{"silenceMs":10}}}`:          "talk.continuous.silenceMs",
		`{"talk":{"tts":{"format":"ogg"}}}`:                 "talk.tts.format",
	} {
		if _, _, err := s.Patch(json.RawMessage(patch)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v, want ErrInvalid naming %s", patch, err, key)
		}
	}
}
