#!/usr/bin/env bash
# Errors a busy keep-alive client sees across a drain: per model, weft-bench load -c 20 for
# DURATION seconds against weft serving www/, with SIGUSR2 (an upgrade to the same binary)
# or SIGTERM sent half-way; prints the client's error counts. With the default
# `timeouts.drain_idle` (1 s) every keep-alive request is answered (reads and writes: 0);
# SIGTERM leaves connect errors once the port is closed. DRAIN_IDLE=0s shows the race the
# window closes (one read error per connection across SIGUSR2).
#
#   scripts/checks/drain_errors.sh            DRAIN_IDLE=1s DURATION=4 MODELS="fiber thread process pipeline"
#
# weft on core 0, the client on core 1. Needs taskset, python3 and the release builds
# (`cargo build --release -p weft -p weft-bench`).
set -u
cd "$(dirname "$0")/../.." || exit 2
di=${DRAIN_IDLE:-1s}; dur=${DURATION:-4}; models=${MODELS:-fiber thread process pipeline}
weft=${WEFT:-target/release/weft}; bench=${WEFT_BENCH:-target/release/weft-bench}
for b in "$weft" "$bench"; do
  [[ -x $b ]] || { echo "drain_errors: $b not built (cargo build --release -p weft -p weft-bench)" >&2; exit 2; }
done
root_flag=(); ((EUID == 0)) && root_flag=(--allow-root)
port=18950
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '[timeouts]\ndrain_idle = "%s"\n' "$di" >"$work/weft.toml"
half=$((dur / 2))
echo "model,signal,drain_idle,requests,connects,connect_errors,read_errors,write_errors,timeouts"
for model in $models; do
  for sig in USR2 TERM; do
    port=$((port + 1))
    taskset -c 0 "$weft" serve "${root_flag[@]}" --config "$work/weft.toml" --root www --threads 1 \
      --listen "127.0.0.1:$port=$model" >"$work/$model-$sig.log" 2>&1 &
    pid=$!
    sleep 0.5
    (sleep "$half"; kill -"$sig" "$pid") &
    out=$(taskset -c 1 "$bench" load -c 20 -d "${dur}s" --json "http://127.0.0.1:$port/" 2>/dev/null)
    python3 -c '
import json, sys
j = json.loads(sys.stdin.read()); e = j["errors"]
print(",".join(map(str, [sys.argv[1], "SIG" + sys.argv[2], sys.argv[3], j["requests"], j["connects"],
      e["connect"], e["read"], e["write"], e["timeout"]])))' "$model" "$sig" "$di" <<<"$out"
    # The old process and, after SIGUSR2, the new one.
    pkill -f -- "--listen 127.0.0.1:$port=" 2>/dev/null
    sleep 0.5
    pkill -9 -f -- "--listen 127.0.0.1:$port=" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
done
