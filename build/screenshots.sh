#!/usr/bin/env bash
# Screenshots of the real desktop window (Wails + WebKitGTK) under Xvfb: the
# first-start screen (a fresh state dir and a home folder holding an OpenClaw
# workspace) and the Settings panel, each in English and in Chinese (the UI
# follows the system language). Usage: build/screenshots.sh BIN OUTDIR
# (make screenshots: OUTDIR screenshots/, git-ignored). Needs xvfb-run,
# xdotool and ImageMagick (make deps installs them).
set -euo pipefail
bin=$(realpath "${1:-bin/atrium}")
outdir=${2:-screenshots}
mkdir -p "$outdir"
outdir=$(realpath "$outdir")
here=$(dirname "$(realpath "$0")")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A home folder with an OpenClaw workspace in it.
oc="$tmp/user/.openclaw/workspace"
mkdir -p "$oc/memory"
cat > "$oc/MEMORY.md" <<'NOTE'
# 长期记忆

- 用户喜欢简短的回答，中文和英文都可以。
- The user's cat is called Miso.
NOTE
cat > "$oc/SOUL.md" <<'NOTE'
Be brief and kind.
NOTE
cat > "$oc/memory/2026-11-20.md" <<'NOTE'
# Standup 2026-11-20

- The lighthouse renovation budget was approved: 48,000 euros.
NOTE
cat > "$oc/memory/2026-11-28.md" <<'NOTE'
# 周会纪要 2026-11-28

- 决定把灯塔监控系统迁移到新的服务器，代号 PX-4471。
NOTE
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export bin outdir tmp port here oc
xvfb-run -a -s "-screen 0 1440x900x24" bash -c '
  set -euo pipefail
  . "$here/window.sh"
  unset ATRIUM_HOME ATRIUM_WORKSPACE OPENAI_API_KEY OPENAI_BASE_URL ANTHROPIC_API_KEY
  export HOME="$tmp/user"
  for lang in en zh; do
    case $lang in
      en) export LANGUAGE=en_US LANG=en_US.UTF-8 ;;
      zh) export LANGUAGE=zh_CN LANG=zh_CN.UTF-8 ;;
    esac
    # The first start: nothing chose where memory lives.
    rm -rf "$tmp/state-$lang"
    window_start "$tmp/firstrun-$lang.log" --home "$tmp/state-$lang" --port "$port"
    window_drawn
    sleep 3                                  # the UI connects and asks setup.status
    window_shot "$outdir/firstrun-$lang.png"
    window_stop
    # Settings of an app on the OpenClaw workspace (Ctrl+, opens them).
    window_start "$tmp/settings-$lang.log" --home "$tmp/settings-state-$lang" --workspace "$oc" --port "$port"
    window_drawn
    sleep 3                                  # the UI connects, memory indexes
    xdotool key --window "$wid" ctrl+comma
    sleep 3                                  # config.get, config.detect
    window_shot "$outdir/settings-$lang.png"
    window_stop
  done
'
