package atrium

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/atrium-dev/atrium/backend/config"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/model"
)

// ProfileModel resolves the model of role (SPEC §6 "configured per
// profile") with model.ForProfile: base is the detected model; on top of it
// the "model" front matter of the role's persona
// (<workspace>/memory/roles/<role>/config.md) and config.json's
// profiles.<role>.model. It returns the model to build and a reason. A
// persona that cannot be read or parsed, or settings ForProfile refuses,
// are logged (warning "profile model settings ignored") and base is used:
// a bad persona never stops the app.
func ProfileModel(workspace string, cfg config.Config, base model.Config, role string, getenv func(string) string, log *slog.Logger) (model.Config, string) {
	rel := "memory/roles/" + role + "/config.md"
	s := model.ProfileSettings{Role: role, MarkdownPath: rel, Config: cfg.ProfileModel(role)}
	ignore := func(err error) (model.Config, string) {
		log.Warn("profile model settings ignored", "role", role, "err", err)
		return base, "the app's model (the profile's own settings are unusable: " + err.Error() + ")"
	}
	data, err := os.ReadFile(filepath.Join(workspace, filepath.FromSlash(rel)))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return ignore(err)
	default:
		fm, _, _, _, ferr := memory.ParseFrontMatter(string(data))
		if ferr != nil {
			return ignore(ferr)
		}
		if s.Markdown, err = model.ParseOverride(fm.Raw["model"]); err != nil {
			return ignore(errors.Join(errors.New(rel), err))
		}
	}
	out, why, err := model.ForProfile(base, s, getenv)
	if err != nil {
		return ignore(err)
	}
	return out, why
}
