package atrium

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/media"
	"github.com/atrium-dev/atrium/backend/nodes"
	"github.com/atrium-dev/atrium/backend/upload"
)

// uploader speaks the upload route for one device (the phone page's
// fallback, in Go).
type uploader struct {
	t      *testing.T
	base   string // http://127.0.0.1:port
	device string
	token  string
	hc     *http.Client
}

// do sends one request and returns its status and body.
func (u *uploader) do(method, path string, body []byte, hdr map[string]string) (int, []byte) {
	u.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, u.base+path, rd)
	must(u.t, err)
	if u.token != "" {
		req.Header.Set("Authorization", "Bearer "+u.token)
	}
	if u.device != "" {
		req.Header.Set(upload.HeaderDevice, u.device)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := u.hc.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// plan cuts data into blocks of bs bytes.
func uploadPlan(data []byte, bs int) (upload.Plan, [][]byte) {
	sum := sha256.Sum256(data)
	p := upload.Plan{V: upload.Version, Name: "photo.jpg", Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), BlockSize: bs, MIME: "image/jpeg"}
	var blocks [][]byte
	for off := 0; off < len(data); off += bs {
		b := data[off:min(off+bs, len(data))]
		h := sha256.Sum256(b)
		p.Blocks = append(p.Blocks, hex.EncodeToString(h[:]))
		blocks = append(blocks, b)
	}
	return p, blocks
}

func (u *uploader) postPlan(id string, p upload.Plan) (int, upload.Status) {
	u.t.Helper()
	b, err := json.Marshal(p)
	must(u.t, err)
	st, body := u.do(http.MethodPost, "/media/upload/"+id, b, map[string]string{"Content-Type": "application/json"})
	var s upload.Status
	if st == 200 {
		must(u.t, json.Unmarshal(body, &s))
	}
	return st, s
}

func (u *uploader) putBlock(id string, i int, data []byte, hash string) (int, upload.Status) {
	u.t.Helper()
	st, body := u.do(http.MethodPut, fmt.Sprintf("/media/upload/%s/%d", id, i), data, map[string]string{upload.HeaderBlockHash: hash})
	var s upload.Status
	if st == 200 {
		must(u.t, json.Unmarshal(body, &s))
	}
	return st, s
}

// TestNodeSnapOverHTTPS (issue 22 item 2): on the real app a paired node
// uploads camera.snap's photo over the gateway's upload route for the
// ticket node.invoke gave it: the file lands with the right SHA-256 and
// transport "https", and the invoke's media says so. While the upload holds
// the ticket and after it stored the file, an offer on the data channel
// for it is refused. A request cut in the middle of a block resumes with
// the missing blocks only (GET says which). Refused, audited, and nothing
// left of the transfer: no or a wrong token, another device's token, a
// transfer nobody asked for, a file too large, a block longer than its
// plan's, a block past the plan (endless), a wrong block hash, a slow
// body; and every other path still refuses a body. An upload outlives the
// node's connection, as a data channel's transfer does.
func TestNodeSnapOverHTTPS(t *testing.T) {
	a, _ := startApp(t, func(string) string { return "" })
	// Short bounds for the slow-body case.
	up, err := a.newUploads(a.log, func(o *upload.Options) { o.BlockTimeout = 2 * time.Second })
	must(t, err)
	a.uploads.Store(up)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	admin := gwDial(ctx, t, a, gateway.RoleOperator, "upload-admin")

	dial := func(commands []string) (*gateway.Client, string, string) {
		key, toks := pairDevice(ctx, t, a, admin, []string{gateway.RoleNode}, commands)
		c, err := deviceDial(ctx, t, a, key, gateway.ClientOptions{DeviceToken: toks[gateway.RoleNode], Role: gateway.RoleNode,
			Caps: []string{"camera"}, Commands: commands})
		must(t, err)
		t.Cleanup(func() { c.Close() })
		return c, key.Public().ID(), toks[gateway.RoleNode]
	}
	_, otherDev, otherTok := dial([]string{"camera.list"})
	node, dev, tok := dial([]string{"camera.snap"})
	waitNode(ctx, t, a, dev, "")
	base := "http://" + a.Gateway.Addr()
	u := &uploader{t: t, base: base, device: dev, token: tok, hc: &http.Client{Timeout: 60 * time.Second}}

	// Each invoke's request reaches the test, which plays the node.
	type request struct{ id, transfer string }
	reqs := make(chan request, 4)
	go func() {
		for ev := range node.Events() {
			var r nodes.InvokeRequestEvent
			if ev.Event != nodes.EventInvokeRequest || json.Unmarshal(ev.Payload, &r) != nil {
				continue
			}
			var p struct {
				Transfer struct{ ID string }
			}
			_ = json.Unmarshal(r.Params, &p)
			reqs <- request{r.ID, p.Transfer.ID}
		}
	}()
	type answer struct {
		r   nodes.InvokeResult
		err error
	}
	invoke := func() (request, <-chan answer) {
		t.Helper()
		ch := make(chan answer, 1)
		go func() {
			var r nodes.InvokeResult
			err := admin.Call(ctx, nodes.MethodNodeInvoke, map[string]any{"nodeId": dev, "command": "camera.snap", "params": map[string]any{}, "timeoutMs": 90000}, &r)
			ch <- answer{r, err}
		}()
		select {
		case rq := <-reqs:
			return rq, ch
		case <-ctx.Done():
			t.Fatal("no invoke request reached the node")
		}
		return request{}, nil
	}
	result := func(rq request, ch <-chan answer) answer {
		t.Helper()
		must(t, node.Call(ctx, nodes.MethodInvokeResult, map[string]any{"id": rq.id, "ok": true, "payload": map[string]any{},
			"media": map[string]any{"id": rq.transfer, "transport": "https"}}, nil))
		select {
		case a := <-ch:
			return a
		case <-ctx.Done():
			t.Fatal("node.invoke did not answer")
		}
		return answer{}
	}
	offer := func(id string) error {
		return node.Call(ctx, nodes.MethodMediaOffer, map[string]any{"transferId": id, "sdp": "v=0\r\na=fingerprint:sha-256 AB\r\n"}, nil)
	}
	nothingLeft := func(what, id string) {
		t.Helper()
		if ents, _ := os.ReadDir(filepath.Join(a.Layout.MediaDir(), ".partial")); len(ents) != 0 {
			t.Errorf("%s: the partial folder holds %d entries", what, len(ents))
		}
		if _, err := a.Media.Get(id); err == nil {
			t.Errorf("%s: transfer %s was stored", what, id)
		}
	}
	audited := func(what, wantReason string) {
		t.Helper()
		es, err := a.Audit.Tail(20, audit.Filter{})
		must(t, err)
		for _, e := range es {
			if e.Operation == "media.upload" && e.Result == audit.Denied && strings.Contains(e.Reason, wantReason) {
				return
			}
		}
		t.Errorf("%s: no media.upload refusal with %q in the audit log", what, wantReason)
	}

	// 1. The whole photo over HTTPS in 4 KiB blocks.
	photo := testJPEG(t, 160, 120)
	plan, blocks := uploadPlan(photo, 4<<10)
	rq, ch := invoke()
	st, s := u.postPlan(rq.transfer, plan)
	if st != 200 || s.Blocks != len(blocks) || len(s.Missing) != 1 || s.Missing[0] != [2]int{0, len(blocks)} {
		t.Fatalf("plan: %d %+v", st, s)
	}
	if err := offer(rq.transfer); errCode(err) != gateway.CodeForbidden {
		t.Fatalf("an offer while the upload holds the transfer: %v, want FORBIDDEN", err)
	}
	for i, b := range blocks {
		st, s = u.putBlock(rq.transfer, i, b, plan.Blocks[i])
		if st != 200 {
			t.Fatalf("block %d: %d", i, st)
		}
	}
	if !s.Stored || s.Media == nil || s.Media.SHA256 != plan.SHA256 || s.Media.Transport != media.TransportHTTPS {
		t.Fatalf("the last block's status %+v", s)
	}
	got := result(rq, ch)
	if got.err != nil || !got.r.OK {
		t.Fatalf("camera.snap over https: %+v %v", got.r, got.err)
	}
	var m nodes.Media
	must(t, json.Unmarshal(got.r.Media, &m))
	if m.ID != rq.transfer || m.SHA256 != plan.SHA256 || m.Transport != media.TransportHTTPS || m.Width != 160 || m.Height != 120 || m.Device != dev {
		t.Fatalf("node.invoke's media %+v", m)
	}
	if b, err := os.ReadFile(m.Path); err != nil || !bytes.Equal(b, photo) {
		t.Fatalf("the stored file: %d bytes, %v", len(b), err)
	}
	if meta, err := a.Media.Get(m.ID); err != nil || meta.Transport != media.TransportHTTPS {
		t.Fatalf("the sidecar: %+v %v", meta, err)
	}
	if err := offer(rq.transfer); errCode(err) != gateway.CodeForbidden {
		t.Fatalf("an offer after the upload stored the file: %v, want FORBIDDEN", err)
	}
	if st, _ := u.putBlock(rq.transfer, 0, blocks[0], plan.Blocks[0]); st != http.StatusConflict && st != http.StatusForbidden {
		t.Fatalf("a block after the file was stored: %d", st)
	}

	// 2. Cut in the middle of block 3 of 6; GET names the missing blocks,
	// only those are sent.
	big := make([]byte, 6*(4<<10)-100)
	_, _ = rand.Read(big)
	plan, blocks = uploadPlan(big, 4<<10)
	rq, ch = invoke()
	if st, _ := u.postPlan(rq.transfer, plan); st != 200 {
		t.Fatalf("plan: %d", st)
	}
	for i := range 3 {
		if st, _ := u.putBlock(rq.transfer, i, blocks[i], plan.Blocks[i]); st != 200 {
			t.Fatalf("block %d: %d", i, st)
		}
	}
	c, err := net.DialTimeout("tcp", a.Gateway.Addr(), 10*time.Second)
	must(t, err)
	fmt.Fprintf(c, "PUT /media/upload/%s/3 HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n%s: %s\r\n%s: %s\r\nContent-Length: %d\r\n\r\n",
		rq.transfer, a.Gateway.Addr(), tok, upload.HeaderDevice, dev, upload.HeaderBlockHash, plan.Blocks[3], len(blocks[3]))
	_, _ = c.Write(blocks[3][:1000])
	c.Close()
	var status upload.Status
	for deadline := time.Now().Add(30 * time.Second); ; {
		st, body := u.do(http.MethodGet, "/media/upload/"+rq.transfer, nil, nil)
		if st != 200 {
			t.Fatalf("GET after the cut: %d %s", st, body)
		}
		must(t, json.Unmarshal(body, &status))
		if len(status.Missing) == 1 && status.Missing[0] == [2]int{3, 6} {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the cut the missing blocks are %v, want [[3 6]]", status.Missing)
		}
		time.Sleep(50 * time.Millisecond) // the cut request may still be read
	}
	for _, r := range status.Missing {
		for i := r[0]; i < r[1]; i++ {
			if st, _ := u.putBlock(rq.transfer, i, blocks[i], plan.Blocks[i]); st != 200 {
				t.Fatalf("block %d after the cut: %d", i, st)
			}
		}
	}
	got = result(rq, ch)
	must(t, json.Unmarshal(got.r.Media, &m))
	if !got.r.OK || m.SHA256 != plan.SHA256 || m.Transport != media.TransportHTTPS {
		t.Fatalf("the resumed upload: %+v %+v", got.r, m)
	}

	// 3. Who may upload: refused without ending the ticket.
	plan, blocks = uploadPlan(photo, 1<<10)
	if len(blocks) < 2 {
		t.Fatalf("the photo is %d blocks", len(blocks))
	}
	rq, ch = invoke()
	noTok := &uploader{t: t, base: base, device: dev, hc: u.hc}
	wrongTok := &uploader{t: t, base: base, device: dev, token: otherTok, hc: u.hc}
	otherDevice := &uploader{t: t, base: base, device: otherDev, token: otherTok, hc: u.hc}
	for _, tc := range []struct {
		what   string
		u      *uploader
		id     string
		status int
		reason string
	}{
		{"no token", noTok, rq.transfer, 401, "Authorization"},
		{"another device's token", wrongTok, rq.transfer, 401, "device token refused"},
		{"another paired device", otherDevice, rq.transfer, 403, "not requested"},
		{"a transfer nobody asked for", u, media.NewID(), 403, "not requested"},
	} {
		if st, _ := tc.u.postPlan(tc.id, plan); st != tc.status {
			t.Errorf("%s: %d, want %d", tc.what, st, tc.status)
		}
		audited(tc.what, tc.reason)
	}
	nothingLeft("the refused uploaders", rq.transfer)
	// Refused on the head alone: the answer comes before a byte of the
	// declared 4 MiB body was sent.
	for _, auth := range []string{"", "Authorization: Bearer " + otherTok + "\r\n"} {
		c, err := net.DialTimeout("tcp", a.Gateway.Addr(), 10*time.Second)
		must(t, err)
		fmt.Fprintf(c, "PUT /media/upload/%s/0 HTTP/1.1\r\nHost: %s\r\n%s%s: %s\r\nContent-Length: %d\r\n\r\n",
			rq.transfer, a.Gateway.Addr(), auth, upload.HeaderDevice, dev, 4<<20)
		_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 401 {
			t.Errorf("an unauthenticated head (%q): %v %v, want 401 before the body", auth, resp, err)
		}
		c.Close()
	}
	// Another device's token in a block request, before any body is read.
	if st, _ := wrongTok.putBlock(rq.transfer, 0, blocks[0], plan.Blocks[0]); st != 401 {
		t.Errorf("a block with another device's token: %d, want 401", st)
	}
	// The ticket is still the node's: its upload goes through.
	if st, _ := u.postPlan(rq.transfer, plan); st != 200 {
		t.Fatalf("the node's own plan after the refusals: %d", st)
	}
	for i, b := range blocks {
		if st, _ := u.putBlock(rq.transfer, i, b, plan.Blocks[i]); st != 200 {
			t.Fatalf("block %d: %d", i, st)
		}
	}
	if got := result(rq, ch); !got.r.OK {
		t.Fatalf("the upload after the refusals: %+v %v", got.r, got.err)
	}

	// 4. What the node sends is refused: the transfer ends with the code,
	// nothing of it stays, the refusal is audited.
	huge := plan
	huge.Size = a.Media.MaxFileSize() + 1
	huge.BlockSize = 4 << 20
	huge.Blocks = make([]string, media.NumBlocks(huge.Size, huge.BlockSize))
	for i := range huge.Blocks {
		huge.Blocks[i] = plan.Blocks[0]
	}
	slow := func(id string) int {
		c, err := net.DialTimeout("tcp", a.Gateway.Addr(), 10*time.Second)
		must(t, err)
		defer c.Close()
		fmt.Fprintf(c, "PUT /media/upload/%s/0 HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n%s: %s\r\n%s: %s\r\nContent-Length: %d\r\n\r\n",
			id, a.Gateway.Addr(), tok, upload.HeaderDevice, dev, upload.HeaderBlockHash, plan.Blocks[0], len(blocks[0]))
		_, _ = c.Write(blocks[0][:10]) // and nothing more
		_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		what   string
		send   func(id string) int
		status int
		code   string
	}{
		{"a file over the store's limit", func(id string) int { st, _ := u.postPlan(id, huge); return st }, 413, upload.CodeTooLarge},
		{"a block longer than planned", func(id string) int {
			u.postPlan(id, plan)
			st, _ := u.putBlock(id, 0, append(bytes.Clone(blocks[0]), 'x'), plan.Blocks[0])
			return st
		}, 400, upload.CodeInvalid},
		{"a block past the plan (endless)", func(id string) int {
			u.postPlan(id, plan)
			st, _ := u.putBlock(id, len(blocks), blocks[0], plan.Blocks[0])
			return st
		}, 400, upload.CodeEndless},
		{"a block hash not the planned one", func(id string) int {
			u.postPlan(id, plan)
			st, _ := u.putBlock(id, 0, blocks[0], plan.Blocks[1])
			return st
		}, 422, upload.CodeChecksum},
		{"a block whose bytes are not its hash's", func(id string) int {
			u.postPlan(id, plan)
			bad := bytes.Clone(blocks[0])
			bad[0] ^= 1
			st, _ := u.putBlock(id, 0, bad, plan.Blocks[0])
			return st
		}, 422, upload.CodeChecksum},
		{"a slow body", func(id string) int {
			u.postPlan(id, plan)
			return slow(id)
		}, 408, upload.CodeTimeout},
	} {
		rq, ch := invoke()
		if st := tc.send(rq.transfer); st != tc.status {
			t.Errorf("%s: %d, want %d", tc.what, st, tc.status)
		}
		got := result(rq, ch)
		if got.err != nil || got.r.OK || got.r.Error == nil || got.r.Error.Code != tc.code {
			t.Errorf("%s: node.invoke answered %+v %v, want the code %s", tc.what, got.r, got.err, tc.code)
		}
		nothingLeft(tc.what, rq.transfer)
		audited(tc.what, tc.code)
		if st, _ := u.postPlan(rq.transfer, plan); st != 403 {
			t.Errorf("%s: a plan after the refusal: %d, want 403", tc.what, st)
		}
	}

	// 5. Every other path still refuses a body, before reading it.
	for _, p := range []string{"/", "/ws", "/healthz", "/pair", "/media/upload/x/0", "/media/upload/" + media.NewID() + "/0/1"} {
		if st, _ := u.do(http.MethodPut, p, []byte("abc"), nil); st != 413 {
			t.Errorf("PUT %s with a body: %d, want 413", p, st)
		}
		if st, _ := u.do(http.MethodPost, p, []byte("abc"), nil); st != 413 {
			t.Errorf("POST %s with a body: %d, want 413", p, st)
		}
	}

	// 6. The node's connection ends in the middle of an upload that began
	// without an offer (a page without WebRTC, then reloaded): the invoke
	// waits for the file, as for a data channel cut, and the upload still
	// delivers it.
	plan, blocks = uploadPlan(photo, 1<<10)
	rq, ch = invoke()
	if st, _ := u.postPlan(rq.transfer, plan); st != 200 {
		t.Fatalf("plan: %d", st)
	}
	if st, _ := u.putBlock(rq.transfer, 0, blocks[0], plan.Blocks[0]); st != 200 {
		t.Fatalf("block 0: %d", st)
	}
	node.Close()
	for i := 1; i < len(blocks); i++ {
		if st, _ := u.putBlock(rq.transfer, i, blocks[i], plan.Blocks[i]); st != 200 {
			t.Fatalf("block %d after the node's connection ended: %d", i, st)
		}
	}
	select {
	case got := <-ch:
		if got.err != nil || !got.r.OK || json.Unmarshal(got.r.Media, &m) != nil || m.ID != rq.transfer || m.Transport != media.TransportHTTPS {
			t.Fatalf("the invoke of a node gone mid-upload: %+v %v", got.r, got.err)
		}
	case <-ctx.Done():
		t.Fatal("node.invoke did not answer")
	}

	list, err := a.Media.List()
	if err != nil || len(list) != 4 {
		t.Fatalf("the media folder holds %d files (%v), want the 4 uploads", len(list), err)
	}
}
