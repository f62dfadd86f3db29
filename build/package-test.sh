#!/usr/bin/env bash
# Checks the packages `make package` built in out/package (`make package-test`):
#   .deb     unpacked into a scratch root (dpkg -x; or installed with dpkg -i when
#            ATRIUM_PKG_INSTALL=1 and root): the files are where they belong, Depends is
#            there, the installed `atrium version` prints the version, the installed
#            `atrium serve` answers /healthz and finds a note with a memory search.
#   .tar.gz  the portable binary prints the same version.
#   .exe     a PE32+ amd64 Windows GUI executable with the icon, a VERSIONINFO with VERSION
#            and the manifest (build/pkgtool check-exe; statically: Debian's wine cannot run
#            Go >= 1.24 programs).
#   -setup.exe  the NSIS installer: a PE32 GUI program with icon and VERSIONINFO; 7-Zip
#            unpacks the same atrium.exe and an uninstaller from it.
# Usage: build/package-test.sh VERSION
set -euo pipefail
VERSION=${1:?usage: build/package-test.sh VERSION}
OUT=out/package
fail() { echo "package-test: FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

deb=$(ls "$OUT"/atrium_*_amd64.deb 2>/dev/null | head -1)
[ -n "$deb" ] || fail "no .deb in $OUT (run make package)"
echo "== $deb"
info=$(dpkg-deb --info "$deb")
grep -q "Depends: .*libwebkit2gtk-4.1-0" <<< "$info" || fail "Depends lacks libwebkit2gtk-4.1-0"
if [ "${ATRIUM_PKG_INSTALL:-}" = 1 ] && [ "$(id -u)" = 0 ]; then
  dpkg -i "$deb" >/dev/null
  root=""
else
  root="$tmp/root"
  dpkg -x "$deb" "$root"
fi
for f in usr/bin/atrium usr/share/applications/atrium.desktop usr/share/icons/hicolor/256x256/apps/atrium.png usr/share/icons/hicolor/16x16/apps/atrium.png; do
  [ -e "$root/$f" ] || fail "$f missing from the package"
done
grep -q '^Exec=/usr/bin/atrium$' "$root/usr/share/applications/atrium.desktop" || fail ".desktop Exec"
if command -v desktop-file-validate >/dev/null; then desktop-file-validate "$root/usr/share/applications/atrium.desktop"; fi
atrium="$root/usr/bin/atrium"
got=$("$atrium" version)
echo "   atrium version: $got"
[[ $got == "atrium $VERSION "* ]] || fail "installed atrium version says '$got', want $VERSION"

# atrium serve from the package: /healthz and a memory search.
home="$tmp/home"; ws="$tmp/ws"
mkdir -p "$home" "$ws/memory"
printf '# 包裹测试\n\nThe packaged build indexes this note about marmalade pelicans.\n' > "$ws/memory/package-note.md"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
env -u OPENAI_API_KEY -u OPENAI_BASE_URL -u ANTHROPIC_API_KEY \
  "$atrium" serve --home "$home" --workspace "$ws" --port "$port" > "$tmp/serve.out" 2> "$tmp/serve.err" &
pid=$!
for _ in $(seq 1 600); do
  curl -fsS "http://127.0.0.1:$port/healthz" > "$tmp/health" 2>/dev/null && break
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/serve.err" >&2; fail "atrium serve exited"; }
  sleep 0.1
done
[ -s "$tmp/health" ] || { cat "$tmp/serve.err" >&2; fail "/healthz never answered"; }
echo "   /healthz: $(head -c 200 "$tmp/health")"
found=""
for _ in $(seq 1 300); do
  if "$atrium" memory search --home "$home" --workspace "$ws" --port "$port" --json "marmalade pelicans" > "$tmp/search" 2>"$tmp/search.err" &&
    grep -q 'memory/package-note.md' "$tmp/search"; then found=1; break; fi
  sleep 0.2
done
[ -n "$found" ] || { cat "$tmp/search" "$tmp/search.err" "$tmp/serve.err" >&2; fail "memory search did not find the note"; }
echo "   memory search: found memory/package-note.md"
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""

tgz="$OUT/atrium-${VERSION}-linux-amd64.tar.gz"
[ -f "$tgz" ] || fail "no $tgz"
tar -C "$tmp" -xzf "$tgz"
got=$("$tmp/atrium-${VERSION}-linux-amd64/atrium" version)
[[ $got == "atrium $VERSION "* ]] || fail "portable atrium version says '$got'"
echo "== $tgz: $got"

# Windows: checked statically (build/pkgtool: Go's debug/pe and tc-hib/winres read the
# headers and resources); Debian's wine cannot run Go >= 1.24 programs.
pkgtool() { GOOS= GOARCH= CGO_ENABLED=0 "${GO:-go}" run ./build/pkgtool "$@"; }
exe="$OUT/atrium-${VERSION}-windows-amd64.exe"
[ -f "$exe" ] || fail "no $exe"
echo "== $exe"
r=$(pkgtool check-exe -version "$VERSION" "$exe") || fail "$exe"
echo "   $r"
setup="$OUT/atrium-${VERSION}-windows-amd64-setup.exe"
[ -f "$setup" ] || fail "no $setup"
echo "== $setup"
r=$(pkgtool check-exe -installer -version "$VERSION" "$setup") || fail "$setup"
echo "   $r"
# Its contents, listed and unpacked by 7-Zip's NSIS reader: the same atrium.exe and the uninstaller.
7z x -y -o"$tmp/setup" "$setup" > "$tmp/7z.out" || { cat "$tmp/7z.out" >&2; fail "7z cannot unpack $setup"; }
grep -q 'NSIS-3 Unicode' <(7z l "$setup") || fail "$setup is not an NSIS 3 Unicode installer"
cmp -s "$tmp/setup/atrium.exe" "$exe" || fail "the installer's atrium.exe differs from $exe"
file "$tmp/setup/uninstall.exe" | grep -q 'PE32 executable (GUI)' || fail "the installer holds no uninstaller"
echo "   NSIS 3: atrium.exe (identical), uninstall.exe"
echo "package-test: OK"
