// Package frontend embeds the built UI (frontend/dist) into the Go binary.
package frontend

import (
	"embed"
	"io/fs"
)

//go:embed all:dist
var dist embed.FS

// Dist returns the built UI rooted at dist/ (index.html at its root). Before `npm run build` it holds only .gitkeep.
func Dist() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		// fs.Sub only fails for an invalid path; "dist" is valid and embedded.
		panic(err)
	}
	return sub
}

// Built reports whether dist holds an index.html.
func Built() bool {
	info, err := fs.Stat(dist, "dist/index.html")
	return err == nil && !info.IsDir()
}
