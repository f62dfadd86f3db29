# Shared by the window screenshot scripts (sourced, not run): start the real
# desktop app (Wails + WebKitGTK) inside an X server (xvfb-run) and find its
# window. Needs xdotool and ImageMagick's import (make deps installs them).

# window_start LOG ARGS...: starts "$bin" ARGS... in the background (its
# output to LOG) and sets $pid and $wid (the Atrium window) once it shows;
# exits with the log when it does not within 60 s.
window_start() {
  local log=$1
  shift
  export WEBKIT_DISABLE_COMPOSITING_MODE=1 WEBKIT_DISABLE_DMABUF_RENDERER=1 LIBGL_ALWAYS_SOFTWARE=1
  "$bin" "$@" >"$log" 2>&1 &
  pid=$!
  wid=""
  for _ in $(seq 1 60); do
    wid=$(xdotool search --onlyvisible --name "^Atrium$" 2>/dev/null | head -n1 || true)
    [ -n "$wid" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 1
  done
  if [ -z "$wid" ]; then
    echo "the Atrium window did not appear" >&2
    cat "$log" >&2
    exit 1
  fi
  xdotool windowactivate --sync "$wid" 2>/dev/null || xdotool windowfocus --sync "$wid"
}

# window_drawn: waits (up to 60 s) until the window shows more than a blank
# page: WebKit's first start may take seconds after the window maps.
window_drawn() {
  local colors=0
  for _ in $(seq 1 60); do
    colors=$(import -window "$wid" png:- 2>/dev/null | identify -format %k - 2>/dev/null || echo 0)
    [ "$colors" -gt 64 ] && return 0
    sleep 1
  done
  echo "the Atrium window stayed blank ($colors colours)" >&2
  exit 1
}

# window_stop: stops the app started by window_start and waits for it.
window_stop() {
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# window_shot OUT.png: the window's area of the screen.
window_shot() {
  import -window "$wid" "$1"
  echo "screenshot: saved $1"
}
