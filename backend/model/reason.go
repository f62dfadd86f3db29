package model

import "strings"

// Reason codes: why Detect chose the model it did, as a code the UI
// translates (issue 24 item 8: the English reason stayed English in the
// Chinese UI). The details (provider, model, base URL) are the Config's.
const (
	ReasonConfigOffline   = "config-offline"   // config.json selects the offline provider
	ReasonConfigOllama    = "config-ollama"    // config.json selects Ollama
	ReasonConfigAnthropic = "config-anthropic" // config.json selects Anthropic
	ReasonConfigOpenAI    = "config-openai"    // config.json configures an OpenAI-compatible model
	ReasonEnvOpenAI       = "env-openai"       // OPENAI_API_KEY/OPENAI_BASE_URL are set
	ReasonEnvAnthropic    = "env-anthropic"    // ANTHROPIC_API_KEY is set
	ReasonOllamaFound     = "ollama-found"     // a local Ollama answered with a model
	ReasonOllamaEmpty     = "ollama-empty"     // a local Ollama has no models
	ReasonNone            = "none"             // nothing configured or found: offline
	ReasonFailed          = "failed"           // the configured model could not be reached: offline
	ReasonOther           = "other"            // a reason this version does not know (shown as sent)
)

// ReasonCode returns the code of a reason Detect returned (ReasonOther for
// any other text).
func ReasonCode(reason string) string {
	for _, p := range []struct{ prefix, code string }{
		{"config.json selects the offline provider", ReasonConfigOffline},
		{"config.json selects Ollama", ReasonConfigOllama},
		{"config.json selects Anthropic", ReasonConfigAnthropic},
		{"config.json configures an OpenAI-compatible model", ReasonConfigOpenAI},
		{"OPENAI_API_KEY/OPENAI_BASE_URL are set", ReasonEnvOpenAI},
		{"ANTHROPIC_API_KEY is set", ReasonEnvAnthropic},
		{"found a local Ollama", ReasonOllamaFound},
		{"no model configured", ReasonNone},
	} {
		if strings.HasPrefix(reason, p.prefix) {
			return p.code
		}
	}
	switch {
	case strings.HasPrefix(reason, "Ollama at ") && strings.HasSuffix(reason, "no other model configured"):
		return ReasonOllamaEmpty
	case strings.HasSuffix(reason, "; using the offline provider"):
		return ReasonFailed
	}
	return ReasonOther
}
