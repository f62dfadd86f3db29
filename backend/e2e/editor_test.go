package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// The memory editor and the drop (issue 24 items 5 and 6) in the real window.

// editorWorkspace fills ws with an Atrium-layout workspace: roles main and
// writer, a global plan, and notes.md beside it (for a look-alike name).
func editorWorkspace(t *testing.T, files map[string]string) func(ws string) {
	return func(ws string) {
		base := map[string]string{
			"memory/roles/main/config.md":   "---\ndescription: main\n---\n# main\n",
			"memory/roles/writer/config.md": "---\ndescription: writes\n---\n# writer\n",
			"memory/global/notes.md":        "# Notes\n",
		}
		for k, v := range files {
			base[k] = v
		}
		for rel, text := range base {
			p := filepath.Join(ws, filepath.FromSlash(rel))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// openEditorUI runs the app on an editorWorkspace and opens the UI.
func openEditorUI(t *testing.T, files map[string]string) (context.Context, string, string) {
	t.Helper()
	modelSrv := httptest.NewServer(&scriptedModel{reply: "ok"})
	t.Cleanup(modelSrv.Close)
	var ws string
	prepare := editorWorkspace(t, files)
	ctx, url := openUIWith(t, func(w string) { ws = w; prepare(w) }, "OPENAI_BASE_URL="+modelSrv.URL+"/v1", "OPENAI_API_KEY=k", "OPENAI_MODEL=scripted")
	return ctx, url, ws
}

// bounded gives chromedp actions (which wait for their element) a deadline.
func bounded(t *testing.T, parent context.Context, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(parent, d)
	t.Cleanup(cancel)
	return ctx
}

// cmContent is the JavaScript expression of the editor's editable element
// (CodeMirror lives in its host's shadow root).
const cmContent = `document.querySelector('[data-testid=note-editor] .cm-host:not(.merge-host)').shadowRoot.querySelector('.cm-content')`

// setSelect sets a <select> (by test id) to value and tells Svelte.
func setSelect(t *testing.T, ctx context.Context, testid, value string) {
	t.Helper()
	waitFor(t, ctx, "option "+value+" in "+testid, fmt.Sprintf(`[...document.querySelectorAll('[data-testid=%s] option')].some(o => o.value === %q)`, testid, value), 20*time.Second)
	js[bool](t, ctx, fmt.Sprintf(`(() => { const s = document.querySelector('[data-testid=%s]'); s.value = %q; s.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`, testid, value))
}

// axeCheck runs axe-core in the page and fails the test on a serious or
// critical violation (what, for the message).
func axeCheck(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(repoRoot(t), "frontend", "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		t.Fatalf("axe-core: %v (run npm ci in frontend/)", err)
	}
	if _, err := chromedp.Run(bounded(t, ctx, 30*time.Second), chromedp.Evaluate[bool](string(src)+";true")); err != nil {
		t.Fatalf("inject axe-core: %v", err)
	}
	out, err := chromedp.Run(bounded(t, ctx, 120*time.Second), chromedp.Evaluate[string](`axe.run(document, {resultTypes: ['violations']}).then(r => JSON.stringify(r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical').map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}))))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("axe.run: %v", err)
	}
	if out != "[]" {
		t.Errorf("axe-core (%s): serious or critical violations: %s", what, out)
	}
}

// TestUIEditorConflictAndIME: open a note in the editor, type Chinese
// through an input method (Input.imeSetComposition, then insertText), have
// the file changed underneath through the gateway, save: the conflict shows
// theirs and mine and a merge holding both changes; "Use the merge" writes
// it, intact. A role the ACL does not let write gets a read-only editor; a
// look-alike new name is refused with the gateway's message, a new note is
// created; axe finds nothing serious; screenshots en/zh, desktop/phone.
func TestUIEditorConflictAndIME(t *testing.T) {
	const plan = "memory/global/plan.md"
	const v1 = "# 计划 Plan\n\n第一步：整理索引。\nStep two: ship.\n"
	ctx, url, ws := openEditorUI(t, map[string]string{plan: v1})

	// Open the plan from the file list and switch the viewer to the editor.
	waitFor(t, ctx, "the plan in the file list", `[...document.querySelectorAll('[data-testid=memory-file] button')].some(b => b.title === 'memory/global/plan.md')`, 60*time.Second)
	js[bool](t, ctx, `(() => { [...document.querySelectorAll('[data-testid=memory-file] button')].find(b => b.title === 'memory/global/plan.md').click(); return true; })()`)
	waitFor(t, ctx, "the Edit button", `document.querySelector('[data-testid=memory-edit]')?.textContent.trim() === 'Edit'`, 20*time.Second)
	if err := chromedp.Do(bounded(t, ctx, 30*time.Second), chromedp.Click(chromedp.CSS(`[data-testid=memory-edit]`))); err != nil {
		t.Fatalf("click Edit: %v", err)
	}
	waitFor(t, ctx, "the editor with the note's text", `!!document.querySelector('[data-testid=note-editor]') && (`+cmContent+`)?.textContent.includes('Step two: ship.')`, 60*time.Second)
	if js[string](t, ctx, `(`+cmContent+`).getAttribute('contenteditable')`) != "true" {
		t.Fatal("the editor is not editable for the person (admin)")
	}

	// Chinese through an input method on the note's empty last line: a
	// composition that grows, then the committed text.
	js[bool](t, ctx, `(() => { (`+cmContent+`).focus(); return true; })()`)
	if err := chromedp.Do(bounded(t, ctx, 30*time.Second),
		chromedp.KeyEvent(kb.End, chromedp.KeyModifiers(chromedp.ModifierCtrl)),
	); err != nil {
		t.Fatalf("move to the end: %v", err)
	}
	const ime = "中文输入法测试"
	for _, part := range []string{"zhong", "中文", "中文输入"} {
		n := int64(len([]rune(part)))
		if _, err := chromedp.Call(bounded(t, ctx, 30*time.Second), input.ImeSetComposition, input.ImeSetCompositionParams{Text: part, SelectionStart: n, SelectionEnd: n}); err != nil {
			t.Fatalf("imeSetComposition %q: %v", part, err)
		}
	}
	if _, err := chromedp.Call(bounded(t, ctx, 30*time.Second), input.InsertText, input.InsertTextParams{Text: ime}); err != nil {
		t.Fatalf("insertText: %v", err)
	}
	waitFor(t, ctx, "the composed text in the editor, once", `(`+cmContent+`).textContent.split('`+ime+`').length === 2 && !(`+cmContent+`).textContent.includes('zhong')`, 20*time.Second)
	waitFor(t, ctx, "the editor marked unsaved", `document.querySelector('[data-testid=note-editor]').dataset.dirty === 'true'`, 10*time.Second)

	// Someone else changes another line underneath, through the gateway.
	const theirs = "# 计划 Plan\n\n第一步：整理索引。\nStep two: ship on Friday.\n"
	gatewayCall(t, url, "memory.write", map[string]any{"path": plan, "content": theirs, "mode": "replace", "idempotencyKey": "e2e-theirs"})
	waitFor(t, ctx, "the changed-underneath warning", `!!document.querySelector('[data-testid=editor-changed]')`, 30*time.Second)

	// Save: the conflict shows both sides and a clean merge.
	if err := chromedp.Do(bounded(t, ctx, 30*time.Second), chromedp.Click(chromedp.CSS(`[data-testid=editor-save]`))); err != nil {
		t.Fatalf("click Save: %v", err)
	}
	const merge = `document.querySelector('[data-testid=conflict-merge]')?.shadowRoot?.querySelector('.cm-content')`
	waitFor(t, ctx, "the conflict with theirs, mine and the merge",
		`document.querySelector('[data-testid=conflict-theirs]')?.textContent.includes('ship on Friday')
		 && document.querySelector('[data-testid=conflict-mine]')?.textContent.includes('`+ime+`')
		 && (`+merge+`)?.textContent.includes('ship on Friday') && (`+merge+`)?.textContent.includes('`+ime+`')`, 30*time.Second)
	if strings.Contains(js[string](t, ctx, `(`+merge+`).textContent`), "<<<<<<<") {
		t.Error("changes to different lines merged with conflict markers")
	}
	axeCheck(t, ctx, "editor with a conflict")
	js[bool](t, ctx, `(() => { document.querySelector('[data-testid=editor-conflict]').scrollIntoView(); return true; })()`)
	shot(t, ctx, "editor-conflict-en-desktop.png")

	if err := chromedp.Do(bounded(t, ctx, 30*time.Second), chromedp.Click(chromedp.CSS(`[data-testid=resolve-merged]`))); err != nil {
		t.Fatalf("click Use the merge: %v", err)
	}
	waitFor(t, ctx, "the conflict resolved", `!document.querySelector('[data-testid=editor-conflict]') && !!document.querySelector('[data-testid=editor-saved]')`, 30*time.Second)
	want := theirs + ime + "\n"
	if b, err := os.ReadFile(filepath.Join(ws, filepath.FromSlash(plan))); err != nil || string(b) != want {
		t.Fatalf("after the merge the file holds %q (%v), want %q", b, err, want)
	}
	if left, _ := filepath.Glob(filepath.Join(ws, "memory", "global", "plan.conflict-*.md")); len(left) != 0 {
		t.Errorf("conflict files left after resolving: %v", left)
	}
	var open struct {
		Conflicts []json.RawMessage `json:"conflicts"`
	}
	if err := json.Unmarshal(gatewayCall(t, url, "conflicts.list", map[string]any{"state": "open"}), &open); err != nil || len(open.Conflicts) != 0 {
		t.Errorf("open conflicts after resolving: %d (%v)", len(open.Conflicts), err)
	}
	// A plain save after the merge: no conflict (the editor holds the new version).
	js[bool](t, ctx, `(() => { (`+cmContent+`).focus(); return true; })()`)
	if err := chromedp.Do(bounded(t, ctx, 30*time.Second),
		chromedp.KeyEvent(kb.End, chromedp.KeyModifiers(chromedp.ModifierCtrl)),
		chromedp.KeyEvent("再见"),
		chromedp.KeyEvent("s", chromedp.KeyModifiers(chromedp.ModifierCtrl)),
	); err != nil {
		t.Fatalf("type and Ctrl+S: %v", err)
	}
	waitFor(t, ctx, "the keyboard save", `document.querySelector('[data-testid=note-editor]').dataset.dirty === 'false' && !document.querySelector('[data-testid=editor-conflict]')`, 30*time.Second)
	if b, _ := os.ReadFile(filepath.Join(ws, filepath.FromSlash(plan))); !strings.HasPrefix(string(b), want) || !strings.Contains(string(b), "再见") {
		t.Errorf("after Ctrl+S the file holds %q", b)
	}

	// A new note: a look-alike name is refused with the gateway's message
	// (Cyrillic о beside notes.md); a plain Chinese name is created.
	if err := chromedp.Do(bounded(t, ctx, 30*time.Second), chromedp.Click(chromedp.CSS(`[data-testid=memory-new-note]`))); err != nil {
		t.Fatalf("click New note: %v", err)
	}
	setSelect(t, ctx, "new-note-folder", "memory/global")
	if err := chromedp.Do(bounded(t, ctx, 30*time.Second),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=new-note-name]`), "n\u043etes"),
		chromedp.Click(chromedp.CSS(`[data-testid=new-note-create]`)),
	); err != nil {
		t.Fatalf("create a look-alike: %v", err)
	}
	waitFor(t, ctx, "the look-alike refused in the gateway's words", `document.querySelector('[data-testid=new-note-error]')?.textContent.includes('looks like the existing memory/global/notes.md')`, 30*time.Second)
	if _, err := os.Stat(filepath.Join(ws, "memory", "global", "n\u043etes.md")); !os.IsNotExist(err) {
		t.Errorf("the look-alike note was written: %v", err)
	}
	js[bool](t, ctx, `(() => { const i = document.querySelector('[data-testid=new-note-name]'); i.value = '会议记录'; i.dispatchEvent(new Event('input', {bubbles: true})); return true; })()`)
	if err := chromedp.Do(bounded(t, ctx, 30*time.Second), chromedp.Click(chromedp.CSS(`[data-testid=new-note-create]`))); err != nil {
		t.Fatalf("create: %v", err)
	}
	waitFor(t, ctx, "the new note in the editor", `document.querySelector('[data-testid=note-editor]')?.dataset.path === 'memory/global/会议记录.md'`, 30*time.Second)
	if b, err := os.ReadFile(filepath.Join(ws, "memory", "global", "会议记录.md")); err != nil || string(b) != "# 会议记录\n" {
		t.Errorf("the new note holds %q (%v)", b, err)
	}

	// Acting as writer, whom the defaults do not let write global memory: read-only.
	setSelect(t, ctx, "memory-actor", "writer")
	waitFor(t, ctx, "a read-only editor for writer", `!!document.querySelector('[data-testid=editor-readonly]') && (`+cmContent+`)?.getAttribute('contenteditable') === 'false' && !document.querySelector('[data-testid=editor-save]')`, 30*time.Second)
	axeCheck(t, ctx, "read-only editor")

	// Screenshots: the editor in both languages, desktop and phone.
	setSelect(t, ctx, "memory-actor", "")
	js[bool](t, ctx, `(() => { [...document.querySelectorAll('[data-testid=memory-file] button')].find(b => b.title === 'memory/global/plan.md').click(); return true; })()`)
	waitFor(t, ctx, "the Edit button", `!!document.querySelector('[data-testid=memory-edit]')`, 20*time.Second)
	js[bool](t, ctx, `(() => { document.querySelector('[data-testid=memory-edit]').click(); return true; })()`)
	waitFor(t, ctx, "the plan in the editor", `document.querySelector('[data-testid=note-editor]')?.dataset.path === 'memory/global/plan.md' && (`+cmContent+`)?.textContent.includes('Friday')`, 30*time.Second)
	shot(t, ctx, "editor-en-desktop.png")
	setSelect(t, ctx, "lang-select", "zh")
	waitFor(t, ctx, "the Chinese UI", `document.querySelector('[data-testid=editor-close]')?.textContent.trim() === '关闭'`, 10*time.Second)
	shot(t, ctx, "editor-zh-desktop.png")
	if err := chromedp.Do(bounded(t, ctx, 30*time.Second), chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile)); err != nil {
		t.Fatalf("phone viewport: %v", err)
	}
	// On a phone the panels are tabs: show the memory one (its label in either language).
	js[bool](t, ctx, `(() => { const b = [...document.querySelectorAll('nav button')].find(b => ['记忆', 'Memory'].includes(b.textContent.trim())); if (b) b.click(); document.querySelector('[data-testid=note-editor]').scrollIntoView(); return true; })()`)
	waitFor(t, ctx, "the editor on the phone", `document.querySelector('[data-testid=note-editor]').getBoundingClientRect().width > 0`, 10*time.Second)
	shot(t, ctx, "editor-zh-phone.png")
	setSelect(t, ctx, "lang-select", "en")
	waitFor(t, ctx, "the English UI", `document.querySelector('[data-testid=editor-close]')?.textContent.trim() === 'Close'`, 10*time.Second)
	shot(t, ctx, "editor-en-phone.png")
	axeCheck(t, ctx, "editor on a phone")
}

// TestUIDrop300: 300 notes dropped (a DataTransfer made in the page) into
// role writer's layer, one with a taken name and one picture: 299 imported,
// the taken name stored as -1 (the original untouched), the picture refused
// with its reason; the summary says so; every note is indexed.
func TestUIDrop300(t *testing.T) {
	const taken = "memory/roles/writer/note-007.md"
	const original = "# The original note 7\n"
	ctx, url, ws := openEditorUI(t, map[string]string{taken: original})

	setSelect(t, ctx, "memory-layer", "role:writer")
	js[bool](t, ctx, `(() => {
		const dt = new DataTransfer();
		for (let i = 0; i < 300; i++) {
			const n = String(i).padStart(3, '0');
			dt.items.add(new File(['# Note ' + n + '\n\ndropnote' + n + ' 拖放笔记 ' + n + '\n'], 'note-' + n + '.md', {type: 'text/markdown'}));
		}
		dt.items.add(new File([new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0])], 'photo.png', {type: 'image/png'}));
		const zone = document.querySelector('[data-testid=memory-dropzone]');
		zone.dispatchEvent(new DragEvent('dragover', {dataTransfer: dt, bubbles: true, cancelable: true}));
		zone.dispatchEvent(new DragEvent('drop', {dataTransfer: dt, bubbles: true, cancelable: true}));
		return true;
	})()`)
	waitFor(t, ctx, "progress", `/^\d+ \/ 301$/.test(document.querySelector('[data-testid=import-progress]')?.textContent ?? '')`, 30*time.Second)
	waitFor(t, ctx, "the summary", `!!document.querySelector('[data-testid=import-summary]')`, 10*time.Minute)
	got := js[string](t, ctx, `(() => { const d = document.querySelector('[data-testid=import-summary]').dataset; return [d.ok, d.renamed, d.refused, d.error].join(' '); })()`)
	if got != "299 1 1 0" {
		t.Fatalf("summary ok/renamed/refused/error = %s, want 299 1 1 0 (%s)", got, js[string](t, ctx, `document.querySelector('[data-testid=import-summary]').textContent`))
	}
	if !js[bool](t, ctx, `[...document.querySelectorAll('[data-testid=import-result][data-status=refused]')].some(e => e.textContent.includes('photo.png') && e.textContent.includes('.md'))`) {
		t.Error("the picture is not shown refused with its reason")
	}
	// What needs the person's eye comes first: the refusal, then the renamed note, then 299 stored.
	if got := js[string](t, ctx, `[...document.querySelectorAll('[data-testid=import-result]')].slice(0, 3).map(e => e.dataset.status).join(' ')`); got != "refused renamed ok" {
		t.Errorf("the drop's results start %q, want the refusal and the renamed note first", got)
	}
	if !js[bool](t, ctx, `[...document.querySelectorAll('[data-testid=import-result][data-status=renamed]')].some(e => e.textContent.includes('note-007-1.md'))`) {
		t.Error("the taken name is not shown stored under its new name")
	}
	axeCheck(t, ctx, "drop summary")
	shot(t, ctx, "editor-drop-en-desktop.png")

	// Nothing overwritten; every note on disk and indexed.
	if b, _ := os.ReadFile(filepath.Join(ws, filepath.FromSlash(taken))); string(b) != original {
		t.Errorf("the taken note was overwritten: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "memory", "roles", "writer", "note-007-1.md")); !strings.Contains(string(b), "dropnote007") {
		t.Errorf("note-007-1.md holds %q", b)
	}
	var list struct {
		Files []struct {
			Path   string `json:"path"`
			Chunks int    `json:"chunks"`
		} `json:"files"`
	}
	if err := json.Unmarshal(gatewayCall(t, url, "memory.files", map[string]any{}), &list); err != nil {
		t.Fatal(err)
	}
	indexed := 0
	for _, f := range list.Files {
		if strings.HasPrefix(f.Path, "memory/roles/writer/note-") && f.Chunks > 0 {
			indexed++
		}
	}
	if indexed != 301 {
		t.Errorf("%d of writer's 301 notes indexed", indexed)
	}
	var found struct {
		Results []struct{ Path string } `json:"results"`
	}
	if err := json.Unmarshal(gatewayCall(t, url, "memory.search", map[string]any{"query": "dropnote250", "mode": "keyword"}), &found); err != nil || len(found.Results) == 0 || found.Results[0].Path != "memory/roles/writer/note-250.md" {
		t.Errorf("search for a dropped note: %+v %v", found.Results, err)
	}
	setSelect(t, ctx, "lang-select", "zh")
	waitFor(t, ctx, "the Chinese summary", `document.querySelector('[data-testid=import-summary]')?.textContent.includes('已导入 299 个')`, 10*time.Second)
	shot(t, ctx, "editor-drop-zh-desktop.png")
}
