#!/usr/bin/env bash
# Is the client the limit? The fiber model (one worker) on core 0 and `wrk -t1` on core 1:
# per run, the request rate, the server's CPU per request and how busy its core was, and
# wrk's own CPU (user+sys, GNU time) per request. When wrk spends more per request than the
# server, wrk's core saturates first and the server's rate is wrk's.
#
#   RUNS=5 DURATION=4 CONNS="50 1000" scripts/clients/client_cpu.sh [PATH]
#
# Needs wrk and /usr/bin/time, and a release build of weft.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-5}; DURATION=${DURATION:-4}; CONNS=${CONNS:-"50 1000"}; path=${1:-/echo}
WEFT=${WEFT:-target/release/weft}; port=18700
source scripts/lib/cpu_ticks.sh
HZ=$(getconf CLK_TCK)
taskset -c 0 "$WEFT" serve --keepalive-requests 1000000 --root www --threads 1 --listen "127.0.0.1:$port=fiber" >/dev/null 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait 2>/dev/null' EXIT
source scripts/lib/wait_listening.sh
wait_listening weft "$port" /dev/null
echo "conns,run,rps,server_us_per_req,server_busy,client_us_per_req"
for c in $CONNS; do for r in $(seq 1 "$RUNS"); do
  read -r u0 s0 < <(cpu_ticks $pid)
  o=$(taskset -c 1 /usr/bin/time -f "TIME %U %S" wrk -t1 -c"$c" -d"${DURATION}s" "http://127.0.0.1:$port$path" 2>&1)
  read -r u1 s1 < <(cpu_ticks $pid)
  q=$(awk '/requests in/ {print $1}' <<<"$o"); rps=$(awk '/Requests\/sec/ {print $2}' <<<"$o")
  secs=$(awk '/requests in/ {sub(/s,$/, "", $4); print $4}' <<<"$o")
  read -r cu cs < <(awk '/^TIME/ {print $2, $3}' <<<"$o")
  awk -v c="$c" -v r="$r" -v rps="$rps" -v q="$q" -v u=$((u1 - u0)) -v k=$((s1 - s0)) -v hz="$HZ" \
    -v cu="$cu" -v cs="$cs" -v t="$secs" \
    'BEGIN { printf "%d,%d,%.0f,%.2f,%.2f,%.2f\n", c, r, rps, (u + k) / hz * 1e6 / q, (u + k) / hz / t, (cu + cs) * 1e6 / q }'
done; done
