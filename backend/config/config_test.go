package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		body    string // "" = no file
		wantErr string
		check   func(t *testing.T, c Config)
	}{
		{name: "missing file", check: func(t *testing.T, c Config) {
			if c.Model.Provider != "" || c.Gateway.Port != 0 {
				t.Fatalf("not zero: %+v", c)
			}
		}},
		{name: "model block", body: `{"model":{"provider":"openai","baseUrl":"http://127.0.0.1:8080/v1","model":"qwen"},"gateway":{"port":18800}}`,
			check: func(t *testing.T, c Config) {
				if c.Model.Provider != "openai" || c.Model.BaseURL != "http://127.0.0.1:8080/v1" || c.Model.Model != "qwen" || c.Gateway.Port != 18800 {
					t.Fatalf("got %+v", c)
				}
			}},
		{name: "syntax error names line", body: "{\n  \"model\": {\n    \"provider\": \"openai\",,\n  }\n}", wantErr: ":3:"},
		{name: "unknown field", body: `{"modle":{}}`, wantErr: "unknown field"},
		{name: "wrong type", body: `{"gateway":{"port":"x"}}`, wantErr: "config"},
		{name: "port range", body: `{"gateway":{"port":70000}}`, wantErr: "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.json")
			if tt.body != "" {
				if err := os.WriteFile(path, []byte(tt.body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			c, err := Load(path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}
