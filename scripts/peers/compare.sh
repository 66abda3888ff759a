#!/usr/bin/env bash
# Side-by-side comparison of weft models and nginx with wrk, until weft-bench takes over.
# Server pinned to core 0, wrk to core 1; runs alternate between servers; prints one CSV row
# per run (server, path, conns, run, requests/s, server CPU us per request) and a median summary.
#
#   RUNS=5 DURATION=5 CONNS="1 10 50" PATHS="/echo /haewelmann.html" MODELS="fiber thread" \
#     scripts/peers/compare.sh
#
# Needs wrk and nginx (apt-get install wrk nginx-light) and a release build of weft.
#
# CLIENT=weft-bench drives the load with `weft-bench load -t1` (also pinned to core 1)
# instead of `wrk -t1`: a closed loop like wrk's that sends more requests per second from one
# core, for the figures where wrk, not the server, is the limit (c=50 and c=1000 on /echo).
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-5}; DURATION=${DURATION:-5}; CONNS=${CONNS:-"1 10 50"}
PATHS=${PATHS:-"/echo /haewelmann.html"}; MODELS=${MODELS:-"thread"}
WEFT=${WEFT:-target/release/weft}
CLIENT=${CLIENT:-wrk}
BENCH=${BENCH:-target/release/weft-bench}
# The server is pinned to one core, so models with a worker pool get one worker.
THREADS=${THREADS:-1}
ROOT=$(pwd)/www
# On exit the servers are stopped and waited for, so a next run can bind the same ports.
work=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
"$WEFT" fileset "$ROOT" >/dev/null

# cpu_ticks PID: "user sys" ticks of PID and its children.
source scripts/lib/cpu_ticks.sh

declare -A PIDS PORTS
port=18100
# A model name may carry fiber options: "fiber-parked" is the fiber model with idle
# keep-alive connections left in their parked fibers (fiber.park_idle = false),
# "fiber-nolinger" parks them without a fiber at once (fiber.linger = "0s").
for m in $MODELS; do
  port=$((port + 1)); PORTS[$m]=$port
  model=$m; printf '' >"$work/$m.toml"
  if [[ $m == fiber-parked ]]; then model=fiber; printf '[fiber]\npark_idle = false\n' >"$work/$m.toml"; fi
  # "fiber-nolinger": idle connections parked without a fiber at once (fiber.linger = 0).
  if [[ $m == fiber-nolinger ]]; then model=fiber; printf '[fiber]\nlinger = "0s"\n' >"$work/$m.toml"; fi
  # "MODEL-nocache": the model with the response cache off (every file read with sendfile).
  if [[ $m == *-nocache ]]; then model=${m%-nocache}; printf '[cache]\nenabled = false\n' >>"$work/$m.toml"; fi
  taskset -c 0 "$WEFT" serve --keepalive-requests 1000000 --config "$work/$m.toml" --root "$ROOT" --threads "$THREADS" \
    --listen "127.0.0.1:$port=$model" >"$work/$m.log" 2>&1 &
  PIDS[$m]=$!
done
if command -v nginx >/dev/null; then
  port=$((port + 1)); PORTS[nginx]=$port
  sed -e "s|PORT|$port|; s|WWW_ROOT|$ROOT|" scripts/peers/peer-nginx.conf >"$work/nginx.conf"
  # NGINX_OPEN_FILE_CACHE=1: nginx keeps descriptors and metadata of served files open
  # (open_file_cache), the peer of weft's response cache.
  if [[ ${NGINX_OPEN_FILE_CACHE:-0} == 1 ]]; then
    sed -i 's|^    sendfile on;|    sendfile on;\n    open_file_cache max=10000 inactive=60s;\n    open_file_cache_valid 1s;|' "$work/nginx.conf"
  fi
  taskset -c 0 nginx -p "$work" -c "$work/nginx.conf" >"$work/nginx.log" 2>&1 &
  PIDS[nginx]=$!
else
  echo "# nginx not installed: comparing weft models only" >&2
fi
source scripts/lib/wait_listening.sh
for s in "${!PIDS[@]}"; do wait_listening "$s" "${PORTS[$s]}" "$work/$s.log"; done
HZ=$(getconf CLK_TCK)
# cpu_us_per_req is user_us + sys_us: the server's user-space and kernel CPU per request.
echo "server,path,conns,run,rps,cpu_us_per_req,user_us,sys_us" | tee "$work/rows.csv"
for path in $PATHS; do for c in $CONNS; do for run in $(seq 1 "$RUNS"); do
  for s in "${!PIDS[@]}"; do
    pid=${PIDS[$s]}
    read -r u0 s0 < <(cpu_ticks "$pid")
    if [[ $CLIENT == weft-bench ]]; then
      out=$(taskset -c 1 "$BENCH" load -t1 -c"$c" -d"${DURATION}s" --json "http://127.0.0.1:${PORTS[$s]}$path")
      read -r u1 s1 < <(cpu_ticks "$pid")
      read -r reqs rps errs < <(python3 -c 'import json,sys; r=json.load(sys.stdin); e=sum(r["errors"].values())+r["requests"]-r["statuses"]["2xx"]; print(r["requests"], r["requests_per_s"], e)' <<<"$out")
      if [[ $errs != 0 ]]; then echo "# $s $path c=$c: $errs errors or non-2xx" >&2; fi
    else
      out=$(taskset -c 1 wrk -t1 -c"$c" -d"${DURATION}s" "http://127.0.0.1:${PORTS[$s]}$path")
      read -r u1 s1 < <(cpu_ticks "$pid")
      if grep -q -E "Socket errors|Non-2xx" <<<"$out"; then echo "# $s $path c=$c: $(grep -E 'Socket errors|Non-2xx' <<<"$out")" >&2; fi
      reqs=$(awk '/requests in/ {print $1}' <<<"$out")
      rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    fi
    split=$(awk -v u="$((u1 - u0))" -v k="$((s1 - s0))" -v hz="$HZ" -v n="$reqs" \
      'BEGIN { printf "%.2f,%.2f,%.2f", (u + k) / hz * 1e6 / n, u / hz * 1e6 / n, k / hz * 1e6 / n }')
    echo "$s,$path,$c,$run,$rps,$split" | tee -a "$work/rows.csv"
  done
done; done; done
echo
echo "median over $RUNS runs: server,path,conns,rps,cpu_us_per_req,user_us,sys_us"
python3 - "$work/rows.csv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
keys = sorted({(r["server"], r["path"], int(r["conns"])) for r in rows}, key=lambda k: (k[1], k[2], k[0]))
med = lambda sel, f: statistics.median(float(r[f]) for r in sel)
for k in keys:
    sel = [r for r in rows if (r["server"], r["path"], int(r["conns"])) == k]
    print(f"{k[0]},{k[1]},{k[2]},{med(sel, 'rps'):.0f},{med(sel, 'cpu_us_per_req'):.2f},"
          f"{med(sel, 'user_us'):.2f},{med(sel, 'sys_us'):.2f}")
# Each weft server's CPU per request over nginx's, run by run (same round), and the median.
if any(r["server"] == "nginx" for r in rows):
    print()
    print("paired with nginx (same round): server,path,conns,median cpu ratio,per-run ratios")
    for k in keys:
        if k[0] == "nginx":
            continue
        rs = []
        for r in rows:
            if (r["server"], r["path"], int(r["conns"])) != k:
                continue
            n = [x for x in rows if x["server"] == "nginx" and x["path"] == r["path"]
                 and x["conns"] == r["conns"] and x["run"] == r["run"]]
            if n:
                rs.append(float(r["cpu_us_per_req"]) / float(n[0]["cpu_us_per_req"]))
        if rs:
            print(f"{k[0]},{k[1]},{k[2]},{statistics.median(rs):.3f}," + " ".join(f"{x:.3f}" for x in rs))
PY
