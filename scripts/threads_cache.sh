#!/usr/bin/env bash
# The threads-vs-processes paper's experiment ("Threaded vs Process-driven HTTP server"): two
# clients, each 20 sequential groups of 12 concurrent GETs on fresh connections, for the 1 KB,
# 484 KB and 2 MB files; average request completion time. Every weft model with the response
# cache on and off (and nginx, when installed, as a reference), server pinned to core 0 and
# weft-bench to core 1, servers alternating run by run, median of RUNS runs.
#
#   RUNS=5 MODELS="process thread fiber" scripts/threads_cache.sh
#
# Needs release builds of weft and weft-bench (cargo build --release -p weft -p weft-bench).
# Prints CSV rows (server, file, run, avg_ms, p99_ms, errors) and a median table; the rows
# also go to bench/results/<date>-threads-cache.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}; MODELS=${MODELS:-"process thread fiber"}
FILES=${FILES:-"/files/1k.bin /files/484k.bin /files/2m.bin"}
WEFT=${WEFT:-target/release/weft}; BENCH=${BENCH:-target/release/weft-bench}
THREADS=${THREADS:-1}
ROOT=$(pwd)/www
"$WEFT" fileset "$ROOT" >/dev/null
work=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p bench/results
out=bench/results/$(date +%F)-threads-cache.csv

declare -A PORTS PIDS
port=18200
for m in $MODELS; do
  for cache in on off; do
    s="$m-cache-$cache"; port=$((port + 1)); PORTS[$s]=$port
    printf '[cache]\nenabled = %s\n' "$([[ $cache == on ]] && echo true || echo false)" >"$work/$s.toml"
    taskset -c 0 "$WEFT" serve --config "$work/$s.toml" --root "$ROOT" --threads "$THREADS" \
      --listen "127.0.0.1:$port=$m" >"$work/$s.log" 2>&1 &
    PIDS[$s]=$!
  done
done
if command -v nginx >/dev/null; then
  port=$((port + 1)); PORTS[nginx]=$port
  sed -e "s|PORT|$port|; s|WWW_ROOT|$ROOT|" scripts/peer-nginx.conf >"$work/nginx.conf"
  sed -i 's|^    sendfile on;|    sendfile on;\n    open_file_cache max=10000 inactive=60s;\n    open_file_cache_valid 1s;|' "$work/nginx.conf"
  taskset -c 0 nginx -p "$work" -c "$work/nginx.conf" >"$work/nginx.log" 2>&1 &
  PIDS[nginx]=$!
fi
sleep 1
echo "server,file,run,avg_ms,p99_ms,errors" | tee "$out"
for file in $FILES; do for run in $(seq 1 "$RUNS"); do
  for s in $(printf '%s\n' "${!PORTS[@]}" | sort); do
    j=$(taskset -c 1 "$BENCH" groups "http://127.0.0.1:${PORTS[$s]}$file" --clients 2 \
      --groups 20 --concurrency 12 --json)
    row=$(python3 -c 'import json,sys; r=json.loads(sys.argv[1]); e=r["errors"]; n=sum(e.values()) if isinstance(e, dict) else e; print("%.3f,%.3f,%d" % (r["avg_ms"], r["p99_ms"], n))' "$j")
    echo "$s,$file,$run,$row" | tee -a "$out"
  done
done; done
echo
echo "median avg_ms over $RUNS runs"
python3 - "$out" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
files = sorted({r["file"] for r in rows}, key=lambda f: [r["file"] for r in rows].index(f))
servers = sorted({r["server"] for r in rows})
print("| server | " + " | ".join(files) + " |")
print("|---" * (len(files) + 1) + "|")
for s in servers:
    cells = []
    for f in files:
        v = [float(r["avg_ms"]) for r in rows if r["server"] == s and r["file"] == f]
        cells.append(f"{statistics.median(v):.3f}")
    print(f"| {s} | " + " | ".join(cells) + " |")
PY
