package atrium

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
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
