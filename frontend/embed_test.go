package frontend

import (
	"io/fs"
	"testing"
)

func TestDistIsRootedAtDist(t *testing.T) {
	d := Dist()
	if _, err := fs.Stat(d, ".gitkeep"); err != nil {
		t.Fatalf(".gitkeep not at the root of Dist(): %v", err)
	}
	_, err := fs.Stat(d, "index.html")
	if Built() != (err == nil) {
		t.Fatalf("Built() = %v but index.html stat err = %v", Built(), err)
	}
}

func TestA2UISchemasEmbedded(t *testing.T) {
	s := A2UISchemas()
	for _, name := range []string{
		"VERSION",
		"LICENSE",
		"v0_8/server_to_client_with_standard_catalog.json",
		"v0_9/server_to_client.json",
		"v0_9/common_types.json",
		"v0_9/catalogs/basic/catalog.json",
		"v0_9/catalogs/basic/examples/00_simple-text.json",
	} {
		if _, err := fs.Stat(s, name); err != nil {
			t.Errorf("A2UISchemas() lacks %s: %v", name, err)
		}
	}
	v, err := fs.ReadFile(s, "VERSION")
	if err != nil || string(v) != "0.11.0\n" {
		t.Fatalf("VERSION = %q, %v; want \"0.11.0\\n\"", v, err)
	}
}
