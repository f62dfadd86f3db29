package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// setField sets an input or textarea (by CSS selector) to value and tells
// Svelte (an input event).
func setField(t *testing.T, ctx context.Context, sel, value string) {
	t.Helper()
	waitFor(t, ctx, sel, `!!document.querySelector(`+jsString(sel)+`)`, 20*time.Second)
	js[bool](t, ctx, fmt.Sprintf(`(() => { const i = document.querySelector(%s); i.value = %s; i.dispatchEvent(new Event('input', {bubbles: true})); return true; })()`, jsString(sel), jsString(value)))
}

// showTab shows a panel by its tab's label in either language (desktop
// and phone layouts alike).
func showTab(t *testing.T, ctx context.Context, labels ...string) {
	t.Helper()
	list := `[` + strings.Join(func() []string {
		out := make([]string, len(labels))
		for i, l := range labels {
			out[i] = jsString(l)
		}
		return out
	}(), ",") + `]`
	js[bool](t, ctx, `(() => { const b = [...document.querySelectorAll('nav button')].find(b => `+list+`.includes(b.textContent.trim())); if (b) b.click(); return true; })()`)
}

// keys sends key events to the focused element.
func keys(t *testing.T, ctx context.Context, k string) {
	t.Helper()
	if err := chromedp.Do(bounded(t, ctx, 30*time.Second), chromedp.KeyEvent(k)); err != nil {
		t.Fatalf("key %q: %v", k, err)
	}
}

// TestUIRoleEditDeleteRename (issue 24 items 1 and 5, in the real window):
// a role edited in the Profiles panel answers its next message with the
// new persona in the system prompt the model gets, and a model change
// offers the restart of its running instance; deleting a role warns with
// what is kept (the files stay on disk, in the archive) or, when asked,
// deleted (gone); a note renamed in the editor is found by search under
// its new name only, and a look-alike name is refused. Keyboard paths:
// Escape closes the dialog and the rename form, Enter renames. axe-core on
// each screen; screenshots of the new dialogs in en and zh, desktop and
// phone (ATRIUM_E2E_OUT).
func TestUIRoleEditDeleteRename(t *testing.T) {
	model := &recordingModel{reply: "Noted."}
	srv := httptest.NewServer(model)
	t.Cleanup(srv.Close)
	var ws string
	prepare := editorWorkspace(t, map[string]string{
		"memory/roles/writer/config.md":  "---\ntype: role\nrole: writer\ndescription: \"Writes release notes\"\ncapabilities: [write]\n---\n# writer\n\n## Role\nWrites release notes\n",
		"memory/roles/writer/drafts.md":  "# Drafts\n\nThe heron draft.\n",
		"memory/roles/analyst/config.md": "---\ntype: role\nrole: analyst\ndescription: \"Studies metrics\"\n---\n# analyst\n",
		"memory/roles/analyst/q3.md":     "# Q3\n\nNumbers.\n",
		"memory/global/ideas.md":         "# Ideas\n\nThe okapi garden plan for the lobby.\n",
	})
	ctx, _ := openUIWith(t, func(w string) { ws = w; prepare(w) }, "OPENAI_BASE_URL="+srv.URL+"/v1", "OPENAI_API_KEY=k", "OPENAI_MODEL=scripted")
	writerLi := `[data-testid=profile][data-profile=writer]`

	// A first message to writer-1 starts its instance.
	press(t, ctx, `nav.tabs button:first-child`)
	waitFor(t, ctx, "writer in the profiles", `!!document.querySelector('`+writerLi+` [data-testid=profile-edit]')`, 60*time.Second)
	press(t, ctx, writerLi+` [data-testid=profile-spawn]`)
	waitFor(t, ctx, "writer-1 ready", `!!document.querySelector('[data-testid=instance][data-instance-id="writer-1"][data-state=ready]')`, 90*time.Second)

	// 1. Edit: persona and model; the model change offers a restart.
	press(t, ctx, writerLi+` [data-testid=profile-edit]`)
	waitFor(t, ctx, "the edit form", `document.querySelector('[data-testid=role-edit-persona]')?.value === 'Writes release notes'`, 30*time.Second)
	setField(t, ctx, `[data-testid=role-edit-persona]`, "Writes release notes in the voice of Captain Kestrel")
	setField(t, ctx, `[data-testid=role-edit-capabilities]`, "write, 写作")
	setField(t, ctx, `[data-testid=role-edit-model]`, "scripted-2")
	axeCheck(t, ctx, "the role edit form")
	js[bool](t, ctx, `(document.querySelector('[data-testid=role-edit]').scrollIntoView({block: 'start'}), true)`)
	shot(t, ctx, "roles-edit-en-desktop.png")
	press(t, ctx, `[data-testid=role-edit-save]`)
	waitFor(t, ctx, "the restart offer", `!!document.querySelector('[data-testid=role-edit-restart]')`, 30*time.Second)
	cfg, err := os.ReadFile(filepath.Join(ws, "memory", "roles", "writer", "config.md"))
	if err != nil || !strings.Contains(string(cfg), "Captain Kestrel") || strings.Contains(string(cfg), "\nWrites release notes\n") {
		t.Fatalf("config.md after the edit: %v\n%s", err, cfg)
	}
	js[bool](t, ctx, `(document.querySelector('[data-testid=role-edit-saved]').scrollIntoView({block: 'center'}), true)`)
	shot(t, ctx, "roles-edit-restart-en-desktop.png")
	press(t, ctx, `[data-testid=role-edit-restart]`)
	waitFor(t, ctx, "the restart", `document.querySelector('[data-testid=role-edit-saved]')?.textContent.includes('Restarted 1')`, 90*time.Second)
	waitFor(t, ctx, "writer-1 ready again", `!!document.querySelector('[data-testid=instance][data-instance-id="writer-1"][data-state=ready]')`, 90*time.Second)
	// Its next message carries the new persona.
	press(t, ctx, `[data-testid=instance-open]`)
	waitFor(t, ctx, "writer-1's chat", `!!document.querySelector('`+visibleChat+`[data-profile="writer-1"]')`, 20*time.Second)
	typeInChat(t, ctx, "Draft the Friday notes\n")
	deadline := time.Now().Add(90 * time.Second)
	var req []map[string]any
	for req = model.request("Draft the Friday notes"); req == nil; req = model.request("Draft the Friday notes") {
		if time.Now().After(deadline) {
			t.Fatal("the message never reached the model")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if sys := fmt.Sprint(req[0]["content"]); req[0]["role"] != "system" || !strings.Contains(sys, "Captain Kestrel") {
		t.Fatalf("the next turn's system prompt lacks the edited persona:\n%s", sys)
	}

	// 2. Delete writer, keeping its memory; Escape first closes the warning.
	press(t, ctx, `nav.tabs button:first-child`)
	press(t, ctx, writerLi+` [data-testid=profile-delete]`)
	waitFor(t, ctx, "the warning", `document.querySelector('[data-testid=role-delete-kept]')?.textContent.includes('memory/archive/roles/writer')`, 30*time.Second)
	if got := js[string](t, ctx, `document.activeElement?.dataset.testid ?? ''`); got != "role-delete-cancel" {
		t.Fatalf("focus in the warning is on %q, want Cancel", got)
	}
	keys(t, ctx, kb.Escape)
	waitFor(t, ctx, "the warning to close on Escape", `!document.querySelector('[data-testid=role-delete-dialog]')`, 10*time.Second)
	press(t, ctx, writerLi+` [data-testid=profile-delete]`)
	waitFor(t, ctx, "the warning", `document.querySelector('[data-testid=role-delete-kept]')?.textContent.includes('2 files')`, 30*time.Second)
	if txt := js[string](t, ctx, `document.querySelector('[data-testid=role-delete-what]').textContent`); !strings.Contains(txt, "writer-1") {
		t.Fatalf("the warning does not name the instance that stops: %q", txt)
	}
	axeCheck(t, ctx, "the delete warning")
	shot(t, ctx, "roles-delete-en-desktop.png")
	press(t, ctx, `[data-testid=role-delete-confirm]`)
	waitFor(t, ctx, "the deletion", `document.querySelector('[data-testid=role-deleted]')?.textContent.includes('memory/archive/roles/writer')`, 60*time.Second)
	if b, err := os.ReadFile(filepath.Join(ws, "memory", "archive", "roles", "writer", "drafts.md")); err != nil || !strings.Contains(string(b), "heron") {
		t.Fatalf("kept memory on disk: %v %q", err, b)
	}
	waitFor(t, ctx, "writer gone from the profiles", `!document.querySelector('`+writerLi+`')`, 30*time.Second)

	// 3. Delete analyst with its memory (the box ticked with the keyboard).
	press(t, ctx, `[data-testid=profile][data-profile=analyst] [data-testid=profile-delete]`)
	waitFor(t, ctx, "the warning", `!!document.querySelector('[data-testid=role-delete-memory]')`, 30*time.Second)
	js[bool](t, ctx, `(document.querySelector('[data-testid=role-delete-memory]').focus(), true)`)
	keys(t, ctx, " ")
	waitFor(t, ctx, "the removal warning", `document.querySelector('[data-testid=role-delete-removed]')?.textContent.includes('cannot be restored')`, 10*time.Second)
	axeCheck(t, ctx, "the delete-with-memory warning")
	shot(t, ctx, "roles-delete-memory-en-desktop.png")
	press(t, ctx, `[data-testid=role-delete-confirm]`)
	waitFor(t, ctx, "the deletion", `!!document.querySelector('[data-testid=role-deleted]') && !document.querySelector('[data-testid=profile][data-profile=analyst]')`, 60*time.Second)
	if _, err := os.Stat(filepath.Join(ws, "memory", "roles", "analyst")); !os.IsNotExist(err) {
		t.Fatalf("analyst's folder after deleting its memory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "memory", "archive", "roles", "analyst")); !os.IsNotExist(err) {
		t.Fatalf("analyst's memory was archived, not deleted: %v", err)
	}

	// 4. Rename a note in the editor: a look-alike refused, then a new name (Enter).
	showTab(t, ctx, "Memory", "记忆")
	waitFor(t, ctx, "ideas in the file list", `[...document.querySelectorAll('[data-testid=memory-file] button')].some(b => b.title === 'memory/global/ideas.md')`, 60*time.Second)
	js[bool](t, ctx, `(() => { [...document.querySelectorAll('[data-testid=memory-file] button')].find(b => b.title === 'memory/global/ideas.md').click(); return true; })()`)
	press(t, ctx, `[data-testid=memory-edit]`)
	waitFor(t, ctx, "the editor", `document.querySelector('[data-testid=note-editor]')?.dataset.path === 'memory/global/ideas.md' && (`+cmContent+`)?.textContent.includes('okapi')`, 60*time.Second)
	press(t, ctx, `[data-testid=editor-rename]`)
	waitFor(t, ctx, "the rename form", `document.activeElement?.dataset.testid === 'editor-rename-to'`, 10*time.Second)
	setField(t, ctx, `[data-testid=editor-rename-to]`, "n\u043etes")
	js[bool](t, ctx, `(document.querySelector('[data-testid=editor-rename-to]').focus(), true)`)
	keys(t, ctx, "\r")
	waitFor(t, ctx, "the look-alike refused", `document.querySelector('[data-testid=editor-rename-error]')?.textContent.includes('looks like the existing memory/global/notes.md')`, 30*time.Second)
	setField(t, ctx, `[data-testid=editor-rename-to]`, "okapi-garden")
	axeCheck(t, ctx, "the rename form")
	shot(t, ctx, "roles-rename-en-desktop.png")
	js[bool](t, ctx, `(document.querySelector('[data-testid=editor-rename-to]').focus(), true)`)
	keys(t, ctx, "\r")
	waitFor(t, ctx, "the editor under the new name", `document.querySelector('[data-testid=note-editor]')?.dataset.path === 'memory/global/okapi-garden.md' && !document.querySelector('[data-testid=editor-rename-form]')`, 30*time.Second)
	if _, err := os.Stat(filepath.Join(ws, "memory", "global", "ideas.md")); !os.IsNotExist(err) {
		t.Fatalf("the old name is still on disk: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "memory", "global", "okapi-garden.md")); err != nil || !strings.Contains(string(b), "okapi garden") {
		t.Fatalf("the renamed note: %v %q", err, b)
	}
	setField(t, ctx, `[data-testid=memory-search-input]`, "okapi garden lobby")
	waitFor(t, ctx, "the search under the new name", `(r => r.length > 0 && r.includes('memory/global/okapi-garden.md') && !r.includes('memory/global/ideas.md'))([...document.querySelectorAll('[data-testid=result-path]')].map(e => e.textContent))`, 30*time.Second)
	// Escape closes the rename form.
	press(t, ctx, `[data-testid=editor-rename]`)
	waitFor(t, ctx, "the rename form", `document.activeElement?.dataset.testid === 'editor-rename-to'`, 10*time.Second)
	keys(t, ctx, kb.Escape)
	waitFor(t, ctx, "the rename form to close on Escape", `!document.querySelector('[data-testid=editor-rename-form]')`, 10*time.Second)

	// 5. Chinese, desktop and phone: the new forms and dialogs.
	setSelect(t, ctx, "lang-select", "zh")
	waitFor(t, ctx, "the Chinese UI", `document.documentElement.lang.startsWith('zh')`, 10*time.Second)
	press(t, ctx, `[data-testid=editor-rename]`)
	waitFor(t, ctx, "the rename form (zh)", `!!document.querySelector('[data-testid=editor-rename-form]')`, 10*time.Second)
	if txt := js[string](t, ctx, `document.querySelector('[data-testid=editor-rename-form]').textContent`); !strings.Contains(txt, "新名称") {
		t.Fatalf("the rename form in Chinese: %q", txt)
	}
	axeCheck(t, ctx, "the rename form (zh)")
	shot(t, ctx, "roles-rename-zh-desktop.png")
	keys(t, ctx, kb.Escape)
	press(t, ctx, `nav.tabs button:first-child`)
	press(t, ctx, `[data-testid=profile][data-profile=main] [data-testid=profile-edit]`)
	waitFor(t, ctx, "main's edit form (zh)", `!!document.querySelector('[data-testid=role-edit][data-role=main] [data-testid=role-edit-persona]')`, 30*time.Second)
	if txt := js[string](t, ctx, `document.querySelector('[data-testid=role-edit]').textContent`); !strings.Contains(txt, "编辑 main") {
		t.Fatalf("the edit form in Chinese: %q", txt)
	}
	axeCheck(t, ctx, "the role edit form (zh)")
	js[bool](t, ctx, `(document.querySelector('[data-testid=role-edit]').scrollIntoView({block: 'start'}), true)`)
	shot(t, ctx, "roles-edit-zh-desktop.png")
	press(t, ctx, `[data-testid=role-edit-close]`)
	if js[bool](t, ctx, `!!document.querySelector('[data-testid=profile][data-profile=main] [data-testid=profile-delete]')`) {
		t.Fatal("main offers Delete")
	}
	// A role to show the warning with.
	setField(t, ctx, `[data-testid=role-name]`, "reviewer")
	setField(t, ctx, `[data-testid=role-persona]`, "审阅稿件")
	press(t, ctx, `[data-testid=role-create-open]`)
	press(t, ctx, `[data-testid=role-create-submit]`)
	waitFor(t, ctx, "reviewer created", `!!document.querySelector('[data-testid=profile][data-profile=reviewer] [data-testid=profile-delete]')`, 60*time.Second)
	press(t, ctx, `[data-testid=profile][data-profile=reviewer] [data-testid=profile-delete]`)
	waitFor(t, ctx, "the warning (zh)", `document.querySelector('[data-testid=role-delete-kept]')?.textContent.includes('记忆会保留')`, 30*time.Second)
	axeCheck(t, ctx, "the delete warning (zh)")
	shot(t, ctx, "roles-delete-zh-desktop.png")
	press(t, ctx, `[data-testid=role-delete-memory]`)
	waitFor(t, ctx, "the removal warning (zh)", `document.querySelector('[data-testid=role-delete-removed]')?.textContent.includes('永久删除')`, 10*time.Second)
	shot(t, ctx, "roles-delete-memory-zh-desktop.png")
	if err := chromedp.Do(bounded(t, ctx, 30*time.Second), chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile)); err != nil {
		t.Fatalf("phone viewport: %v", err)
	}
	axeCheck(t, ctx, "the delete warning on a phone")
	shot(t, ctx, "roles-delete-memory-zh-phone.png")
	press(t, ctx, `[data-testid=role-delete-cancel]`)
	waitFor(t, ctx, "the warning closed", `!document.querySelector('[data-testid=role-delete-dialog]')`, 10*time.Second)
	if _, err := os.Stat(filepath.Join(ws, "memory", "roles", "reviewer", "config.md")); err != nil {
		t.Fatalf("Cancel deleted the role: %v", err)
	}
	press(t, ctx, `[data-testid=profile][data-profile=reviewer] [data-testid=profile-edit]`)
	waitFor(t, ctx, "the edit form on a phone", `!!document.querySelector('[data-testid=role-edit][data-role=reviewer] [data-testid=role-edit-persona]')`, 30*time.Second)
	axeCheck(t, ctx, "the role edit form on a phone")
	shot(t, ctx, "roles-edit-zh-phone.png")
	setSelect(t, ctx, "lang-select", "en")
	waitFor(t, ctx, "the English UI", `document.querySelector('[data-testid=role-edit]')?.textContent.includes('Edit reviewer')`, 10*time.Second)
	shot(t, ctx, "roles-edit-en-phone.png")
	press(t, ctx, `[data-testid=profile][data-profile=reviewer] [data-testid=profile-delete]`)
	waitFor(t, ctx, "the warning on a phone", `!!document.querySelector('[data-testid=role-delete-kept]')`, 30*time.Second)
	shot(t, ctx, "roles-delete-en-phone.png")
	press(t, ctx, `[data-testid=role-delete-cancel]`)
}
