#!/usr/bin/env bash
# Screenshot of the real desktop window (Wails + WebKitGTK) under Xvfb with a
# Chinese note found by search. Usage: build/screenshot.sh BIN OUT.png
# Needs xvfb-run, xdotool and ImageMagick's import (make deps installs them).
set -euo pipefail
bin=$(realpath "${1:-bin/atrium}")
out=${2:-out/window.png}
mkdir -p "$(dirname "$out")"
out=$(realpath "$out")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/home" "$tmp/ws/memory"
cat > "$tmp/ws/MEMORY.md" <<'NOTE'
# 长期记忆

- 用户喜欢简短的回答，中文和英文都可以。
NOTE
cat > "$tmp/ws/memory/2026-11-28.md" <<'NOTE'
# 周会纪要 2026-11-28

- 决定把向量索引迁移到 sqlite-vec，代号 QK-7731。
- 下周三之前完成中文分词的评测（CMRC 2018 与 DRCD）。
- The team agreed to keep Markdown as the source of truth.
NOTE
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
here=$(dirname "$(realpath "$0")")
export bin out tmp port here
xvfb-run -a -s "-screen 0 1440x900x24" bash -c '
  set -euo pipefail
  . "$here/window.sh"
  window_start "$tmp/atrium.log" --home "$tmp/home" --workspace "$tmp/ws" --port "$port"
  trap window_stop EXIT
  sleep 4                                    # UI connects, memory indexes
  xdotool key --window "$wid" ctrl+k        # focus the memory search box
  sleep 0.5
  xdotool type --delay 60 "向量索引"
  xdotool key Return
  sleep 3
  import -window root "$out"
  echo "screenshot: saved $out"
'
