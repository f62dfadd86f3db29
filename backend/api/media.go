package api

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/media"
)

// MaxMediaGetBytes caps the file media.get sends inline, in bytes (16 MiB:
// its base64, about 21.4 MiB, fits the gateway's 32 MiB send buffer). A
// larger file is PAYLOAD_TOO_LARGE.
const MaxMediaGetBytes = 16 << 20

// MediaFiles is what media.get needs of the media store (*media.Store
// implements it).
type MediaFiles interface {
	Open(id string) (*os.File, media.Meta, error)
}

// registerMedia adds media.get {id} → {id, mime, size, dataBase64, meta}:
// one stored file (a node's photo, clip or recording, SPEC §7) inline as
// base64, for the chat's pictures. The local operator only (Admin: the
// person at this machine): what a camera saw is not for nodes, unpaired
// devices or operator devices; every other principal is refused by the
// gateway (FORBIDDEN, audited). Errors: INVALID_REQUEST (no or a
// malformed id), NOT_FOUND, PAYLOAD_TOO_LARGE (over MaxMediaGetBytes).
func registerMedia(g *gateway.Server, files MediaFiles) {
	g.Handle("media.get", gateway.Read(gateway.Admin), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			ID string `json:"id"`
		}
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		if !media.ValidID(p.ID) {
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "media.get: id must be a media id (32 hex characters)")
		}
		f, meta, err := files.Open(p.ID)
		switch {
		case errors.Is(err, media.ErrNotFound):
			return nil, gateway.Errorf(gateway.CodeNotFound, "media.get: no media %s", p.ID)
		case errors.Is(err, media.ErrInvalid):
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "media.get: %v", err)
		case err != nil:
			return nil, fmt.Errorf("media.get: %w", err)
		}
		defer f.Close()
		if meta.Size > MaxMediaGetBytes {
			return nil, gateway.Errorf(gateway.CodePayloadTooLarge, "media.get: %s is %d bytes, over the %d bytes sent inline", p.ID, meta.Size, MaxMediaGetBytes)
		}
		data, err := io.ReadAll(io.LimitReader(f, MaxMediaGetBytes+1))
		if err != nil {
			return nil, fmt.Errorf("media.get: read %s: %w", p.ID, err)
		}
		if len(data) > MaxMediaGetBytes {
			return nil, gateway.Errorf(gateway.CodePayloadTooLarge, "media.get: %s is over the %d bytes sent inline", p.ID, MaxMediaGetBytes)
		}
		return map[string]any{"id": meta.ID, "mime": meta.MIME, "size": len(data),
			"dataBase64": base64.StdEncoding.EncodeToString(data), "meta": meta}, nil
	})
}
