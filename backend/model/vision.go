package model

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Support is whether a model takes images: VisionYes, VisionNo or
// VisionUnknown.
type Support string

// Vision support values.
const (
	VisionYes     Support = "yes"
	VisionNo      Support = "no"
	VisionUnknown Support = "unknown"
)

// Where a VisionInfo comes from.
const (
	// VisionFromConfig: the model settings' "vision" (config.json).
	VisionFromConfig = "config"
	// VisionFromServer: the server's model list (or Ollama's /api/show).
	VisionFromServer = "server"
	// VisionFromProvider: the offline provider, which reads no images.
	VisionFromProvider = "provider"
)

// VisionInfo is whether a model takes images and where that was learnt
// ("" when nobody said: Vision is then VisionUnknown).
type VisionInfo struct {
	Vision Support `json:"vision"`
	From   string  `json:"visionFrom,omitempty"`
}

// DetectVision finds out whether the model cfg names takes images:
//
//  1. cfg.Vision set (config.json "vision": true|false) wins;
//  2. the offline provider and an empty one: no;
//  3. Ollama: POST <root>/api/show {"model"} and its "capabilities"
//     (Ollama lists "vision" there for models that take images; an answer
//     with capabilities but without "vision" is no);
//  4. OpenAI-compatible and Anthropic servers: the entry of cfg.Model in
//     the model list (GET <base>/models, <root>/v1/models), where servers
//     that say so say it: "capabilities" (a list holding "vision" or
//     "image_input", or an object whose "vision"/"image_input" is true or
//     {"supported": true}), "architecture.input_modalities",
//     "input_modalities" or "modalities" (a list holding "image");
//  5. otherwise unknown (OpenAI's and Anthropic's own lists say nothing).
//
// Each probe is bounded by opts.ProbeTimeout; a failed probe is unknown,
// never an error. Only opts.HTTPClient and opts.ProbeTimeout are used.
func DetectVision(ctx context.Context, cfg Config, opts DetectOptions) VisionInfo {
	if cfg.Vision != nil {
		if *cfg.Vision {
			return VisionInfo{Vision: VisionYes, From: VisionFromConfig}
		}
		return VisionInfo{Vision: VisionNo, From: VisionFromConfig}
	}
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = DefaultProbeTimeout
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = http.DefaultClient
	}
	unknown := VisionInfo{Vision: VisionUnknown}
	p := strings.ToLower(strings.TrimSpace(cfg.Provider))
	switch p {
	case ProviderOffline, "":
		return VisionInfo{Vision: VisionNo, From: VisionFromProvider}
	case ProviderOllama:
		root := strings.TrimSuffix(strings.TrimRight(orDefault(cfg.BaseURL, DefaultOllamaURL), "/"), "/v1")
		var show struct {
			Capabilities []string `json:"capabilities"`
		}
		if cfg.Model == "" || postJSON(ctx, opts, root+"/api/show", map[string]string{"model": cfg.Model}, &show) != nil || show.Capabilities == nil {
			return unknown
		}
		return fromBool(listHas(show.Capabilities, "vision"))
	case ProviderOpenAI, ProviderAnthropic:
		api := remoteAPIFor(p)
		var list struct {
			Data []map[string]json.RawMessage `json:"data"`
		}
		if cfg.Model == "" || getJSON(ctx, opts, api.modelsURL(api.root(cfg.BaseURL)), api.header(cfg.APIKey), &list) != nil {
			return unknown
		}
		for _, m := range list.Data {
			var id string
			if json.Unmarshal(m["id"], &id) != nil || id != cfg.Model {
				continue
			}
			if s := entryVision(m); s != VisionUnknown {
				return VisionInfo{Vision: s, From: VisionFromServer}
			}
			return unknown
		}
	}
	return unknown
}

func fromBool(yes bool) VisionInfo {
	if yes {
		return VisionInfo{Vision: VisionYes, From: VisionFromServer}
	}
	return VisionInfo{Vision: VisionNo, From: VisionFromServer}
}

// entryVision reads one model-list entry's image support, where it says.
func entryVision(m map[string]json.RawMessage) Support {
	if raw, ok := m["capabilities"]; ok {
		var list []string
		if json.Unmarshal(raw, &list) == nil {
			return yesNo(listHas(list, "vision") || listHas(list, "image_input"))
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) == nil {
			for _, k := range []string{"vision", "image_input"} {
				v, ok := obj[k]
				if !ok {
					continue
				}
				var b bool
				if json.Unmarshal(v, &b) == nil {
					return yesNo(b)
				}
				var sup struct {
					Supported *bool `json:"supported"`
				}
				if json.Unmarshal(v, &sup) == nil && sup.Supported != nil {
					return yesNo(*sup.Supported)
				}
			}
		}
	}
	var arch struct {
		InputModalities []string `json:"input_modalities"`
	}
	if raw, ok := m["architecture"]; ok && json.Unmarshal(raw, &arch) == nil && arch.InputModalities != nil {
		return yesNo(listHas(arch.InputModalities, "image"))
	}
	for _, k := range []string{"input_modalities", "modalities"} {
		var list []string
		if raw, ok := m[k]; ok && json.Unmarshal(raw, &list) == nil {
			return yesNo(listHas(list, "image"))
		}
	}
	return VisionUnknown
}

func yesNo(b bool) Support {
	if b {
		return VisionYes
	}
	return VisionNo
}

func listHas(list []string, want string) bool {
	for _, s := range list {
		if strings.EqualFold(strings.TrimSpace(s), want) {
			return true
		}
	}
	return false
}

// postJSON POSTs body as JSON to url within the probe timeout and decodes
// a 200 answer into v.
func postJSON(ctx context.Context, o DetectOptions, url string, body, v any) error {
	ctx, cancel := context.WithTimeout(ctx, o.ProbeTimeout)
	defer cancel()
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode %s request: %w", url, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("post %s: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := o.HTTPClient.Do(req)
	if err != nil {
		return netCause(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: HTTP %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(v); err != nil {
		return fmt.Errorf("POST %s: invalid JSON: %w", url, err)
	}
	return nil
}

// WithVision returns cfg with Vision set from info when cfg does not say
// and info knows (so that FromConfig's client takes images when the server
// says the model does).
func WithVision(cfg Config, info VisionInfo) Config {
	if cfg.Vision != nil || info.Vision == VisionUnknown {
		return cfg
	}
	v := info.Vision == VisionYes
	cfg.Vision = &v
	return cfg
}
