#!/usr/bin/env bash
# Cross-builds the Windows amd64 app (build/package.sh calls it): cgo with mingw
# (go-sqlite3, sqlite-vec), the GUI subsystem (-H=windowsgui: no console window on
# double-click; run from a terminal it is the same CLI), and the icon (build/appicon.png),
# version info and manifest resources made by go-winres (tc-hib/go-winres) from
# build/windows/winres.json with VERSION stamped in.
# Usage: build/windows.sh VERSION OUT.exe   (from the repository root)
set -euo pipefail
VERSION=${1:?usage: build/windows.sh VERSION OUT.exe}
OUT=${2:?usage: build/windows.sh VERSION OUT.exe}
GO=${GO:-go}
WINRES=github.com/tc-hib/go-winres@v0.3.3
echo "== windows/amd64 ($VERSION)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; rm -f rsrc_windows_amd64.syso' EXIT
# sqlite-vec's cgo needs sqlite3.h; only these two headers, not all of /usr/include.
mkdir -p "$tmp/include"
cp /usr/include/sqlite3.h /usr/include/sqlite3ext.h "$tmp/include/"
# Windows wants a.b.c.d file versions: the numbers of "v1.2.3-4-gabc" -> 1.2.3.4, else 0.0.0.0.
nums=$(echo "${VERSION#v}" | grep -oE '^[0-9]+(\.[0-9]+){0,2}(-[0-9]+)?' | tr '-' '.' || true)
IFS=. read -r a b c d <<< "${nums:-0}"
fixed="${a:-0}.${b:-0}.${c:-0}.${d:-0}"
mkdir -p "$tmp/winres"
convert build/appicon.png -resize 256x256 "PNG32:$tmp/winres/appicon.png" # go-winres: at most 256x256
python3 - "$VERSION" "$fixed" build/windows/winres.json "$tmp/winres/winres.json" <<'PY'
import json, sys
version, fixed, src, dst = sys.argv[1:]
w = json.load(open(src))
w["RT_MANIFEST"]["#1"]["0409"]["identity"]["version"] = fixed
v = w["RT_VERSION"]["#1"]["0000"]
v["fixed"] = {"file_version": fixed, "product_version": fixed}
for k in ("FileVersion", "ProductVersion"):
    v["info"]["0409"][k] = version
json.dump(w, open(dst, "w"), ensure_ascii=False, indent=1)
PY
GOOS= GOARCH= CGO_ENABLED=0 "$GO" run "$WINRES" make --in "$tmp/winres/winres.json" --out "$tmp/rsrc" --arch amd64
cp "$tmp/rsrc_windows_amd64.syso" rsrc_windows_amd64.syso
CC=x86_64-w64-mingw32-gcc CGO_ENABLED=1 GOOS=windows GOARCH=amd64 CGO_CFLAGS="-I$tmp/include" \
  "$GO" build -tags desktop,production -trimpath -ldflags "-s -w -H=windowsgui -X main.version=$VERSION" -o "$OUT" .
echo "   $OUT"
