package model

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/atrium-dev/atrium/backend/model/modeltest"
)

// keyedServer is a scripted OpenAI-compatible server that wants key.
func keyedServer(t *testing.T, key string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+key {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":{"message":"Incorrect API key provided: sk-wr***ng.","type":"invalid_request_error","code":"invalid_api_key"}}`)
			return
		}
		switch r.URL.Path {
		case "/v1/models":
			fmt.Fprint(w, `{"object":"list","data":[{"id":"qwen-7b"},{"id":"llama-3"}]}`)
		case "/v1/chat/completions":
			modeltest.Stream(w, modeltest.Text("O"), modeltest.Text("K"), modeltest.Chunk(`{}`, "stop"), modeltest.Done)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestListModelsAndTestCall(t *testing.T) {
	srv := keyedServer(t, "sk-right")
	ctx := context.Background()
	good := Config{Provider: ProviderOpenAI, BaseURL: srv.URL + "/v1", APIKey: "sk-right", Model: "qwen-7b"}
	ids, err := ListModels(ctx, good, DetectOptions{})
	if err != nil || strings.Join(ids, ",") != "qwen-7b,llama-3" {
		t.Fatalf("ListModels = %v, %v", ids, err)
	}
	res, err := TestCall(ctx, good, "", OpenAIOptions{})
	if err != nil || res.Answer != "OK" || res.Model != "qwen-7b" {
		t.Fatalf("TestCall = %+v, %v", res, err)
	}

	bad := good
	bad.APIKey = "sk-wrong"
	if _, err := ListModels(ctx, bad, DetectOptions{}); !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "HTTP 401") || !strings.Contains(err.Error(), "Incorrect API key provided") {
		t.Fatalf("ListModels with a wrong key: %v", err)
	}
	_, err = TestCall(ctx, bad, "", OpenAIOptions{})
	if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "Incorrect API key provided") {
		t.Fatalf("TestCall with a wrong key: %v", err)
	}
	if strings.Contains(err.Error(), "sk-wrong") {
		t.Fatalf("the key is in the error: %v", err)
	}
	if _, err := TestCall(ctx, Config{Provider: ProviderOffline}, "", OpenAIOptions{}); !errors.Is(err, ErrConfig) {
		t.Fatalf("TestCall offline: %v", err)
	}
}

func TestDetectLocal(t *testing.T) {
	ollama := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/tags" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `{"models":[{"name":"qwen2.5:7b"},{"model":"bge-m3"}]}`)
	}))
	defer ollama.Close()
	lmstudio := keyedServer(t, "") // no key: an empty Authorization is "Bearer "
	lmstudio.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"data":[{"id":"local-model"}]}`)
	})
	// A port with nothing listening.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/v1"
	l.Close()

	got := DetectLocal(context.Background(), []LocalCandidate{
		{Name: "Ollama", Provider: ProviderOllama, BaseURL: ollama.URL + "/v1"},
		{Name: "LM Studio", Provider: ProviderOpenAI, BaseURL: lmstudio.URL + "/v1"},
		{Name: "llama.cpp", Provider: ProviderOpenAI, BaseURL: closed},
	}, DetectOptions{})
	if len(got) != 2 || got[0].Name != "Ollama" || strings.Join(got[0].Models, ",") != "qwen2.5:7b,bge-m3" ||
		got[1].Name != "LM Studio" || strings.Join(got[1].Models, ",") != "local-model" {
		t.Fatalf("DetectLocal = %+v", got)
	}
	for _, c := range LocalCandidates() {
		if !strings.HasPrefix(c.BaseURL, "http://127.0.0.1:") {
			t.Fatalf("candidate %+v is not on loopback", c)
		}
	}
}
