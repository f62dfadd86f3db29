package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/atrium-dev/atrium/backend/agent"
	"github.com/atrium-dev/atrium/backend/media"
)

// ErrImagePath: a tool named a picture outside the folders tools may show
// the model (the media folder, the workspace), or something that is not a
// regular file.
var ErrImagePath = errors.New("image path refused")

// Media is what the nodes tool needs of the media store (*media.Store
// implements it): a stored file's sidecar and its path.
type Media interface {
	Get(id string) (media.Meta, error)
	Path(id string) (string, error)
}

// imageResult is the agent.Image for the file at path with what is known
// of it (mime, size in pixels, media id). The file must be a regular file
// inside Options.MediaDir or the workspace once every symlink is resolved;
// anything else is ErrImagePath. Its size is read from the file.
func (e *env) imageResult(path string, img agent.Image) (agent.Image, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return agent.Image{}, fmt.Errorf("%w: %s: %w", ErrImagePath, path, err)
	}
	inside := false
	for _, dir := range []string{e.o.MediaDir, e.o.Guard.Workspace()} {
		if dir == "" {
			continue
		}
		root, err := filepath.EvalSymlinks(dir)
		if err != nil {
			continue
		}
		if rel, err := filepath.Rel(root, real); err == nil && filepath.IsLocal(rel) {
			inside = true
			break
		}
	}
	if !inside {
		return agent.Image{}, fmt.Errorf("%w: %s is neither in the media folder nor in the workspace", ErrImagePath, path)
	}
	st, err := os.Stat(real)
	if err != nil {
		return agent.Image{}, fmt.Errorf("%w: %s: %w", ErrImagePath, path, err)
	}
	if !st.Mode().IsRegular() {
		return agent.Image{}, fmt.Errorf("%w: %s is not a regular file", ErrImagePath, path)
	}
	img.Path, img.Bytes = real, st.Size()
	return img, nil
}

// mediaImage is the picture a node's result names in its media field (the
// stored file's sidecar, docs/PROTOCOL.md "Media transfers"), when it is
// an image of the media store; ok is false for no media, or media that is
// not a picture (a clip, a recording).
func (e *env) mediaImage(store Media, raw []byte) (agent.Image, bool, error) {
	if store == nil || len(raw) == 0 {
		return agent.Image{}, false, nil
	}
	var ref struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil || ref.ID == "" {
		return agent.Image{}, false, nil
	}
	meta, err := store.Get(ref.ID)
	if err != nil {
		return agent.Image{}, false, fmt.Errorf("media %s: %w", ref.ID, err)
	}
	if !strings.HasPrefix(meta.MIME, "image/") {
		return agent.Image{}, false, nil
	}
	path, err := store.Path(ref.ID)
	if err != nil {
		return agent.Image{}, false, fmt.Errorf("media %s: %w", ref.ID, err)
	}
	img, err := e.imageResult(path, agent.Image{MIME: meta.MIME, MediaID: meta.ID, Width: meta.Width, Height: meta.Height})
	if err != nil {
		return agent.Image{}, false, err
	}
	return img, true, nil
}
