package embed

import (
	"encoding/json"
	"fmt"
)

// OllamaProvider is Ollama.Provider().
const OllamaProvider = "ollama"

// Ollama embeds with a local Ollama server's /api/embed endpoint (SPEC
// §4.2), e.g. nomic-embed-text or bge-m3: POST {BaseURL}/api/embed with
// {"model", "input": [...], "truncate": false} → {"embeddings": [[...], ...]}
// in input order. "truncate": false makes Ollama refuse an input longer than
// the model's context instead of cutting it silently. Create it with
// NewOllama; it is safe for concurrent use.
type Ollama struct{ *client }

var (
	_ Embedder = (*Ollama)(nil)
	_ Prober   = (*Ollama)(nil)
)

// NewOllama returns an Ollama embedder. BaseURL defaults to
// DefaultOllamaBaseURL (http://127.0.0.1:11434), Model to DefaultOllamaModel
// (nomic-embed-text); see HTTPOptions for the rest. It sends nothing: Dims
// stays 0 until the first answer when o.Dims is 0 (see Probe). The error is
// about the options only.
func NewOllama(o HTTPOptions) (*Ollama, error) {
	c, err := newClient(OllamaProvider, DefaultOllamaBaseURL, DefaultOllamaModel, ollamaAPI{}, o)
	if err != nil {
		return nil, err
	}
	return &Ollama{c}, nil
}

type ollamaAPI struct{}

func (ollamaAPI) path() string { return "/api/embed" }

type ollamaRequest struct {
	Model    string   `json:"model"`
	Input    []string `json:"input"`
	Truncate bool     `json:"truncate"`
}

func (ollamaAPI) body(model string, inputs []string, _ *HTTPOptions) any {
	return ollamaRequest{Model: model, Input: inputs, Truncate: false}
}

func (ollamaAPI) decode(data []byte, n int) ([][]float64, error) {
	var r struct {
		Embeddings *[][]float64 `json:"embeddings"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decode answer: %v: %w", err, ErrBadResponse)
	}
	if r.Embeddings == nil {
		return nil, fmt.Errorf("answer has no \"embeddings\": %w", ErrBadResponse)
	}
	if len(*r.Embeddings) != n {
		return nil, fmt.Errorf("%d vectors for %d inputs: %w", len(*r.Embeddings), n, ErrBadResponse)
	}
	return *r.Embeddings, nil
}
