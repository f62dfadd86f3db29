package upload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/media"
)

const testToken = "tok"

// tickets is one expected transfer.
type tickets struct {
	mu     sync.Mutex
	t      Ticket
	ctx    context.Context
	cancel context.CancelFunc
	held   bool
	lets   int
	failed string
	stored *media.Meta
}

func (k *tickets) Take(device, id string) (Ticket, context.Context, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case id != k.t.ID || device != k.t.Device || k.ctx.Err() != nil:
		return Ticket{}, nil, ErrUnrequested
	case k.held:
		return Ticket{}, nil, ErrTaken
	}
	k.held = true
	return k.t, k.ctx, nil
}

func (k *tickets) Let(string) {
	k.mu.Lock()
	k.held = false
	k.lets++
	k.mu.Unlock()
}

func (k *tickets) Stored(_ string, m media.Meta) error {
	k.mu.Lock()
	k.stored = &m
	k.mu.Unlock()
	k.cancel()
	return nil
}

func (k *tickets) Failed(_, code, _ string) {
	k.mu.Lock()
	k.failed = code
	k.mu.Unlock()
	k.cancel()
}

func (k *tickets) state() (lets int, failed string, stored *media.Meta) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lets, k.failed, k.stored
}

type rig struct {
	t     *testing.T
	store *media.Store
	k     *tickets
	url   string
	data  []byte
	plan  Plan
}

func newRig(t *testing.T, o Options, peer net.IP) *rig {
	t.Helper()
	st, err := media.Open(filepath.Join(t.TempDir(), "media"), media.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	k := &tickets{t: Ticket{ID: media.NewID(), Device: "dev1", Command: "camera.snap", PeerIP: peer}, ctx: ctx, cancel: cancel}
	o.Store, o.Tickets = st, k
	o.Authenticate = func(_ context.Context, device, token string) error {
		if token != testToken {
			return ErrUnauthorized
		}
		return nil
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	data := make([]byte, 8*1024-10)
	for i := range data {
		data[i] = byte(i * 7)
	}
	sum := sha256.Sum256(data)
	p := Plan{V: Version, Name: "a.bin", Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), BlockSize: 1024}
	for off := 0; off < len(data); off += 1024 {
		h := sha256.Sum256(data[off:min(off+1024, len(data))])
		p.Blocks = append(p.Blocks, hex.EncodeToString(h[:]))
	}
	return &rig{t: t, store: st, k: k, url: srv.URL + "/media/upload/" + k.t.ID, data: data, plan: p}
}

func (r *rig) do(method, path string, body []byte, hdr ...string) (int, Status) {
	r.t.Helper()
	req, err := http.NewRequest(method, r.url+path, bytes.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set(HeaderDevice, "dev1")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	var st Status
	if resp.StatusCode == 200 {
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			r.t.Fatal(err)
		}
	}
	return resp.StatusCode, st
}

func (r *rig) post() (int, Status) {
	b, _ := json.Marshal(r.plan)
	return r.do(http.MethodPost, "", b)
}

func (r *rig) put(i int) (int, Status) {
	return r.do(http.MethodPut, fmt.Sprintf("/%d", i), r.data[i*1024:min((i+1)*1024, len(r.data))], HeaderBlockHash, r.plan.Blocks[i])
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// TestIdleUploadResumes: an upload left idle is suspended (the ticket let
// go, the partial kept); posting the same plan again resumes it with the
// missing blocks only, and the file is stored with transport https.
func TestIdleUploadResumes(t *testing.T) {
	r := newRig(t, Options{IdleTimeout: 100 * time.Millisecond}, nil)
	if st, s := r.post(); st != 200 || len(s.Missing) != 1 || s.Missing[0] != [2]int{0, 8} {
		t.Fatalf("plan: %d %+v", st, s)
	}
	for i := range 5 {
		if st, _ := r.put(i); st != 200 {
			t.Fatalf("block %d: %d", i, st)
		}
	}
	waitUntil(t, "the idle upload to be let go", func() bool { lets, _, _ := r.k.state(); return lets == 1 })
	if st, _ := r.do(http.MethodGet, "", nil); st != http.StatusNotFound {
		t.Fatalf("GET of a suspended upload: %d, want 404", st)
	}
	st, s := r.post()
	if st != 200 || len(s.Missing) != 1 || s.Missing[0] != [2]int{5, 8} {
		t.Fatalf("the plan again: %d %+v, want [[5 8]] missing", st, s)
	}
	for i := 5; i < 8; i++ {
		_, s = r.put(i)
	}
	_, failed, stored := r.k.state()
	if !s.Stored || stored == nil || stored.Transport != media.TransportHTTPS || failed != "" {
		t.Fatalf("after the resume: %+v, stored %+v, failed %q", s, stored, failed)
	}
	b, err := os.ReadFile(filepath.Join(r.store.Dir(), stored.File))
	if err != nil || !bytes.Equal(b, r.data) {
		t.Fatalf("the stored file: %d bytes, %v", len(b), err)
	}
}

// TestTicketEndRemovesUpload: when the ticket ends under an upload (the
// other path stored the file, an abort, the deadline), its partial is
// removed and its requests are refused.
func TestTicketEndRemovesUpload(t *testing.T) {
	r := newRig(t, Options{}, nil)
	r.post()
	r.put(0)
	r.k.cancel()
	waitUntil(t, "the partial to be removed", func() bool {
		ents, _ := os.ReadDir(filepath.Join(r.store.Dir(), ".partial"))
		return len(ents) == 0 && r.store.InFlight() == 0
	})
	if st, _ := r.put(1); st != http.StatusConflict {
		t.Fatalf("a block after the ticket ended: %d, want 409", st)
	}
	if st, _ := r.post(); st != http.StatusForbidden {
		t.Fatalf("a plan after the ticket ended: %d, want 403", st)
	}
}

// TestUploadFromAnotherAddress: a ticket bound to the node connection's
// address refuses an upload from any other.
func TestUploadFromAnotherAddress(t *testing.T) {
	r := newRig(t, Options{}, net.ParseIP("192.0.2.7"))
	if st, _ := r.post(); st != http.StatusForbidden {
		t.Fatalf("a plan from 127.0.0.1 for a ticket of 192.0.2.7: %d, want 403", st)
	}
	if lets, failed, _ := r.k.state(); lets != 1 || failed != "" {
		t.Fatalf("the ticket: let %d, failed %q (want let go, not ended)", lets, failed)
	}
}

// TestCancelLeavesNothing: DELETE ends the transfer CANCELLED and removes
// its partial, also when the upload was suspended.
func TestCancelLeavesNothing(t *testing.T) {
	r := newRig(t, Options{}, nil)
	r.post()
	r.put(0)
	if st, _ := r.do(http.MethodDelete, "", nil); st != http.StatusNoContent {
		t.Fatalf("DELETE: %d", st)
	}
	if _, failed, _ := r.k.state(); failed != CodeCancelled {
		t.Fatalf("the ticket ended %q, want CANCELLED", failed)
	}
	if ents, _ := os.ReadDir(filepath.Join(r.store.Dir(), ".partial")); len(ents) != 0 {
		t.Fatalf("%d partials left", len(ents))
	}
	if !errors.Is(r.k.ctx.Err(), context.Canceled) {
		t.Fatal("the ticket did not end")
	}
}
