// Package config reads $ATRIUM_HOME/config.json, the person's settings
// (SPEC §1). A missing file means the embedded defaults; a malformed file is
// an error naming the file, line and column, never a silent fallback.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/atrium-dev/atrium/backend/model"
)

// DefaultPort is the gateway's default TCP port (SPEC §3).
const DefaultPort = 18789

// Config is the whole config.json. Zero values mean "use the default".
type Config struct {
	// Model selects the chat model (SPEC §6). Empty Provider = auto-detect:
	// env OPENAI_API_KEY/OPENAI_BASE_URL, then a local Ollama, then offline.
	Model model.Config `json:"model"`
	// Gateway settings.
	Gateway Gateway `json:"gateway"`
}

// Gateway holds the listener settings.
type Gateway struct {
	// Port on 127.0.0.1; default DefaultPort.
	Port int `json:"port,omitempty"`
}

// Load reads path. A missing file returns the zero Config and no error.
func Load(path string) (Config, error) {
	var c Config
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("read config: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			line, col := position(data, se.Offset)
			return c, fmt.Errorf("config %s:%d:%d: %w", path, line, col, err)
		case errors.As(err, &te):
			line, col := position(data, te.Offset)
			return c, fmt.Errorf("config %s:%d:%d: %w", path, line, col, err)
		default:
			return c, fmt.Errorf("config %s: %w", path, err)
		}
	}
	if c.Gateway.Port < 0 || c.Gateway.Port > 65535 {
		return c, fmt.Errorf("config %s: gateway.port %d out of range 0..65535", path, c.Gateway.Port)
	}
	return c, nil
}

// position turns a byte offset into a 1-based line and column.
func position(data []byte, off int64) (line, col int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(off) - bytes.LastIndexByte(before, '\n')
	return line, col
}
