package embed

import (
	"encoding/json"
	"fmt"
)

// OpenAIProvider is OpenAI.Provider().
const OpenAIProvider = "openai"

// OpenAI embeds with any OpenAI-compatible /v1/embeddings endpoint (SPEC
// §4.2: OpenAI, llama.cpp server, LM Studio, vLLM): POST {BaseURL}/embeddings
// with {"model", "input": [...], "encoding_format": "float"} (plus
// "dimensions" when HTTPOptions.SendDimensions) and "Authorization: Bearer
// <APIKey>" when a key is set → {"data": [{"index", "embedding"}, ...]},
// put in input order by "index". Create it with NewOpenAI; it is safe for
// concurrent use.
type OpenAI struct{ *client }

var (
	_ Embedder = (*OpenAI)(nil)
	_ Prober   = (*OpenAI)(nil)
)

// NewOpenAI returns an OpenAI-compatible embedder. BaseURL defaults to
// DefaultOpenAIBaseURL (https://api.openai.com/v1), Model to
// DefaultOpenAIModel (text-embedding-3-small); see HTTPOptions for the rest.
// It sends nothing; the error is about the options only.
func NewOpenAI(o HTTPOptions) (*OpenAI, error) {
	c, err := newClient(OpenAIProvider, DefaultOpenAIBaseURL, DefaultOpenAIModel, openaiAPI{}, o)
	if err != nil {
		return nil, err
	}
	return &OpenAI{c}, nil
}

type openaiAPI struct{}

func (openaiAPI) path() string { return "/embeddings" }

type openaiRequest struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	EncodingFormat string   `json:"encoding_format"`
	Dimensions     int      `json:"dimensions,omitempty"`
}

func (openaiAPI) body(model string, inputs []string, o *HTTPOptions) any {
	r := openaiRequest{Model: model, Input: inputs, EncodingFormat: "float"}
	if o.SendDimensions {
		r.Dimensions = o.Dims
	}
	return r
}

func (openaiAPI) decode(data []byte, n int) ([][]float64, error) {
	var r struct {
		Data *[]struct {
			Index     *int      `json:"index"`
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decode answer: %v: %w", err, ErrBadResponse)
	}
	if r.Data == nil {
		return nil, fmt.Errorf("answer has no \"data\": %w", ErrBadResponse)
	}
	if len(*r.Data) != n {
		return nil, fmt.Errorf("%d vectors for %d inputs: %w", len(*r.Data), n, ErrBadResponse)
	}
	out := make([][]float64, n)
	for i, d := range *r.Data {
		at := i // servers that omit "index" answer in input order
		if d.Index != nil {
			at = *d.Index
		}
		if at < 0 || at >= n || out[at] != nil {
			return nil, fmt.Errorf("data[%d] has index %d (missing, repeated or out of range for %d inputs): %w", i, at, n, ErrBadResponse)
		}
		if d.Embedding == nil {
			return nil, fmt.Errorf("data[%d] has no embedding: %w", i, ErrBadResponse)
		}
		out[at] = d.Embedding
	}
	return out, nil
}
