package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	_ "image/png" // media.get thumb decodes PNG photos and screenshots
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/image/draw"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/media"
	"github.com/atrium-dev/atrium/backend/memory"
)

// MaxMediaGetBytes caps the file media.get sends inline, in bytes (16 MiB:
// its base64, about 21.4 MiB, fits the gateway's 32 MiB send buffer). A
// larger file is PAYLOAD_TOO_LARGE.
const MaxMediaGetBytes = 16 << 20

// Thumbnails (media.get thumb): the longer side of a thumbnail in pixels,
// its JPEG quality, and the largest picture decoded for one (width ×
// height in pixels: a bigger one, or a decompression bomb, is refused
// from its header without decoding).
const (
	ThumbSize      = 256
	thumbQuality   = 80
	MaxThumbPixels = 64 << 20
)

// MaxMediaReadBytes caps one media.read, in bytes (1 MiB: a client reads
// a file of any size in pieces of at most this, e.g. a clip over
// MaxMediaGetBytes for the gallery's player).
const MaxMediaReadBytes = 1 << 20

// Events of the media store, broadcast to the operator connections with
// the media.list rule (the device filter withholds them from a device
// scoped below admin; nodes get no broadcasts): media.added {…sidecar}
// once a node's file is stored (after its remux), media.deleted {id}.
const (
	EventMediaAdded   = "media.added"
	EventMediaDeleted = "media.deleted"
)

// media.list page sizes.
const (
	mediaListDefault = 50
	mediaListMax     = 200
)

// MediaFiles is what the media.* methods need of the media store
// (*media.Store implements it).
type MediaFiles interface {
	List() ([]media.Meta, error)
	Open(id string) (*os.File, media.Meta, error)
	Delete(id string) error
}

// Attacher stores a picture beside a memory note and links it
// (*memory.Manager implements it); nil: media.attach is not registered.
type Attacher interface {
	Attach(ctx context.Context, r memory.AttachRequest) (memory.AttachResult, error)
}

// registerMedia adds media.list, media.get, media.read, media.delete
// (broadcasting media.deleted) and (with mem) media.attach: the stored photos, clips and recordings of the nodes
// (SPEC §7). Who: the person — the local operator, or a paired operator
// device scoped admin ("everything, like this computer": such a device
// may already have a node take the photo through node.invoke, so seeing
// it is no wider). Nodes and unpaired devices are refused by the gateway,
// an operator device scoped below admin by mediaScope; both FORBIDDEN and
// audited.
func registerMedia(g *gateway.Server, files MediaFiles, mem Attacher, ac *access) {
	g.Handle("media.list", gateway.Read(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			DeviceID string `json:"deviceId"`
			Command  string `json:"command"`
			Limit    int    `json:"limit"`
			Cursor   string `json:"cursor"`
		}
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		if _, err := ac.mediaScope(ctx, c, "media"); err != nil {
			return nil, err
		}
		switch {
		case p.Limit < 0 || p.Limit > mediaListMax:
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "media.list: limit %d (want 1…%d)", p.Limit, mediaListMax)
		case p.Limit == 0:
			p.Limit = mediaListDefault
		}
		after, afterID, err := parseMediaCursor(p.Cursor)
		if err != nil {
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "media.list: cursor: %v", err)
		}
		all, err := files.List()
		if err != nil {
			return nil, fmt.Errorf("media.list: %w", err)
		}
		items := []media.Meta{}
		next := ""
		for _, m := range all {
			if (p.DeviceID != "" && m.Device != p.DeviceID) || (p.Command != "" && m.Command != p.Command) {
				continue
			}
			// The store lists newest first, ties by id: skip up to the cursor.
			if p.Cursor != "" && (m.Time.After(after) || (m.Time.Equal(after) && m.ID <= afterID)) {
				continue
			}
			if len(items) == p.Limit {
				last := items[len(items)-1]
				next = strconv.FormatInt(last.Time.UnixNano(), 10) + "-" + last.ID
				break
			}
			items = append(items, m)
		}
		out := map[string]any{"items": items}
		if next != "" {
			out["nextCursor"] = next
		}
		return out, nil
	})

	g.Handle("media.get", gateway.Read(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			ID    string `json:"id"`
			Thumb bool   `json:"thumb"`
		}
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		if _, err := ac.mediaScope(ctx, c, p.ID); err != nil {
			return nil, err
		}
		f, meta, err := openMedia(files, "media.get", p.ID)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if p.Thumb {
			data, err := thumbnail(f, meta)
			if err != nil {
				return nil, err
			}
			return map[string]any{"id": meta.ID, "mime": "image/jpeg", "size": len(data), "thumb": true,
				"dataBase64": base64.StdEncoding.EncodeToString(data), "meta": meta}, nil
		}
		data, err := readInline(f, meta)
		if err != nil {
			return nil, err
		}
		return map[string]any{"id": meta.ID, "mime": meta.MIME, "size": len(data),
			"dataBase64": base64.StdEncoding.EncodeToString(data), "meta": meta}, nil
	})

	g.Handle("media.read", gateway.Read(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			ID     string `json:"id"`
			Offset int64  `json:"offset"`
			Length int64  `json:"length"`
		}
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		if _, err := ac.mediaScope(ctx, c, p.ID); err != nil {
			return nil, err
		}
		switch {
		case p.Offset < 0:
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "media.read: offset %d (want ≥ 0)", p.Offset)
		case p.Length < 0 || p.Length > MaxMediaReadBytes:
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "media.read: length %d (want 1…%d bytes; 0: %d)", p.Length, MaxMediaReadBytes, MaxMediaReadBytes)
		case p.Length == 0:
			p.Length = MaxMediaReadBytes
		}
		f, meta, err := openMedia(files, "media.read", p.ID)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if p.Offset > meta.Size {
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "media.read: offset %d is past the end of %s (%d bytes)", p.Offset, meta.ID, meta.Size)
		}
		buf := make([]byte, min(p.Length, meta.Size-p.Offset))
		n, err := f.ReadAt(buf, p.Offset)
		if err != nil && !(errors.Is(err, io.EOF) && n == len(buf)) {
			return nil, fmt.Errorf("media.read %s at %d: %w", meta.ID, p.Offset, err)
		}
		return map[string]any{"id": meta.ID, "offset": p.Offset, "length": n, "size": meta.Size, "sha256": meta.SHA256,
			"mime": meta.MIME, "eof": p.Offset+int64(n) >= meta.Size, "dataBase64": base64.StdEncoding.EncodeToString(buf[:n])}, nil
	})

	g.Handle("media.delete", gateway.Write(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			ID string `json:"id"`
		}
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		who, err := ac.mediaScope(ctx, c, p.ID)
		if err != nil {
			return nil, err
		}
		if !media.ValidID(p.ID) {
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "media.delete: id must be a media id (32 hex characters)")
		}
		// Audited before it is done: a delete is never unaudited.
		if ac.g != nil {
			if err := ac.g.Record(who, "media.delete", p.ID, true, ""); err != nil {
				return nil, mapErr(err)
			}
		}
		err = files.Delete(p.ID)
		if errors.Is(err, media.ErrNotFound) {
			return map[string]any{"deleted": false}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("media.delete: %w", err)
		}
		g.Broadcast(EventMediaDeleted, map[string]string{"id": p.ID})
		return map[string]any{"deleted": true}, nil
	})

	if mem == nil {
		return
	}
	g.Handle("media.attach", gateway.Write(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			ID      string `json:"id"`
			Path    string `json:"path"`
			Caption string `json:"caption"`
		}
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		if _, err := ac.mediaScope(ctx, c, p.ID); err != nil {
			return nil, err
		}
		ctx, w, err := writer(ctx, ac, c, p.Path)
		if err != nil {
			return nil, err
		}
		f, meta, err := openMedia(files, "media.attach", p.ID)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		ext := attachExt(meta.MIME)
		if ext == "" {
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "media.attach: %s is %q; only a photo (JPEG, PNG, GIF, WebP) can be attached to a note", p.ID, meta.MIME)
		}
		if meta.Size > memory.MaxAttachmentBytes {
			return nil, gateway.Errorf(gateway.CodePayloadTooLarge, "media.attach: %s is %d bytes, over the %d bytes a note's picture may be", p.ID, meta.Size, memory.MaxAttachmentBytes)
		}
		data, err := readInline(f, meta)
		if err != nil {
			return nil, err
		}
		if ctx, p.Path, err = writePath(ctx, ac.g, p.Path); err != nil {
			return nil, err
		}
		caption := p.Caption
		if strings.TrimSpace(caption) == "" {
			caption = meta.Command + " " + meta.Time.UTC().Format("2006-01-02 15:04")
		}
		name := meta.Time.UTC().Format("2006-01-02") + "-" + meta.ID[:12] + ext
		res, err := mem.Attach(ctx, memory.AttachRequest{Note: p.Path, Name: name, Data: data, Alt: caption, Writer: w})
		if errors.Is(err, memory.ErrDiskFull) {
			return nil, &gateway.Error{Code: gateway.CodeUnavailable, Message: "media.attach: " + err.Error()}
		}
		if err != nil {
			return nil, mapErr(err)
		}
		return res, nil
	})
}

// mediaScope returns who c acts as for the media methods (the person:
// admin) and refuses (FORBIDDEN, audited) a paired operator device scoped
// below admin: what a node's camera or screen saw is the person's, like
// node.invoke (docs/PROTOCOL.md Device scope).
func (ac *access) mediaScope(ctx context.Context, c *gateway.Call, target string) (acl.Principal, error) {
	if c.Principal.Class() != gateway.OperatorDevice {
		return acl.Principal{Admin: true, IP: c.RemoteIP}, nil
	}
	who, err := ac.device(ctx, c)
	if err != nil || who.Admin {
		return who, err
	}
	reason := fmt.Sprintf("this device's memory scope is %s: the nodes' photos, clips and recordings are the person's "+
		"(at the desktop, or on a device scoped admin)", scopeName(who))
	if ac.g == nil {
		return who, gateway.Errorf(gateway.CodeForbidden, "%s: %s", c.Method, reason)
	}
	return who, mapErr(ac.g.Deny(who, c.Method, target, reason))
}

// openMedia opens media id for method, mapping the store's errors.
func openMedia(files MediaFiles, method, id string) (*os.File, media.Meta, error) {
	if !media.ValidID(id) {
		return nil, media.Meta{}, gateway.Errorf(gateway.CodeInvalidRequest, "%s: id must be a media id (32 hex characters)", method)
	}
	f, meta, err := files.Open(id)
	switch {
	case errors.Is(err, media.ErrNotFound):
		return nil, media.Meta{}, gateway.Errorf(gateway.CodeNotFound, "%s: no media %s", method, id)
	case errors.Is(err, media.ErrInvalid):
		return nil, media.Meta{}, gateway.Errorf(gateway.CodeInvalidRequest, "%s: %v", method, err)
	case err != nil:
		return nil, media.Meta{}, fmt.Errorf("%s: %w", method, err)
	}
	return f, meta, nil
}

// readInline reads f whole, refusing one over MaxMediaGetBytes.
func readInline(f io.Reader, meta media.Meta) ([]byte, error) {
	if meta.Size > MaxMediaGetBytes {
		return nil, gateway.Errorf(gateway.CodePayloadTooLarge, "media: %s is %d bytes, over the %d bytes sent inline", meta.ID, meta.Size, MaxMediaGetBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxMediaGetBytes+1))
	if err != nil {
		return nil, fmt.Errorf("media: read %s: %w", meta.ID, err)
	}
	if len(data) > MaxMediaGetBytes {
		return nil, gateway.Errorf(gateway.CodePayloadTooLarge, "media: %s is over the %d bytes sent inline", meta.ID, MaxMediaGetBytes)
	}
	return data, nil
}

// thumbnail decodes a JPEG or PNG and returns it scaled to fit ThumbSize
// (never enlarged) as a JPEG. Other types (clips, GIF, WebP) are
// INVALID_REQUEST; a picture over MaxThumbPixels or one that does not
// decode is INVALID_REQUEST too.
func thumbnail(f io.ReadSeeker, meta media.Meta) ([]byte, error) {
	if meta.MIME != "image/jpeg" && meta.MIME != "image/png" {
		return nil, gateway.Errorf(gateway.CodeInvalidRequest, "media.get: no thumbnail for %s (%q): only JPEG and PNG pictures have one", meta.ID, meta.MIME)
	}
	cfg, _, err := image.DecodeConfig(f)
	if err != nil {
		return nil, gateway.Errorf(gateway.CodeInvalidRequest, "media.get: %s does not decode: %v", meta.ID, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > MaxThumbPixels {
		return nil, gateway.Errorf(gateway.CodeInvalidRequest, "media.get: %s is %d×%d pixels; thumbnails are made of pictures up to %d pixels", meta.ID, cfg.Width, cfg.Height, MaxThumbPixels)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("media.get: %s: %w", meta.ID, err)
	}
	src, _, err := image.Decode(f)
	if err != nil {
		return nil, gateway.Errorf(gateway.CodeInvalidRequest, "media.get: %s does not decode: %v", meta.ID, err)
	}
	w, h := thumbDims(cfg.Width, cfg.Height, ThumbSize)
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.ApproxBiLinear.Scale(dst, dst.Bounds(), src, src.Bounds(), draw.Src, nil)
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, dst, &jpeg.Options{Quality: thumbQuality}); err != nil {
		return nil, fmt.Errorf("media.get: encode thumbnail of %s: %w", meta.ID, err)
	}
	return buf.Bytes(), nil
}

// thumbDims fits w×h into max×max keeping the aspect ratio (each side ≥ 1,
// never larger than the original).
func thumbDims(w, h, max int) (int, int) {
	if w <= max && h <= max {
		return w, h
	}
	if w >= h {
		return max, maxInt(1, h*max/w)
	}
	return maxInt(1, w*max/h), max
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// attachExt is the file extension of a picture a note may link, by MIME
// type; "" for anything else.
func attachExt(mime string) string {
	switch mime {
	case "image/jpeg":
		return ".jpg"
	case "image/png":
		return ".png"
	case "image/gif":
		return ".gif"
	case "image/webp":
		return ".webp"
	}
	return ""
}

// parseMediaCursor reads media.list's cursor, "<unix ns>-<id>" of the last
// item of the previous page ("" = from the newest).
func parseMediaCursor(s string) (time.Time, string, error) {
	if s == "" {
		return time.Time{}, "", nil
	}
	ns, id, ok := strings.Cut(s, "-")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || !media.ValidID(id) {
		return time.Time{}, "", fmt.Errorf("%q is not a cursor media.list returned", s)
	}
	return time.Unix(0, n), id, nil
}
