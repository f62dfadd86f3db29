package api

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/atrium-dev/atrium/backend/config"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/model"
)

// EventSettingsChanged is broadcast after config.patch changed the model
// in use: {model: {provider, model}}.
const EventSettingsChanged = "settings.changed"

// Settings is what the config.* methods need (SPEC §9; implemented by the
// wiring package over config.Store). Every method is the person's: only
// operator connections reach it.
type Settings interface {
	// Get returns config.json as it is on disk, keys redacted.
	Get(ctx context.Context) (SettingsView, error)
	// Patch applies a JSON merge patch to config.json (config.Store.Patch)
	// and what it can to the running app; errors wrapping
	// config.ErrInvalid are the patch's fault.
	Patch(ctx context.Context, patch json.RawMessage) (SettingsView, error)
	// Models lists the models of the server a request names.
	Models(ctx context.Context, r ModelRequest) ([]string, error)
	// Test makes one real call to the model a request names.
	Test(ctx context.Context, r ModelRequest) (model.TestResult, error)
	// Local lists the model servers found on this machine.
	Local(ctx context.Context) []model.LocalServer
}

// SettingsView is the payload of config.get and config.patch.
type SettingsView struct {
	// Path is config.json's path (it stays editable by hand).
	Path string `json:"path"`
	// Config is config.json with every apiKey replaced by apiKeySet.
	Config map[string]any `json:"config"`
	// Model is the main profile's model in force now.
	Model ModelInUse `json:"model"`
	// Gateway is the address the gateway listens on now.
	Gateway GatewayInUse `json:"gateway"`
	// Embedding is the index's embedder now and what a change of it
	// costs: the files and chunks that the next start re-indexes.
	Embedding EmbeddingInUse `json:"embedding"`
	// Heartbeat is main's heartbeat schedule in force.
	Heartbeat HeartbeatInUse `json:"heartbeat"`
	// Rewrite is the rewrite of weak questions by the chat model in force
	// (memory.search.rewrite, read at start) and its measured latency
	// (memory.RewriteStats).
	Rewrite memory.RewriteStats `json:"rewrite"`
	// Restart lists changed settings that take effect at the next start
	// ("gateway", "memory.embedding", "memory.search").
	Restart []string `json:"restartRequired"`
}

// HeartbeatInUse is main's heartbeat schedule in force (issue 24 item 7;
// config.json agents.heartbeat): On whether turns run, Auto whether that
// follows FileUsed (agents.heartbeat.enabled unset; FileUsed: the
// workspace's HEARTBEAT.md has something to do), EveryMinutes the
// interval, Start and End the active hours "HH:MM" (equal: all day),
// LastRun and Next in Unix ms (0: none), LastOutcome "silent"
// (HEARTBEAT_OK), "shown" or "failed".
type HeartbeatInUse struct {
	On           bool   `json:"on"`
	Auto         bool   `json:"auto"`
	FileUsed     bool   `json:"fileUsed"`
	EveryMinutes int    `json:"everyMinutes"`
	Start        string `json:"start"`
	End          string `json:"end"`
	LastRun      int64  `json:"lastRun,omitempty"`
	LastOutcome  string `json:"lastOutcome,omitempty"`
	Next         int64  `json:"next,omitempty"`
}

// ModelInUse is the model the app answers with now. Vision says whether
// it takes images ("yes", "no", "unknown") and where that was learnt
// ("config": config.json's "vision"; "server": the server's model list;
// "provider": the offline provider; none when unknown).
type ModelInUse struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	BaseURL  string `json:"baseUrl"`
	Reason   string `json:"reason"`
	// ReasonCode is Reason as a code the UI translates (model.ReasonCode).
	ReasonCode string `json:"reasonCode"`
	model.VisionInfo
}

// GatewayInUse is where the gateway listens now and how clients
// recognise it (issue 16): the plain 127.0.0.1 listener (Addr), the bind in
// force, the HTTPS/WSS listeners with their URLs, the TLS certificate's
// fingerprint (hex SHA-256 of its DER, and as words) and its public key's
// SPKI hash (base64 SHA-256 of the SubjectPublicKeyInfo: what a browser's
// --ignore-certificate-errors-spki-list or a pin takes), the gateway id and
// the mDNS advertisement's state: MDNS ("advertising", "retrying", …),
// the interfaces advertised on or, when retrying, those that could not be
// used, why (MDNSReason: "no-multicast", "interface-down", "no-interface",
// "error") and the last error. A changed gateway.bind shows in
// restartRequired until the next start.
type GatewayInUse struct {
	Addr                string   `json:"addr"`
	Bind                string   `json:"bind"`
	Addresses           []string `json:"addresses"`
	URLs                []string `json:"urls"`
	TLSFingerprint      string   `json:"tlsFingerprint,omitempty"`
	TLSFingerprintWords string   `json:"tlsFingerprintWords,omitempty"`
	TLSSPKI             string   `json:"tlsSpki,omitempty"`
	GatewayID           string   `json:"gatewayId"`
	MDNS                string   `json:"mdns,omitempty"`
	MDNSInterfaces      []string `json:"mdnsInterfaces,omitempty"`
	MDNSReason          string   `json:"mdnsReason,omitempty"`
	MDNSError           string   `json:"mdnsError,omitempty"`
}

// EmbeddingInUse is the embedder in use and the size of the index it built.
type EmbeddingInUse struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	Dims     int    `json:"dims"`
	Files    int    `json:"files"`
	Chunks   int    `json:"chunks"`
}

// ModelRequest names a model server for config.models and config.test:
// the stored settings of Profile ("" or "main": the app's model block),
// with the request's non-empty fields on top. The stored API key is used
// only while Provider and BaseURL are those stored with it. Prompt is
// config.test's message (default model.DefaultTestPrompt).
type ModelRequest struct {
	Profile  string `json:"profile"`
	Provider string `json:"provider"`
	BaseURL  string `json:"baseUrl"`
	APIKey   string `json:"apiKey"`
	Model    string `json:"model"`
	Prompt   string `json:"prompt"`
}

// registerSettings adds config.get, config.patch, config.models,
// config.test and config.detect: operator connections only (kinds
// ReadOperator and WriteOperator: the gateway refuses a node with
// FORBIDDEN), and no response or log carries an API key. config.patch is
// a write: it needs an idempotencyKey.
func registerSettings(g *gateway.Server, s Settings) {
	g.Handle("config.get", gateway.Read(gateway.Admin), func(ctx context.Context, c *gateway.Call) (any, error) {
		v, err := s.Get(ctx)
		return v, settingsErr(err)
	})
	g.Handle("config.patch", gateway.Write(gateway.Admin), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			Patch json.RawMessage `json:"patch"`
		}
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		if len(p.Patch) == 0 {
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "config.patch: patch (an object of settings to change) is required")
		}
		v, err := s.Patch(ctx, p.Patch)
		return v, settingsErr(err)
	})
	g.Handle("config.models", gateway.Read(gateway.Admin), func(ctx context.Context, c *gateway.Call) (any, error) {
		var r ModelRequest
		if err := decode(c, &r); err != nil {
			return nil, err
		}
		ids, err := s.Models(ctx, r)
		if err != nil {
			return nil, settingsErr(err)
		}
		return map[string]any{"models": ids}, nil
	})
	g.Handle("config.test", gateway.Read(gateway.Admin), func(ctx context.Context, c *gateway.Call) (any, error) {
		var r ModelRequest
		if err := decode(c, &r); err != nil {
			return nil, err
		}
		res, err := s.Test(ctx, r)
		if err != nil {
			if errors.Is(err, config.ErrInvalid) || errors.Is(err, model.ErrConfig) {
				return nil, settingsErr(err)
			}
			// The server's answer is the result the person asked for.
			return map[string]any{"ok": false, "provider": res.Provider, "model": res.Model, "error": err.Error()}, nil
		}
		return map[string]any{"ok": true, "provider": res.Provider, "model": res.Model, "answer": res.Answer, "ms": res.Millis}, nil
	})
	g.Handle("config.detect", gateway.Read(gateway.Admin), func(ctx context.Context, c *gateway.Call) (any, error) {
		return map[string]any{"servers": s.Local(ctx)}, nil
	})
}

// settingsErr maps the settings' errors: a refused patch or request is
// INVALID_REQUEST, a model server that cannot be reached UNAVAILABLE, one
// that refused REJECTED as INVALID_REQUEST with its message.
func settingsErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, config.ErrInvalid), errors.Is(err, model.ErrConfig), errors.Is(err, model.ErrRejected):
		return &gateway.Error{Code: gateway.CodeInvalidRequest, Message: err.Error()}
	case errors.Is(err, model.ErrUnavailable), errors.Is(err, model.ErrTimeout):
		return &gateway.Error{Code: gateway.CodeUnavailable, Message: err.Error(), Retryable: true}
	}
	return mapErr(err)
}
