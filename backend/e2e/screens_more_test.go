package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// The screens TestScreenshots shoots beyond tourScreens' (issue 24 "make
// screenshots adds the new screens"; issue 27's Talk): the editor's edit
// conflict, a drop's progress and summary, the Canvas with a surface,
// Collaborations with its prompt, the talk button's states and its
// "nothing configured" explanation, Settings → Talk, the delete-role
// warning, and a paired phone's /pair page. Only `make screenshots` runs
// them (TestUIAtPhoneWidth, in every `go test`, keeps to tourScreens).

// gate holds the requests of a scripted server until the test lets them
// go, so a screen that lasts only while a server works (transcribing,
// thinking) can be shot. The zero value is not usable: newGate.
type gate struct {
	mu   sync.Mutex
	ch   chan struct{}
	held int // requests waiting now
}

func newGate() *gate { return &gate{ch: make(chan struct{})} }

// wait blocks until open is called, ctx ends or two minutes pass.
func (g *gate) wait(ctx context.Context) {
	g.mu.Lock()
	ch := g.ch
	g.held++
	g.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
	case <-time.After(2 * time.Minute):
	}
	g.mu.Lock()
	if g.ch == ch { // not released by open: no longer waiting
		g.held--
	}
	g.mu.Unlock()
}

// open lets every waiting request go on; later ones wait for the next open.
func (g *gate) open() {
	g.mu.Lock()
	close(g.ch)
	g.ch = make(chan struct{})
	g.held = 0
	g.mu.Unlock()
}

// openWhenHeld waits (at most two minutes) until a request is held, then opens the gate.
func (g *gate) openWhenHeld(t *testing.T, what string) {
	t.Helper()
	waitUntil(t, what+" held at its scripted server", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.held > 0
	})
	g.open()
}

// gatedModel is next, except that a request whose last user message
// holds one of keys waits for gate first.
type gatedModel struct {
	next http.Handler
	keys []string
	gate *gate
}

func (m *gatedModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	var req chatRequest
	_ = json.Unmarshal(body, &req) // next answers a bad body
	last := ""
	for _, msg := range req.Messages {
		if msg.Role == "user" {
			last = fmt.Sprint(msg.Content)
		}
	}
	for _, k := range m.keys {
		if strings.Contains(last, k) {
			m.gate.wait(r.Context())
			break
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	m.next.ServeHTTP(w, r)
}

// screensRig is what TestScreenshots runs beside the app: the gateway
// (bound to 127.0.0.2, so a phone can pair), the scripted speech servers
// and the gates that hold the transcription and the talk's answer.
type screensRig struct {
	g          *mediaGateway
	ws, tmp    string
	sttGate    *gate
	modelGate  *gate
	talkConfig map[string]any // config.json's talk, pointing at the scripted servers

	mu   sync.Mutex
	lang string // the transcript's language (en or zh)
}

// talkSaid is what the scripted transcription server hears, per language;
// the scripted model holds its answer (talkKeys) until the test has shot "thinking".
var (
	talkSaid = map[string]string{"en": "What is the weather like today?", "zh": "今天天气怎么样？"}
	talkKeys = []string{"weather", "天气"}
)

// newScreensRig starts the scripted transcription and speech servers and
// returns the model handler (model, with the talk's answer held) to run the app with.
func newScreensRig(t *testing.T, tmp string, model http.Handler) (*screensRig, http.Handler) {
	t.Helper()
	r := &screensRig{tmp: tmp, sttGate: newGate(), modelGate: newGate(), lang: "en"}
	stt := &scriptedSTT{dir: tmp, text: func() (string, string) {
		r.sttGate.wait(context.Background())
		r.mu.Lock()
		defer r.mu.Unlock()
		return talkSaid[r.lang], r.lang
	}}
	// The answer's voice lasts a minute: "speaking" stays until the talk is ended.
	r.talkConfig = talkSpeechConfig(t, stt, &scriptedTTS{secs: func() float64 { return 60 }}, "cancel")
	return r, &gatedModel{next: model, keys: talkKeys, gate: r.modelGate}
}

// moreScreens visits the screens of this file in c's layout and language
// (the browser tab ctx at url, as tourScreens left it).
func (r *screensRig) moreScreens(t *testing.T, ctx context.Context, url string, c *screenCheck) {
	t.Helper()
	open := func() {
		t.Helper()
		reopenUI(t, ctx, url)
		setLang(t, ctx, c.lang)
	}
	tab := func(n int) { press(t, ctx, fmt.Sprintf(`nav.tabs button:nth-child(%d)`, n)) }
	key := func(what string) string { return fmt.Sprintf("shots-%s-%s-%s", c.lang, c.l.name, what) }

	// The editor: a change underneath, then Save: the conflict with theirs, mine and the merge.
	const plan = "memory/global/plan.md"
	const seedPlan = "# 计划 Plan\n\n第一步：整理索引。\nStep two: ship the lighthouse monitor (PX-4471).\n"
	open()
	tab(3)
	waitFor(t, ctx, "the plan in the file list", `[...document.querySelectorAll('[data-testid=memory-file] button')].some(b => b.title === 'memory/global/plan.md')`, 60*time.Second)
	js[bool](t, ctx, `(() => { [...document.querySelectorAll('[data-testid=memory-file] button')].find(b => b.title === 'memory/global/plan.md').click(); return true; })()`)
	press(t, ctx, `[data-testid=memory-edit]`)
	waitFor(t, ctx, "the plan in the editor", `!!document.querySelector('[data-testid=note-editor]') && (`+cmContent+`)?.textContent.includes('PX-4471')`, 60*time.Second)
	js[bool](t, ctx, `((`+cmContent+`).focus(), true)`)
	if err := chromedp.Do(bounded(t, ctx, 30*time.Second), chromedp.KeyEvent(kb.End, chromedp.KeyModifiers(chromedp.ModifierCtrl)), chromedp.KeyEvent("第三步：检查 Step three: check.")); err != nil {
		t.Fatalf("type in the editor: %v", err)
	}
	waitFor(t, ctx, "the editor marked unsaved", `document.querySelector('[data-testid=note-editor]').dataset.dirty === 'true'`, 20*time.Second)
	gatewayCall(t, url, "memory.write", map[string]any{"path": plan, "mode": "replace", "idempotencyKey": key("theirs"),
		"content": strings.Replace(seedPlan, "(PX-4471).", "(PX-4471) on Friday.", 1)})
	waitFor(t, ctx, "the changed-underneath warning", `!!document.querySelector('[data-testid=editor-changed]')`, 30*time.Second)
	press(t, ctx, `[data-testid=editor-save]`)
	waitFor(t, ctx, "the conflict", `document.querySelector('[data-testid=conflict-theirs]')?.textContent.includes('on Friday') && !!document.querySelector('[data-testid=conflict-merge]')`, 30*time.Second)
	scrollInPanel(t, ctx, `[data-testid=editor-conflict]`)
	c.screen(t, ctx, "editor-conflict")
	press(t, ctx, `[data-testid=resolve-merged]`)
	waitFor(t, ctx, "the conflict resolved", `!document.querySelector('[data-testid=editor-conflict]') && !!document.querySelector('[data-testid=editor-saved]')`, 30*time.Second)
	gatewayCall(t, url, "memory.write", map[string]any{"path": plan, "mode": "replace", "content": seedPlan, "idempotencyKey": key("seed")})

	// A drop's progress and summary into writer's layer: dropped on the
	// desktop, chosen with the file chooser at phone size.
	open()
	tab(3)
	setSelect(t, ctx, "memory-layer", "role:writer")
	if c.l.touch {
		dir := filepath.Join(r.tmp, "choose-"+c.lang)
		var files []string
		for i := range 40 {
			files = append(files, filepath.Join(dir, fmt.Sprintf("drop-%03d.md", i)))
		}
		files = append(files, filepath.Join(dir, "photo.png"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, f := range files {
			body := fmt.Sprintf("# Note %03d\n\n拖放笔记 %03d\n", i, i)
			if strings.HasSuffix(f, ".png") {
				body = "\x89PNG\r\n\x1a\n\x00\x00\x00\x00"
			}
			if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		scrollInPanel(t, ctx, `[data-testid=memory-dropzone]`)
		if err := chromedp.Do(bounded(t, ctx, 60*time.Second), chromedp.SetUploadFiles(chromedp.CSS(`[data-testid=memory-file-input]`), files)); err != nil {
			t.Fatalf("choose files: %v", err)
		}
	} else {
		js[bool](t, ctx, `(() => {
			const dt = new DataTransfer();
			for (let i = 0; i < 300; i++) {
				const n = String(i).padStart(3, '0');
				dt.items.add(new File(['# Note ' + n + '\n\n拖放笔记 ' + n + '\n'], 'drop-' + n + '.md', {type: 'text/markdown'}));
			}
			dt.items.add(new File([new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0])], 'photo.png', {type: 'image/png'}));
			const zone = document.querySelector('[data-testid=memory-dropzone]');
			zone.dispatchEvent(new DragEvent('dragover', {dataTransfer: dt, bubbles: true, cancelable: true}));
			zone.dispatchEvent(new DragEvent('drop', {dataTransfer: dt, bubbles: true, cancelable: true}));
			return true;
		})()`)
	}
	waitFor(t, ctx, "the drop's progress", `!!document.querySelector('[data-testid=import-progress]')`, 30*time.Second)
	c.screen(t, ctx, "drop-progress")
	waitFor(t, ctx, "the drop's summary", `!!document.querySelector('[data-testid=import-summary]')`, 10*time.Minute)
	c.screen(t, ctx, "drop-summary")
	dropped, _ := filepath.Glob(filepath.Join(r.ws, "memory", "roles", "writer", "drop-*.md"))
	for _, f := range dropped { // the next drop finds the names free again
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	// The index lets them go before the next screens (their file counts) are shot.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		var list struct {
			Files []struct{ Path string } `json:"files"`
		}
		if err := json.Unmarshal(gatewayCall(t, url, "memory.files", map[string]any{}), &list); err != nil {
			t.Fatal(err)
		}
		left := 0
		for _, f := range list.Files {
			if strings.HasPrefix(f.Path, "memory/roles/writer/drop-") {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d dropped notes still indexed two minutes after they were removed", left)
		}
	}

	// The delete-role warning with its dry run's figures, keeping and deleting the memory.
	open()
	tab(1)
	press(t, ctx, `[data-testid=profile][data-profile=reviewer] [data-testid=profile-delete]`)
	waitFor(t, ctx, "the delete warning's figures", `!!document.querySelector('[data-testid=role-delete-kept]')`, 30*time.Second)
	c.screen(t, ctx, "role-delete")
	press(t, ctx, `[data-testid=role-delete-memory]`)
	waitFor(t, ctx, "the removal warning", `!!document.querySelector('[data-testid=role-delete-removed]')`, 10*time.Second)
	c.screen(t, ctx, "role-delete-memory")
	press(t, ctx, `[data-testid=role-delete-cancel]`)
	waitFor(t, ctx, "the warning closed", `!document.querySelector('[data-testid=role-delete-dialog]')`, 10*time.Second)

	// The Canvas with a surface pushed over the gateway (canvasForm, as the canvas tests push it).
	var lines []string
	for _, m := range canvasForm {
		b, _ := json.Marshal(m)
		lines = append(lines, string(b))
	}
	r.g.admin.call("canvas.a2ui.push", map[string]any{"target": "desktop", "jsonl": strings.Join(lines, "\n")})
	waitFor(t, ctx, "the form on the Canvas", `!!document.querySelector('[data-testid=canvas] [data-surface=form] input[type=range]')`, 60*time.Second)
	if !js[bool](t, ctx, `!!document.querySelector('[data-testid=canvas-dialog]:not(.canvas-hidden)')`) { // a push may open it itself
		press(t, ctx, `[data-testid=open-canvas]`)
	}
	waitFor(t, ctx, "the Canvas open", `!!document.querySelector('[data-testid=canvas-dialog]:not(.canvas-hidden)')`, 30*time.Second)
	c.screen(t, ctx, "canvas-surface")
	press(t, ctx, `[data-testid=close-canvas]`)
	r.g.admin.call("canvas.a2ui.reset", map[string]any{"target": "desktop"})

	// Collaborations: main asks writer about a global note writer may not
	// collaborate on (the defaults): the person decides, from the prompt or the panel.
	var asked struct {
		CollabID string `json:"collabId"`
	}
	if err := json.Unmarshal(r.g.admin.call("collab.request", map[string]any{"as": "main", "to": "writer",
		"task": "Proofread the plan before Friday. 请在周五前校对计划。", "context": []string{plan}}), &asked); err != nil || asked.CollabID == "" {
		t.Fatalf("collab.request: %v %+v", err, asked)
	}
	waitFor(t, ctx, "the collaboration prompt", `(() => { const d = document.querySelector('[role=alertdialog][data-testid=collab-prompt]'); return !!d && d.getBoundingClientRect().height > 0 })()`, 60*time.Second)
	c.screen(t, ctx, "collab-prompt")
	press(t, ctx, `[data-testid=collab-prompt-open]`)
	waitFor(t, ctx, "the open collaboration in the panel", `[...document.querySelectorAll('[data-testid=collab-open]')].some(e => e.dataset.status === 'pending')`, 30*time.Second)
	press(t, ctx, `[data-testid=collab-open] [data-testid=collab-details]`)
	press(t, ctx, `[data-testid=collab-file]`)
	waitFor(t, ctx, "the shared file, read-only", `!!document.querySelector('[data-testid=collab-file-text]')?.readOnly`, 30*time.Second)
	c.screen(t, ctx, "collab-panel")
	r.g.admin.call("collab.decide", map[string]any{"collabId": asked.CollabID, "decision": "decline", "reason": "screenshots"})
	waitFor(t, ctx, "the declined one in the history", `!document.querySelector('[data-testid=collab-open]') && [...document.querySelectorAll('[data-testid=collab-done]')].some(e => e.dataset.status === 'declined')`, 30*time.Second)
	press(t, ctx, `[data-testid=close-collab]`)

	r.talkScreens(t, ctx, url, c)
}

// scrollInPanel scrolls the box around sel that scrolls (a panel, an
// overlay) so that sel's top is at the box's top, as a person scrolling
// that panel would (scrollIntoView also scrolls the app's clipped frame,
// which no person can, leaving a strip of empty page in the shot).
func scrollInPanel(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	js[bool](t, ctx, `(() => {
		const e = document.querySelector(`+jsString(sel)+`);
		let p = e.parentElement;
		while (p && !/(auto|scroll)/.test(getComputedStyle(p).overflowY)) p = p.parentElement;
		if (p) p.scrollTop += e.getBoundingClientRect().top - p.getBoundingClientRect().top;
		return true;
	})()`)
}

// talkScreens shoots the talk button's states in main's chat: with no
// transcription server set (its explanation), then with the scripted
// servers: recording (push-to-talk), transcribing (the transcription
// held), idle with the transcript in the input, thinking (the answer
// held), speaking (a minute-long voice), listening (continuous mode on a
// silent microphone); and Settings → Talk.
func (r *screensRig) talkScreens(t *testing.T, ctx context.Context, url string, c *screenCheck) {
	t.Helper()
	const talk = visibleChat + ` [data-testid=talk]`
	state := func(s string) string {
		return `document.querySelector(` + jsString(talk) + `)?.dataset.talkState === ` + jsString(s)
	}
	r.mu.Lock()
	r.lang = c.lang
	r.mu.Unlock()
	r.g.admin.call("config.patch", map[string]any{"patch": map[string]any{"talk": nil}})
	reopenUI(t, ctx, url)
	setLang(t, ctx, c.lang)
	press(t, ctx, `nav.tabs button:nth-child(2)`)
	waitFor(t, ctx, "the talk button", `!!document.querySelector(`+jsString(visibleChat+` [data-testid=talk-button]`)+`)?.offsetParent`, 30*time.Second)
	press(t, ctx, visibleChat+` [data-testid=talk-button]`)
	waitFor(t, ctx, "the talk button's explanation", `document.querySelector('[data-testid=talk-problem]')?.dataset.code === 'TALK_NO_STT'`, 30*time.Second)
	c.screen(t, ctx, "talk-not-configured")
	press(t, ctx, `[data-testid=talk-problem-close]`)

	r.g.admin.call("config.patch", map[string]any{"patch": map[string]any{"talk": r.talkConfig}})
	press(t, ctx, visibleChat+` [data-testid=talk-button]`)
	waitFor(t, ctx, "recording", state("recording"), 60*time.Second)
	c.screen(t, ctx, "talk-recording")
	press(t, ctx, visibleChat+` [data-testid=talk-button]`)
	waitFor(t, ctx, "transcribing", state("transcribing"), 60*time.Second)
	c.screen(t, ctx, "talk-transcribing")
	r.sttGate.openWhenHeld(t, "the transcription")
	waitFor(t, ctx, "the transcript in the input", `document.querySelector(`+jsString(visibleChat+` [data-testid=chat-input]`)+`)?.value === `+jsString(talkSaid[c.lang])+` && `+state("idle"), 60*time.Second)
	c.screen(t, ctx, "talk-idle")
	js[bool](t, ctx, `(document.querySelector(`+jsString(visibleChat+` [data-testid=chat-input]`)+`).focus(), true)`)
	keys(t, ctx, "\r")
	waitFor(t, ctx, "thinking", state("thinking"), 60*time.Second)
	c.screen(t, ctx, "talk-thinking")
	r.modelGate.openWhenHeld(t, "the talk's answer")
	waitFor(t, ctx, "speaking", state("speaking"), 60*time.Second)
	c.screen(t, ctx, "talk-speaking")
	press(t, ctx, visibleChat+` [data-testid=talk-end]`)
	waitFor(t, ctx, "the talk ended", state("off"), 30*time.Second)
	press(t, ctx, visibleChat+` [data-testid=talk-continuous]`)
	waitFor(t, ctx, "listening", state("listening"), 60*time.Second)
	c.screen(t, ctx, "talk-listening")
	press(t, ctx, visibleChat+` [data-testid=talk-end]`)
	waitFor(t, ctx, "the talk ended", state("off"), 30*time.Second)

	press(t, ctx, `[data-testid=open-settings]`)
	waitFor(t, ctx, "Settings → Talk", `document.querySelector('[data-testid=talk-stt-base]')?.value.startsWith('http://127.0.0.1:')`, 30*time.Second)
	scrollInPanel(t, ctx, `#s-talk`)
	c.screen(t, ctx, "settings-talk")
	press(t, ctx, `[data-testid=close-settings]`)
}

// phoneScreens shoots the paired phone's /pair page (tab phone, at url
// already) in c's layout and language: the chat, the memory tab, the
// pairing details unfolded.
func phoneScreens(t *testing.T, phone context.Context, c *screenCheck) {
	t.Helper()
	emulate(t, phone, c.l)
	setLang(t, phone, c.lang)
	waitFor(t, phone, "the layout at the emulated size", fmt.Sprintf(`window.innerWidth === %d`, c.l.w), 20*time.Second)
	click(t, phone, `.app.phone .tabs button:nth-child(2)`)
	waitFor(t, phone, "the chat on the phone", `!!document.querySelector('[data-testid=chat-input]')?.offsetParent && !document.querySelector('[data-testid=chat-unavailable]')`, 30*time.Second)
	c.screen(t, phone, "pair-chat")
	click(t, phone, `.app.phone .tabs button:nth-child(3)`)
	waitFor(t, phone, "the memory tab", `!!document.querySelector('.memory-panel.active')`, 10*time.Second)
	c.screen(t, phone, "pair-memory")
	click(t, phone, `.app.phone .tabs button:nth-child(2)`)
	js[bool](t, phone, `(document.querySelector('[data-testid=phone-details]').open = true, true)`)
	c.screen(t, phone, "pair-details")
	js[bool](t, phone, `(document.querySelector('[data-testid=phone-details]').open = false, true)`)
}
