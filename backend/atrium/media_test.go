package atrium

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"image"
	"image/color"
	_ "image/jpeg"
	"image/png"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/media"
)

// TestMediaGet: the person at this machine gets a stored photo's bytes
// through media.get; every other principal — a local node, a paired node
// device, a paired operator device, an unpaired device — is refused
// FORBIDDEN and audited; a malformed id is INVALID_REQUEST, an unknown one
// NOT_FOUND.
func TestMediaGet(t *testing.T) {
	a, ws := startApp(t, func(string) string { return "" })
	seedWorkspace(t, a, ws, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	data := []byte("\x89PNG\r\n\x1a\n a photo that is not really one")
	p := media.Plan{ID: media.NewID(), Device: "dev", Command: "camera.snap", Name: "snap.png", Size: int64(len(data)),
		SHA256: sha256.Sum256(data), BlockSize: media.MinBlockSize, Blocks: [][32]byte{sha256.Sum256(data)}, MIME: "image/png",
		Transport: media.TransportWebRTC}
	part, err := a.Media.Begin(p)
	must(t, err)
	must(t, part.WriteBlock(0, data))
	meta, err := part.Commit()
	must(t, err)

	admin := gwDial(ctx, t, a, gateway.RoleOperator, "media-admin")
	var got struct {
		ID, MIME   string
		Size       int
		DataBase64 string
		Meta       media.Meta
	}
	must(t, admin.Call(ctx, "media.get", map[string]any{"id": meta.ID}, &got))
	if got.ID != meta.ID || got.MIME != "image/png" || got.Size != len(data) || got.DataBase64 != base64.StdEncoding.EncodeToString(data) || got.Meta.SHA256 != meta.SHA256 {
		t.Fatalf("media.get: %+v", got)
	}
	if err := admin.Call(ctx, "media.get", map[string]any{"id": "../state.db"}, nil); errCode(err) != gateway.CodeInvalidRequest {
		t.Fatalf("malformed id: %v", err)
	}
	if err := admin.Call(ctx, "media.get", map[string]any{"id": media.NewID()}, nil); errCode(err) != gateway.CodeNotFound {
		t.Fatalf("unknown id: %v", err)
	}

	others := append([]principalConn{{gateway.LocalNode, gwDial(ctx, t, a, gateway.RoleNode, "media-node"), "authenticated"}},
		devicePrincipals(ctx, t, a)...)
	for _, pc := range others {
		var leak struct{ DataBase64 string }
		err := pc.cl.Call(ctx, "media.get", map[string]any{"id": meta.ID}, &leak)
		if errCode(err) != gateway.CodeForbidden || leak.DataBase64 != "" {
			t.Errorf("%s: %v, want FORBIDDEN", pc.class, err)
			continue
		}
		e, terr := a.Audit.Tail(1, audit.Filter{})
		if terr != nil || len(e) != 1 || e[0].Result != audit.Denied || e[0].Operation != "media.get" || e[0].Role != pc.role {
			t.Errorf("%s: audit %+v %v", pc.class, e, terr)
		}
	}
	if len(others) < 4 {
		t.Fatalf("only %d other principals tried", len(others))
	}
}

// storeMedia puts data into the app's media store as one committed file.
func storeMedia(t *testing.T, a *App, device, command, name, mime string, data []byte) media.Meta {
	t.Helper()
	sum := sha256.Sum256(data)
	var blocks [][32]byte
	for off := 0; off < len(data); off += media.MinBlockSize {
		blocks = append(blocks, sha256.Sum256(data[off:min(off+media.MinBlockSize, len(data))]))
	}
	part, err := a.Media.Begin(media.Plan{ID: media.NewID(), Device: device, Command: command, Name: name, Size: int64(len(data)),
		SHA256: sum, BlockSize: media.MinBlockSize, Blocks: blocks, MIME: mime, Transport: media.TransportWebRTC})
	must(t, err)
	for i := range blocks {
		off := i * media.MinBlockSize
		must(t, part.WriteBlock(i, data[off:min(off+media.MinBlockSize, len(data))]))
	}
	m, err := part.Commit()
	must(t, err)
	return m
}

// testPNG is a w×h PNG with a colour gradient.
func testPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y), 128, 255})
		}
	}
	var b bytes.Buffer
	must(t, png.Encode(&b, img))
	return b.Bytes()
}

// TestMediaMethods: media.list (newest first, filters, cursor pages),
// media.get's thumbnail (a JPEG that fits 256 px), media.attach (the photo
// copied beside the note, linked from it, not indexed; a clip, a note the
// caller may not write: refused, nothing written) and media.delete (file
// and sidecar gone, audited) for the person and for a phone scoped admin;
// every other principal — local node, node device, operator device scoped
// authenticated or to a role, unpaired — is FORBIDDEN and audited on each
// of the four methods.
func TestMediaMethods(t *testing.T) {
	a, ws := startApp(t, func(string) string { return "" })
	seedWorkspace(t, a, ws, scopeFiles)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := gwDial(ctx, t, a, gateway.RoleOperator, "media-admin")
	must(t, admin.Call(ctx, "memory.sync", nil, nil))

	photo := testPNG(t, 640, 480)
	m1 := storeMedia(t, a, "dev-a", "camera.snap", "snap.png", "image/png", photo)
	m2 := storeMedia(t, a, "dev-b", "screen.snapshot", "screen.png", "image/png", testPNG(t, 300, 900))
	clip := storeMedia(t, a, "dev-a", "camera.clip", "clip.webm", "video/webm", []byte("\x1a\x45\xdf\xa3 not really a clip"))

	type listRes struct {
		Items      []media.Meta
		NextCursor string
	}
	var all listRes
	must(t, admin.Call(ctx, "media.list", map[string]any{}, &all))
	if len(all.Items) != 3 || all.NextCursor != "" {
		t.Fatalf("media.list: %+v", all)
	}
	for i := 1; i < len(all.Items); i++ {
		if all.Items[i].Time.After(all.Items[i-1].Time) {
			t.Errorf("media.list not newest first: %+v", all.Items)
		}
	}
	var paged []string
	cursor := ""
	for range 5 {
		var page listRes
		must(t, admin.Call(ctx, "media.list", map[string]any{"limit": 1, "cursor": cursor}, &page))
		for _, m := range page.Items {
			paged = append(paged, m.ID)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if want := []string{all.Items[0].ID, all.Items[1].ID, all.Items[2].ID}; !slices.Equal(paged, want) {
		t.Errorf("paged %v, want %v", paged, want)
	}
	var byDev listRes
	must(t, admin.Call(ctx, "media.list", map[string]any{"deviceId": "dev-a", "command": "camera.snap"}, &byDev))
	if len(byDev.Items) != 1 || byDev.Items[0].ID != m1.ID || byDev.Items[0].Width != 640 {
		t.Errorf("media.list dev-a camera.snap: %+v", byDev)
	}
	for _, bad := range []map[string]any{{"cursor": "nope"}, {"limit": 1000}} {
		if err := admin.Call(ctx, "media.list", bad, nil); errCode(err) != gateway.CodeInvalidRequest {
			t.Errorf("media.list %v: %v, want INVALID_REQUEST", bad, err)
		}
	}

	// Thumbnails fit 256×256, keep the aspect ratio, and are JPEGs.
	for _, tc := range []struct {
		id   string
		w, h int
	}{{m1.ID, 256, 192}, {m2.ID, 85, 256}} {
		var th struct {
			MIME, DataBase64 string
			Thumb            bool
			Meta             media.Meta
		}
		must(t, admin.Call(ctx, "media.get", map[string]any{"id": tc.id, "thumb": true}, &th))
		raw, err := base64.StdEncoding.DecodeString(th.DataBase64)
		must(t, err)
		cfg, format, err := image.DecodeConfig(bytes.NewReader(raw))
		if err != nil || format != "jpeg" || cfg.Width != tc.w || cfg.Height != tc.h || th.MIME != "image/jpeg" || !th.Thumb || th.Meta.ID != tc.id {
			t.Errorf("thumb of %s: %s %dx%d %v (mime %s), want jpeg %dx%d", tc.id, format, cfg.Width, cfg.Height, err, th.MIME, tc.w, tc.h)
		}
	}
	if err := admin.Call(ctx, "media.get", map[string]any{"id": clip.ID, "thumb": true}, nil); errCode(err) != gateway.CodeInvalidRequest {
		t.Errorf("thumb of a clip: %v, want INVALID_REQUEST", err)
	}

	// Attach: copied beside the note, linked, not indexed, audited.
	var att struct {
		Attachment string
		Note       struct{ Path, Version string }
	}
	must(t, admin.Call(ctx, "media.attach", map[string]any{"id": m1.ID, "path": "memory/shared/trip.md", "caption": "Lake [at] dusk\nsecond line"}, &att))
	wantRel := "memory/shared/attachments/" + m1.Time.UTC().Format("2006-01-02") + "-" + m1.ID[:12] + ".png"
	if att.Attachment != wantRel || att.Note.Path != "memory/shared/trip.md" || att.Note.Version == "" {
		t.Fatalf("media.attach: %+v, want attachment %s", att, wantRel)
	}
	if got, err := os.ReadFile(filepath.Join(ws, filepath.FromSlash(wantRel))); err != nil || !bytes.Equal(got, photo) {
		t.Errorf("attachment %s: %d bytes %v, want the photo's %d", wantRel, len(got), err, len(photo))
	}
	note, err := os.ReadFile(filepath.Join(ws, "memory", "shared", "trip.md"))
	must(t, err)
	if want := "![Lake at dusk second line](attachments/" + path.Base(wantRel) + ")"; !strings.Contains(string(note), want) {
		t.Errorf("note %q lacks %q", note, want)
	}
	must(t, admin.Call(ctx, "memory.sync", nil, nil))
	if files := filesOf(ctx, t, admin); slices.ContainsFunc(files, func(p string) bool { return strings.Contains(p, "attachments/") }) {
		t.Errorf("memory.files lists an attachment: %v", files)
	}
	if e, err := a.Audit.Tail(5, audit.Filter{}); err != nil || !slices.ContainsFunc(e, func(e audit.Entry) bool {
		return e.Target == strings.TrimPrefix(wantRel, "memory/") && e.Result == audit.Allowed && e.Role == "admin"
	}) {
		t.Errorf("attach audit: %+v %v", e, err)
	}
	// A second attach of the same photo to the same note's folder: the name is taken.
	if err := admin.Call(ctx, "media.attach", map[string]any{"id": m1.ID, "path": "memory/shared/trip.md"}, nil); errCode(err) != gateway.CodeConflict {
		t.Errorf("attach again: %v, want CONFLICT", err)
	}
	// A clip is not a picture; a note `as` writer may not write: refused, nothing written.
	if err := admin.Call(ctx, "media.attach", map[string]any{"id": clip.ID, "path": "memory/shared/trip.md"}, nil); errCode(err) != gateway.CodeInvalidRequest {
		t.Errorf("attach a clip: %v, want INVALID_REQUEST", err)
	}
	if err := admin.Call(ctx, "media.attach", map[string]any{"id": m2.ID, "path": "MEMORY.md", "as": "writer"}, nil); errCode(err) != gateway.CodeForbidden {
		t.Errorf("attach as writer to MEMORY.md: %v, want FORBIDDEN", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "attachments")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused attach left %v", err)
	}
	if err := admin.Call(ctx, "media.attach", map[string]any{"id": m2.ID, "path": "memory/shared/photo.png"}, nil); errCode(err) != gateway.CodeInvalidRequest {
		t.Errorf("attach to a path that is no note: %v, want INVALID_REQUEST", err)
	}

	// Every other principal, on every media method.
	others := append([]principalConn{{gateway.LocalNode, gwDial(ctx, t, a, gateway.RoleNode, "media-node"), "authenticated"}},
		devicePrincipals(ctx, t, a)...)
	writerPhone, _ := scopedPhone(ctx, t, a, admin, "role:writer")
	others = append(others, principalConn{gateway.OperatorDevice, writerPhone, "writer"})
	calls := map[string]map[string]any{
		"media.list":   {},
		"media.get":    {"id": m1.ID, "thumb": true},
		"media.read":   {"id": m1.ID, "offset": 0, "length": 16},
		"media.delete": {"id": m1.ID},
		"media.attach": {"id": m1.ID, "path": "memory/shared/other.md"},
	}
	for _, pc := range others {
		for method, params := range calls {
			var leak map[string]any
			err := pc.cl.Call(ctx, method, params, &leak)
			if errCode(err) != gateway.CodeForbidden || len(leak) != 0 {
				t.Errorf("%s (%s) %s: %v %v, want FORBIDDEN", pc.class, pc.role, method, err, leak)
				continue
			}
			e, terr := a.Audit.Tail(1, audit.Filter{})
			if terr != nil || len(e) != 1 || e[0].Result != audit.Denied || e[0].Operation != method || e[0].Role != pc.role {
				t.Errorf("%s (%s) %s: audit %+v %v", pc.class, pc.role, method, e, terr)
			}
		}
	}
	if _, err := a.Media.Get(m1.ID); err != nil {
		t.Fatalf("after the refused deletes: %v", err)
	}

	// A phone scoped admin is the person: it lists, gets and deletes.
	adminPhone, _ := scopedPhone(ctx, t, a, admin, "admin")
	var phoneList listRes
	must(t, adminPhone.Call(ctx, "media.list", map[string]any{}, &phoneList))
	if len(phoneList.Items) != 3 {
		t.Errorf("admin phone media.list: %+v", phoneList)
	}
	must(t, adminPhone.Call(ctx, "media.get", map[string]any{"id": m2.ID, "thumb": true}, nil))
	var del struct{ Deleted bool }
	must(t, adminPhone.Call(ctx, "media.delete", map[string]any{"id": m2.ID}, &del))
	if !del.Deleted {
		t.Errorf("media.delete: %+v", del)
	}
	if e, err := a.Audit.Tail(1, audit.Filter{}); err != nil || len(e) != 1 || e[0].Operation != "media.delete" || e[0].Result != audit.Allowed || e[0].Target != m2.ID || e[0].Role != "admin" {
		t.Errorf("delete audit: %+v %v", e, err)
	}

	// The person deletes: the file and its sidecar go; again: deleted false.
	must(t, admin.Call(ctx, "media.delete", map[string]any{"id": m1.ID}, &del))
	for _, name := range []string{m1.File, m1.ID + ".json", m2.File, m2.ID + ".json"} {
		if _, err := os.Stat(filepath.Join(a.Media.Dir(), name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("after media.delete %s: %v", name, err)
		}
	}
	must(t, admin.Call(ctx, "media.delete", map[string]any{"id": m1.ID}, &del))
	if del.Deleted {
		t.Errorf("second media.delete: %+v", del)
	}
	must(t, admin.Call(ctx, "media.list", map[string]any{}, &all))
	if len(all.Items) != 1 || all.Items[0].ID != clip.ID {
		t.Errorf("media.list after deletes: %+v", all)
	}
	// The attached copy stays with the note.
	if _, err := os.Stat(filepath.Join(ws, filepath.FromSlash(wantRel))); err != nil {
		t.Errorf("attachment after delete: %v", err)
	}
}
