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
