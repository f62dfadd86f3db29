#!/usr/bin/env bash
# `go vet` for the other platforms (make test runs it; make vet-cross):
#   windows/amd64  every package, with cgo through mingw (go-sqlite3, sqlite-vec; the
#                  sqlite3.h folder trick of build/windows.sh), without and with the
#                  desktop tags (the Wails window)
#   darwin         arm64 and amd64, CGO_ENABLED=0: the packages that do not need cgo (listed
#                  by go list; without a macOS SDK cgo cannot target darwin, so everything
#                  importing sqlite-vec, and the Wails window, is not checked; printed below)
set -euo pipefail
GO=${GO:-go}
# The headers folder of build/windows.sh (a fixed path: it is part of Go's cache keys).
inc="$PWD/out/mingw-include"
mkdir -p "$inc"
cp /usr/include/sqlite3.h /usr/include/sqlite3ext.h "$inc/"
echo "== go vet windows/amd64 (cgo: mingw)"
export CC=x86_64-w64-mingw32-gcc CGO_CFLAGS="-I$inc"
GOOS=windows GOARCH=amd64 CGO_ENABLED=1 "$GO" vet ./...
GOOS=windows GOARCH=amd64 CGO_ENABLED=1 "$GO" vet -tags desktop,production . ./app/...
unset CC CGO_CFLAGS
mod=$("$GO" list -m)
ok=$(GOOS=darwin CGO_ENABLED=0 "$GO" list -e -f '{{if not (or .Error .DepsErrors)}}{{.ImportPath}}{{end}}' ./... | sed '/^$/d')
skipped=$(GOOS=darwin CGO_ENABLED=0 "$GO" list -e -f '{{if or .Error .DepsErrors}}{{.ImportPath}}{{end}}' ./... | sed '/^$/d')
[ -n "$ok" ] || { echo "no package loads for darwin" >&2; exit 1; }
for arch in arm64 amd64; do
  echo "== go vet darwin/$arch (CGO_ENABLED=0): $(wc -w <<< "$ok") packages"
  # shellcheck disable=SC2086
  GOOS=darwin GOARCH=$arch CGO_ENABLED=0 "$GO" vet $ok
done
echo "   not checked for darwin (need cgo): $(sed "s|$mod/||; s|^$mod$|.|" <<< "$skipped" | tr '\n' ' ')"
