#!/usr/bin/env bash
# Fiber model: per-worker SO_REUSEPORT acceptors vs one dispatching acceptor. The server runs on
# cores 0-1 with two workers, wrk -t1 -c50 on core 1; modes alternate; one CSV row per run:
# load,mode,run,requests/s,server CPU us per request. RUNS (5) and DURATION (3) from the env.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-5}; DURATION=${DURATION:-3}; WEFT=${WEFT:-target/release/weft}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
printf '[fiber]\naccept = "reuseport"\n' >"$work/reuseport.toml"
printf '[fiber]\naccept = "dispatch"\n' >"$work/dispatch.toml"
cpu() { awk '{ s = $0; sub(/^.*\) /, "", s); split(s, f, " "); print f[12] + f[13] }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
echo "load,mode,run,rps,cpu_us_per_req"
for load in keepalive close; do
  hdr=(); [[ $load == close ]] && hdr=(-H "Connection: close")
  for run in $(seq 1 "$RUNS"); do for mode in reuseport dispatch; do
    taskset -c 0,1 "$WEFT" serve --config "$work/$mode.toml" --threads 2 --listen 127.0.0.1:18810=fiber >/dev/null 2>&1 &
    pid=$!; sleep 0.4
    t0=$(cpu $pid)
    out=$(taskset -c 1 wrk -t1 -c50 -d"${DURATION}s" "${hdr[@]}" http://127.0.0.1:18810/echo)
    t1=$(cpu $pid)
    n=$(awk '/requests in/ {print $1}' <<<"$out")
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    echo "$load,$mode,$run,$rps,$(awk -v t=$((t1 - t0)) -v hz="$hz" -v n="$n" 'BEGIN { printf "%.2f", t / hz * 1e6 / n }')"
    kill $pid; wait $pid 2>/dev/null || true
  done; done
done
