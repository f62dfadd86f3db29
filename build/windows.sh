#!/usr/bin/env bash
# Cross-builds the Windows amd64 app (build/package.sh calls it): cgo with mingw
# (go-sqlite3, sqlite-vec), the GUI subsystem (-H=windowsgui: no console window on
# double-click; run from a terminal with a command it attaches to that console and is the
# same CLI, backend/cli/console_windows.go), and the resources linked from a .syso made
# by build/pkgtool (tc-hib/winres): the icon from build/appicon.png, VERSIONINFO with
# VERSION, the manifest. Then, when makensis is installed, the NSIS installer
# (build/windows/installer.nsi).
# Usage: build/windows.sh VERSION OUTDIR   (from the repository root)
#   OUTDIR/atrium-VERSION-windows-amd64.exe, OUTDIR/atrium-VERSION-windows-amd64-setup.exe
set -euo pipefail
VERSION=${1:?usage: build/windows.sh VERSION OUTDIR}
OUTDIR=${2:?usage: build/windows.sh VERSION OUTDIR}
GO=${GO:-go}
exe="$OUTDIR/atrium-${VERSION}-windows-amd64.exe"
echo "== windows/amd64 ($VERSION)"
tmp=$(mktemp -d)
syso=rsrc_windows_amd64.syso # in the main package's folder: go build links it
trap 'rm -rf "$tmp"; rm -f "$syso"' EXIT
# sqlite-vec's cgo needs sqlite3.h; only these two headers, not all of /usr/include. The
# folder's path is part of CGO_CFLAGS and so of Go's build cache keys: keep it fixed.
inc="$PWD/out/mingw-include"
mkdir -p "$inc"
cp /usr/include/sqlite3.h /usr/include/sqlite3ext.h "$inc/"
GOOS= GOARCH= CGO_ENABLED=0 "$GO" run ./build/pkgtool syso -version "$VERSION" -icon build/appicon.png -out "$syso"
start=$(date +%s)
CC=x86_64-w64-mingw32-gcc CGO_ENABLED=1 GOOS=windows GOARCH=amd64 CGO_CFLAGS="-I$inc" \
  "$GO" build -tags desktop,production -trimpath -ldflags "-s -w -H=windowsgui -X main.version=$VERSION" -o "$exe" .
echo "   $exe ($(( $(date +%s) - start )) s)"

# The installer: Program Files\Atrium, a Start-menu shortcut, an uninstaller.
setup="$OUTDIR/atrium-${VERSION}-windows-amd64-setup.exe"
"$GO" run ./build/pkgtool ico -icon build/appicon.png -out "$tmp/atrium.ico"
num=$("$GO" run ./build/pkgtool numeric -version "$VERSION")
makensis -V2 -WX -DVERSION="$VERSION" -DVERSION4="$num" -DEXE="$PWD/$exe" -DICON="$tmp/atrium.ico" \
  -DOUTFILE="$PWD/$setup" build/windows/installer.nsi
echo "   $setup"
