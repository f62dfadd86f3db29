package model

import (
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"
)

// Override is a profile's own model settings as the front matter of its
// persona, memory/roles/<role>/config.md, writes them (SPEC §6 "Profile =
// template (persona, model settings)"), under the key "model":
//
//	model: claude-haiku-4-5                              # the model only
//	model: {provider: anthropic, model: claude-haiku-4-5}
//	model:
//	  provider: ollama
//	  model: qwen2.5:7b
//	  baseUrl: http://127.0.0.1:11434
//	  contextWindow: 32768   # tokens (the chat's context economy)
//
// It never holds an API key: Markdown memory is shared, synced and
// written by agents, so keys stay in config.json or the environment
// (ParseOverride refuses one).
type Override struct {
	Provider      string `json:"provider,omitempty"`
	Model         string `json:"model,omitempty"`
	BaseURL       string `json:"baseUrl,omitempty"`
	ContextWindow int    `json:"contextWindow,omitempty"`
}

// ParseOverride decodes the value of the "model" key of a front matter, as
// a YAML decoder returns it (memory.FrontMatter.Raw["model"]): nil (no
// key: the zero Override), a string (the model name), or a mapping with
// the keys provider, model and baseUrl (also base_url, baseURL). Errors
// (ErrConfig): another type, an unknown key, an API key (apiKey, api_key,
// key, token), an unknown provider, a base URL that is not http(s).
func ParseOverride(v any) (Override, error) {
	var o Override
	switch t := v.(type) {
	case nil:
		return o, nil
	case string:
		o.Model = strings.TrimSpace(t)
		return o, nil
	case map[string]any:
		return overrideFromMap(t)
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[fmt.Sprint(k)] = x
		}
		return overrideFromMap(m)
	}
	return o, newErr(ErrConfig, nil, "model settings in front matter must be a model name or a mapping of provider, model and baseUrl, not %T", v)
}

func overrideFromMap(m map[string]any) (Override, error) {
	var o Override
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var dst *string
		switch strings.ToLower(strings.ReplaceAll(k, "_", "")) {
		case "contextwindow":
			n, ok := m[k].(int)
			if f, isF := m[k].(float64); isF && f == float64(int(f)) {
				n, ok = int(f), true
			}
			if !ok || n < 0 {
				return Override{}, newErr(ErrConfig, nil, "model setting %q must be a positive whole number of tokens, not %v", k, m[k])
			}
			o.ContextWindow = n
			continue
		case "provider":
			dst = &o.Provider
		case "model", "name":
			dst = &o.Model
		case "baseurl", "url":
			dst = &o.BaseURL
		case "apikey", "key", "token", "secret":
			return Override{}, newErr(ErrConfig, nil, "model settings in Markdown may not hold an API key (%q): put keys in config.json or the environment", k)
		default:
			return Override{}, newErr(ErrConfig, nil, "unknown model setting %q in front matter (use provider, model, baseUrl, contextWindow)", k)
		}
		switch x := m[k].(type) {
		case nil:
		case string:
			*dst = strings.TrimSpace(x)
		default:
			return Override{}, newErr(ErrConfig, nil, "model setting %q must be text, not %T", k, m[k])
		}
	}
	o.Provider = strings.ToLower(o.Provider)
	if err := checkProvider(o.Provider); err != nil {
		return Override{}, err
	}
	if err := checkBaseURL(o.BaseURL); err != nil {
		return Override{}, err
	}
	return o, nil
}

// Validate checks the shape of a configured model block (config.json
// "model" or "profiles.<role>.model"): a known provider or none, and a
// base URL that is http(s) with a host or empty. Errors are ErrConfig.
func (c Config) Validate() error {
	if err := checkProvider(strings.ToLower(strings.TrimSpace(c.Provider))); err != nil {
		return err
	}
	return checkBaseURL(c.BaseURL)
}

func checkProvider(p string) error {
	switch p {
	case "", ProviderOpenAI, ProviderOllama, ProviderAnthropic, ProviderOffline:
		return nil
	}
	return newErr(ErrConfig, nil, "unknown model provider %q (use %s)", p, providerList)
}

func checkBaseURL(base string) error {
	if base == "" {
		return nil
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return newErr(ErrConfig, nil, "model base URL %q is not an http(s) URL", base)
	}
	if u.User != nil {
		// A URL is shown in Settings, errors and logs; a key is not.
		return newErr(ErrConfig, nil, "model base URL %s has a user name or password in it, which would be shown in Settings, errors and logs: put the key in apiKey instead", u.Redacted())
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		// The API's paths are added to the base, after any query; and a
		// key in a query would be shown like a password in the URL.
		return newErr(ErrConfig, nil, "model base URL %s://%s%s has a query or fragment (?… or #…) in it: the API's paths are added to the base URL, and a key there would be shown in Settings, errors and logs; put the key in apiKey instead", u.Scheme, u.Host, u.Path)
	}
	return nil
}

// ProfileSettings are a profile's model settings from its two sources.
type ProfileSettings struct {
	// Role names the profile, for the reason text.
	Role string
	// Markdown is the "model" front matter of memory/roles/<role>/config.md
	// (ParseOverride); MarkdownPath names that file for the reason text.
	Markdown     Override
	MarkdownPath string
	// Config is config.json's profiles.<role>.model. It wins over Markdown
	// field by field (config.json is the person's own machine) and may hold
	// the API key for the profile.
	Config Config
}

// ForProfile resolves the model of one profile (SPEC §6 "configured per
// profile") without any I/O. base is the app's model as Detect completed
// it. The profile's Markdown settings, then its config.json settings, are
// laid over base field by field (a non-empty field wins). A provider other
// than base's starts afresh: base URL from the settings, else that
// provider's environment variable (OPENAI_BASE_URL, ANTHROPIC_BASE_URL),
// else its default; model from the settings, else OPENAI_MODEL /
// ANTHROPIC_MODEL, else DefaultOpenAIModel / DefaultAnthropicModel (Ollama
// needs a model named). Provider "offline" selects the offline provider.
//
// The API key: config.json profiles.<role>.model.apiKey when set; else
// base's key when the resolved provider and base URL are base's; else the
// provider's key variable (OPENAI_API_KEY, ANTHROPIC_API_KEY) when the base
// URL is the one that variable belongs to (its *_BASE_URL, or the default).
// A key is never sent to a server it was not configured for.
//
// A base URL from Markdown (which agents may write) must be a loopback
// address or one of the URLs configured for that provider (base's, the
// environment's, the default), so that a persona cannot send the
// conversation to an unknown server.
//
// It returns the Config for FromConfig and a one-line reason. Errors
// (ErrConfig): an unknown provider, a model without any provider, Ollama
// without a model, a Markdown base URL that is not allowed; the caller
// should then use base.
func ForProfile(base Config, s ProfileSettings, getenv func(string) string) (Config, string, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	who := "profile " + s.Role
	if s.Role == "" {
		who = "the profile"
	}
	if s.Markdown == (Override{}) && s.Config == (Config{}) {
		return base, fmt.Sprintf("%s uses the app's model", who), nil
	}
	if err := s.Config.Validate(); err != nil {
		return base, "", fmt.Errorf("%s: config.json profiles.%s.model: %w", who, s.Role, err)
	}
	out := base
	out.Provider = strings.ToLower(strings.TrimSpace(out.Provider))
	if out.Provider == "" {
		out.Provider = ProviderOffline
	}
	var from []string
	lay := func(provider, model, baseURL, src string) {
		if provider == "" && model == "" && baseURL == "" {
			return
		}
		from = append(from, src)
		if p := strings.ToLower(strings.TrimSpace(provider)); p != "" && p != out.Provider {
			out = Config{Provider: p}
		}
		if baseURL != "" {
			out.BaseURL = baseURL
		}
		if model != "" {
			out.Model = model
		}
	}
	mdPath := s.MarkdownPath
	if mdPath == "" {
		mdPath = "the persona's front matter"
	}
	lay(s.Markdown.Provider, s.Markdown.Model, s.Markdown.BaseURL, mdPath)
	lay(s.Config.Provider, s.Config.Model, s.Config.BaseURL, "config.json profiles."+s.Role+".model")
	fail := func(format string, args ...any) (Config, string, error) {
		return base, "", newErr(ErrConfig, nil, who+": "+format, args...)
	}
	if err := checkProvider(out.Provider); err != nil {
		return fail("%v", err)
	}
	// base's vision belongs to base's model; the profile's own config.json
	// "vision" is for the model it resolves to.
	if out.Provider != base.Provider || out.Model != base.Model {
		out.Vision = nil
	}
	if s.Config.Vision != nil {
		out.Vision = s.Config.Vision
	}
	switch {
	case s.Config.ContextWindow > 0:
		out.ContextWindow = s.Config.ContextWindow
	case s.Markdown.ContextWindow > 0:
		out.ContextWindow = s.Markdown.ContextWindow
	}
	keyFrom := ""
	switch out.Provider {
	case ProviderOffline:
		if s.Config.Provider == "" && s.Markdown.Provider == "" {
			return fail("sets a model (%s) but no provider, and the app has no model provider configured", out.Model)
		}
		return Config{Provider: ProviderOffline}, fmt.Sprintf("%s uses the offline provider (from %s)", who, strings.Join(from, ", ")), nil
	case ProviderOllama:
		out.BaseURL = strings.TrimSuffix(strings.TrimRight(orDefault(out.BaseURL, DefaultOllamaURL), "/"), "/v1") + "/v1"
		if out.Model == "" {
			return fail("selects Ollama without naming a model")
		}
		allowed := []string{DefaultOllamaURL + "/v1"}
		if base.Provider == ProviderOllama {
			allowed = append(allowed, base.BaseURL)
		}
		if s.Markdown.BaseURL != "" && s.Config.BaseURL == "" && !baseAllowed(out.BaseURL, allowed) {
			return fail("base URL %s from %s is neither local nor configured in config.json", out.BaseURL, mdPath)
		}
		switch {
		case s.Config.APIKey != "":
			out.APIKey, keyFrom = s.Config.APIKey, "config.json profiles."+s.Role+".model"
		case base.Provider == ProviderOllama && base.BaseURL == out.BaseURL:
			out.APIKey = base.APIKey
		default:
			out.APIKey = ""
		}
	default: // openai, anthropic
		api := remoteAPIFor(out.Provider)
		envBase := api.root(getenv(api.baseEnv))
		out.BaseURL = api.root(orDefault(out.BaseURL, getenv(api.baseEnv)))
		if out.Model == "" {
			out.Model = orDefault(getenv(api.modelEnv), api.defaultModel)
		}
		allowed := []string{api.root(""), envBase}
		if base.Provider == out.Provider {
			allowed = append(allowed, base.BaseURL)
		}
		if s.Markdown.BaseURL != "" && s.Config.BaseURL == "" && !baseAllowed(out.BaseURL, allowed) {
			return fail("base URL %s from %s is neither local nor configured in config.json or %s", out.BaseURL, mdPath, api.baseEnv)
		}
		switch {
		case s.Config.APIKey != "":
			out.APIKey, keyFrom = s.Config.APIKey, "config.json profiles."+s.Role+".model"
		case base.Provider == out.Provider && base.BaseURL == out.BaseURL && base.APIKey != "":
			out.APIKey, keyFrom = base.APIKey, "the app's model settings"
		case getenv(api.keyEnv) != "" && out.BaseURL == envBase:
			out.APIKey, keyFrom = getenv(api.keyEnv), api.keyEnv
		default:
			out.APIKey = ""
		}
	}
	why := fmt.Sprintf("%s uses %s model %s at %s (from %s)", who, out.Provider, out.Model, out.BaseURL, strings.Join(from, ", "))
	switch {
	case keyFrom != "":
		why += "; API key from " + keyFrom
	case out.Provider != ProviderOllama:
		why += "; no API key is configured for that server"
	}
	return out, why, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// baseAllowed reports whether base is a loopback URL or one of allowed.
func baseAllowed(base string, allowed []string) bool {
	for _, a := range allowed {
		if a != "" && strings.EqualFold(strings.TrimRight(a, "/"), base) {
			return true
		}
	}
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
