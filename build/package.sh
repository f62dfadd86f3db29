#!/usr/bin/env bash
# Builds Atrium's packages into out/package (`make package`):
#   atrium_<ver>_amd64.deb             Debian/Ubuntu: /usr/bin/atrium, .desktop entry, icons,
#                                      the runtime libraries it links as Depends
#   atrium-<ver>-linux-amd64.tar.gz    portable: the binary, .desktop, icons, README
#   atrium-<ver>-windows-amd64.exe     Windows amd64, cross-built with mingw: GUI subsystem, icon,
#                                      version info and manifest (build/windows.sh)
#   atrium-<ver>-windows-amd64-setup.exe  its NSIS installer (build/windows/installer.nsi)
# One icon set from one source image (build/appicon.png); the version from git
# (VERSION, passed by make) is stamped into every artifact.
# Usage: build/package.sh VERSION   (run from the repository root, frontend/dist built)
set -euo pipefail

VERSION=${1:?usage: build/package.sh VERSION}
OUT=out/package
TAGS=desktop,production,webkit2_41
GO=${GO:-go}
rm -rf "$OUT" && mkdir -p "$OUT"

# Debian versions: a release tag's "v0.2.0-3-gabc" -> "0.2.0+3+gabc" (after 0.2.0, before
# 0.2.1); anything else (a bare commit "4b89b15", even one starting with a digit) ->
# "0.0.0~git4b89b15", below every release. Release tags are vX.Y.Z (a bare hash can be all digits).
if [[ $VERSION =~ ^v[0-9]+(\.[0-9]+){0,2}(-[0-9]+-g[0-9a-f]+)?(-dirty)?$ ]]; then
  debver=${VERSION#v}
  debver=${debver//-/+}
else
  debver="0.0.0~git${VERSION}"
fi
debver=${debver//[^A-Za-z0-9.+~-]/+}

echo "== binary (linux/amd64, $VERSION)"
bin="$OUT/stage/atrium"
mkdir -p "$OUT/stage"
CGO_ENABLED=1 "$GO" build -tags "$TAGS" -trimpath -ldflags "-s -w -X main.version=$VERSION" -o "$bin" .

echo "== icons from build/appicon.png"
icons="$OUT/stage/icons"
for s in 16 24 32 48 64 128 256 512; do
  mkdir -p "$icons/hicolor/${s}x${s}/apps"
  convert build/appicon.png -resize "${s}x${s}" "PNG32:$icons/hicolor/${s}x${s}/apps/atrium.png"
done

desktop_entry() { # $1 = Exec path
  cat <<EOF
[Desktop Entry]
Type=Application
Name=Atrium
GenericName=AI agents with shared memory
GenericName[zh_CN]=共享记忆的 AI 智能体
Comment=A local-first home for a team of AI agents
Comment[zh_CN]=本地优先的 AI 智能体团队之家
Exec=$1
Icon=atrium
Terminal=false
Categories=Office;Utility;
StartupWMClass=atrium
X-Atrium-Version=$VERSION
EOF
}

echo "== .deb"
root="$OUT/deb"
mkdir -p "$root/DEBIAN" "$root/usr/bin" "$root/usr/share/applications" "$root/usr/share/icons" "$root/usr/share/doc/atrium"
install -m 0755 "$bin" "$root/usr/bin/atrium"
cp -r "$icons/hicolor" "$root/usr/share/icons/"
desktop_entry /usr/bin/atrium > "$root/usr/share/applications/atrium.desktop"
cp README.md "$root/usr/share/doc/atrium/README.md"
# Depends: the Debian packages that ship the shared libraries the binary links.
# Only the libraries it links directly (NEEDED), not their own dependencies.
needed=$(objdump -p "$bin" | awk '/NEEDED/{print $2}')
deps=$(for lib in $needed; do ldd "$bin" | awk -v l="$lib" '$1 == l {print $3}'; done | xargs -r realpath |
  xargs -r dpkg -S 2>/dev/null | cut -d: -f1 | sort -u | grep -v -E '^(libc6|libgcc-s1)$' || true)
depends="libc6"
for p in $deps; do
  v=$(dpkg-query -W -f='${Version}' "$p" | sed 's/-[^-]*$//')
  depends="$depends, $p (>= ${v%%+*})"
done
size=$(du -sk "$root/usr" | cut -f1)
cat > "$root/DEBIAN/control" <<EOF
Package: atrium
Version: $debver
Section: utils
Priority: optional
Architecture: amd64
Maintainer: Atrium developers <atrium@localhost>
Installed-Size: $size
Depends: $depends
Recommends: bubblewrap
Homepage: https://github.com/atrium-dev/atrium
Description: local-first home for a team of AI agents
 Several AI agents with private and shared Markdown memory, hybrid search
 (BM25 + vectors in SQLite), access control and a WebSocket gateway, in a
 desktop window (atrium) or headless (atrium serve).
EOF
deb="$OUT/atrium_${debver}_amd64.deb"
dpkg-deb --root-owner-group --build "$root" "$deb" >/dev/null
echo "   $deb"
echo "   Depends: $depends"

echo "== portable archive"
name="atrium-${VERSION}-linux-amd64"
pdir="$OUT/$name"
mkdir -p "$pdir"
install -m 0755 "$bin" "$pdir/atrium"
cp -r "$icons" "$pdir/icons"
desktop_entry atrium > "$pdir/atrium.desktop"
cp README.md "$pdir/"
echo "$VERSION" > "$pdir/VERSION"
tar -C "$OUT" -czf "$OUT/$name.tar.gz" "$name"
echo "   $OUT/$name.tar.gz"

command -v x86_64-w64-mingw32-gcc >/dev/null || { echo "x86_64-w64-mingw32-gcc missing: apt-get install gcc-mingw-w64-x86-64" >&2; exit 1; }
command -v makensis >/dev/null || { echo "makensis missing: apt-get install nsis" >&2; exit 1; }
bash build/windows.sh "$VERSION" "$OUT"
rm -rf "$OUT/stage" "$root" "$pdir"
ls -l "$OUT"
