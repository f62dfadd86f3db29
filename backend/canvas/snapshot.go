package canvas

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/atrium-dev/atrium/backend/media"
)

// MaxSnapshotBytes caps a Canvas snapshot's PNG.
const MaxSnapshotBytes = 16 << 20

// storePNG stores a snapshot (base64 PNG) of target's Canvas in the media
// store: device = the target ("desktop" or the node's id), command
// canvas.snapshot, transport gateway.
func storePNG(st *media.Store, target, b64 string) (media.Meta, error) {
	if b64 == "" {
		return media.Meta{}, errors.New("the target sent no picture")
	}
	if base64.StdEncoding.DecodedLen(len(b64)) > MaxSnapshotBytes {
		return media.Meta{}, fmt.Errorf("the picture is over %d bytes", MaxSnapshotBytes)
	}
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return media.Meta{}, fmt.Errorf("the picture is not base64: %w", err)
	}
	if !isPNG(data) {
		return media.Meta{}, errors.New("the picture is not a PNG")
	}
	const block = media.MaxBlockSize
	p := media.Plan{ID: media.NewID(), Device: target, Command: "canvas.snapshot", Name: "canvas.png", Size: int64(len(data)),
		SHA256: sha256.Sum256(data), BlockSize: block, MIME: "image/png", Transport: media.TransportGateway}
	for off := 0; off < len(data); off += block {
		p.Blocks = append(p.Blocks, sha256.Sum256(data[off:min(off+block, len(data))]))
	}
	part, err := st.Begin(p)
	if err != nil {
		return media.Meta{}, fmt.Errorf("store the picture: %w", err)
	}
	for i, off := 0, 0; off < len(data); i, off = i+1, off+block {
		if err := part.WriteBlock(i, data[off:min(off+block, len(data))]); err != nil {
			part.Cancel()
			return media.Meta{}, fmt.Errorf("store the picture: %w", err)
		}
	}
	m, err := part.Commit()
	if err != nil {
		part.Cancel()
		return media.Meta{}, fmt.Errorf("store the picture: %w", err)
	}
	return m, nil
}
