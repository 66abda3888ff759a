#!/usr/bin/env bash
# Screenshots of the dashboard (/_weft/status) of each model under load, for docs/: weft
# (release build, --status --timing, one worker) on core 0, two wrk clients on core 1 (10
# connections asking `/`, 2 asking a missing path, so the 4xx line is not empty), and headless
# Chromium taking the page after LOAD_S seconds of load.
#
#   scripts/checks/dashboard_screenshots.sh [OUT_DIR]     LOAD_S=40 MODELS="fiber thread process pipeline"
#
# Writes OUT_DIR/dashboard-MODEL.png (default docs/). Needs wrk and chromium
# (`apt-get install wrk chromium`).
set -euo pipefail
cd "$(dirname "$0")/../.." || exit 2
out=${1:-docs}
load_s=${LOAD_S:-40}
models=${MODELS:-fiber thread process pipeline}
for tool in wrk chromium taskset; do
  command -v "$tool" >/dev/null || { echo "dashboard_screenshots: $tool is missing (apt-get install wrk chromium)" >&2; exit 2; }
done
source scripts/lib/free_ports.sh
source scripts/lib/wait_listening.sh
cargo build --release -q -p weft
mkdir -p "$out"
for model in $models; do
  port=$(free_ports 1)
  log=$(mktemp)
  taskset -c 0 target/release/weft serve --listen "127.0.0.1:$port=$model" \
    --threads 1 --status --timing >"$log" 2>&1 &
  pid=$!
  wait_listening "weft $model" "$port" "$log"
  taskset -c 1 wrk -t1 -c10 -d"$((load_s + 15))s" "http://127.0.0.1:$port/" >/dev/null &
  ok=$!
  taskset -c 1 wrk -t1 -c2 -d"$((load_s + 15))s" "http://127.0.0.1:$port/no-such-page" >/dev/null &
  missing=$!
  sleep "$load_s"
  profile=$(mktemp -d)
  taskset -c 1 chromium --headless --no-sandbox --disable-gpu --no-first-run \
    --user-data-dir="$profile" --hide-scrollbars --window-size=1280,2000 \
    --virtual-time-budget=3000 --screenshot="$out/dashboard-$model.png" \
    "http://127.0.0.1:$port/_weft/status" 2>/dev/null
  kill "$ok" "$missing" 2>/dev/null || true
  wait "$ok" "$missing" 2>/dev/null || true
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  rm -rf "$profile" "$log"
  echo "$out/dashboard-$model.png"
done
