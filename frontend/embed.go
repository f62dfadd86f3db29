// Package frontend embeds the built UI (frontend/dist) and the official A2UI JSON
// schemas (frontend/src/lib/a2ui/schemas) into the Go binary.
package frontend

import (
	"embed"
	"io/fs"
)

//go:embed all:dist
var dist embed.FS

//go:embed src/lib/a2ui/schemas
var a2uiSchemas embed.FS

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

// A2UISchemas returns the official A2UI JSON schemas as shipped by the npm package
// @a2ui/web_core (the version in VERSION, pinned in frontend/package.json), copied
// into the repository by `npm run a2ui-schemas` — the same files the frontend's
// validator uses. Layout at the root of the returned fs.FS:
//
//	v0_8/server_to_client_with_standard_catalog.json (and the other v0.8 schemas)
//	v0_9/server_to_client.json, v0_9/common_types.json, v0_9/catalogs/basic/catalog.json,
//	v0_9/catalogs/basic/examples/*.json (and the rest of the package's v0_9/schemas)
//	LICENSE (Apache-2.0), VERSION (one line, e.g. "0.11.0\n")
func A2UISchemas() fs.FS {
	sub, err := fs.Sub(a2uiSchemas, "src/lib/a2ui/schemas")
	if err != nil {
		// fs.Sub only fails for an invalid path; the path is valid and embedded.
		panic(err)
	}
	return sub
}
