#!/usr/bin/env bash
# Soak: REQUESTS mixed requests (static, cached, range, echo GET and POST, 404, conditional,
# and one malformed request in 50, which the server answers 400 and closes) against each weft
# model with wrk, sampling the server's resident memory every second and counting its open
# descriptors before and after. Pass: resident memory grows less than 5% from the end of the
# warm-up (the first tenth of the requests) to the end, and as many descriptors are open after
# the run (clients gone) as before it.
#
#   REQUESTS=5000000 MODELS="fiber thread process" scripts/robustness/soak.sh
#
# CONFIG=FILE passes a config file to every model (e.g. a [pipeline] section).
# COUNT=wrk (the default) counts the requests from wrk's own totals (rounds of 5 s), so the
# server sees only the mixed requests; COUNT=status asks the server's /_weft/status.json
# every second instead (itself a request, which under load costs the pipeline model memory:
# see BENCHMARKS.md, Soak).
# Needs wrk, curl and a release build (cargo build --release -p weft). Writes
# bench/results/<date>-soak.csv (or OUT=FILE) (model, second, served, rss_kib) and one summary line a model.
set -euo pipefail
cd "$(dirname "$0")/../.."
REQUESTS=${REQUESTS:-5000000}; MODELS=${MODELS:-"fiber thread process"}
CONNS=${CONNS:-50}; WEFT=${WEFT:-target/release/weft}
COUNT=${COUNT:-wrk}
case $COUNT in
  wrk) ROUND=5s ;;
  status) ROUND=30s ;;
  *) echo "COUNT must be wrk or status" >&2; exit 2 ;;
esac
ROOT=$(pwd)/www
"$WEFT" fileset "$ROOT" >/dev/null
out=${OUT:-bench/results/$(date +%F)-soak.csv}
mkdir -p bench/results
echo "model,second,served,rss_kib" >"$out"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

# shellcheck source=../lib/proc_usage.sh
. scripts/lib/proc_usage.sh
served() {
  curl -s "http://127.0.0.1:$1/_weft/status.json" |
    python3 -c 'import json,sys; print(sum(l["requests"] for l in json.load(sys.stdin)["listeners"]))'
}

port=18400
fail=0
for m in $MODELS; do
  port=$((port + 1))
  taskset -c 0 "$WEFT" serve ${CONFIG:+--config "$CONFIG"} --root "$ROOT" --threads 1 --status \
    --listen "127.0.0.1:$port=$m" >"$work/$m.log" 2>&1 &
  pid=$!
  sleep 1
  fd0=$(fds "$pid")
  warm=$((REQUESTS / 10)); rss_warm=""; sec=0; n=0; wrk_pid=""
  start=$(date +%s)
  : >"$work/$m.wrk"
  while [[ $n -lt $REQUESTS ]]; do
    # wrk in bounded rounds: each round ends by itself; a new one starts while requests remain.
    if [[ -z $wrk_pid ]] || ! kill -0 "$wrk_pid" 2>/dev/null; then
      [[ -n $wrk_pid ]] && wait "$wrk_pid" 2>/dev/null || true
      if [[ $COUNT == wrk ]]; then
        n=$(awk '/ requests in / {s += $1} END {print s + 0}' "$work/$m.wrk")
        [[ $n -ge $REQUESTS ]] && break
      fi
      taskset -c 1 wrk -t1 -c"$CONNS" -d"$ROUND" -s scripts/robustness/soak.lua "http://127.0.0.1:$port/" \
        >>"$work/$m.wrk" 2>&1 &
      wrk_pid=$!
    fi
    sleep 1; sec=$((sec + 1))
    if [[ $COUNT == status ]]; then n=$(served "$port"); fi
    rss=$(rss_tree "$pid")
    echo "$m,$sec,$n,$rss" >>"$out"
    if [[ -z $rss_warm && $n -ge $warm ]]; then rss_warm=$rss; fi
    if [[ $sec -gt 3600 ]]; then echo "# $m: gave up after an hour" >&2; break; fi
  done
  kill "$wrk_pid" 2>/dev/null || true; wait "$wrk_pid" 2>/dev/null || true
  sleep 2
  rss_end=$(rss_tree "$pid"); fd1=$(fds "$pid")
  growth=$(awk -v a="$rss_warm" -v b="$rss_end" 'BEGIN { printf "%.1f", (b - a) * 100 / a }')
  verdict=ok
  if awk -v g="$growth" 'BEGIN { exit !(g >= 5) }' || [[ $fd0 != "$fd1" ]]; then verdict=FAIL; fail=1; fi
  if ! kill -0 "$pid" 2>/dev/null; then verdict="FAIL (server died)"; fail=1; fi
  echo "$m: $n requests in $(( $(date +%s) - start )) s; rss after warm-up ${rss_warm} KiB, at end ${rss_end} KiB (${growth}%); fds before ${fd0}, after ${fd1}: $verdict"
  kill "$pid"; wait "$pid" 2>/dev/null || true
done
exit $fail
