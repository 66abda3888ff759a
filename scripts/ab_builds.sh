#!/usr/bin/env bash
# Two or more weft builds against each other and nginx, on one path and concurrency: each round
# runs wrk once against every server in turn (the fiber model, one worker, on core 0; wrk -t1
# on core 1), so the same-round ratio to nginx cancels the machine's drift. Prints one CSV row
# per run, the medians of each server, and each build's same-round CPU ratio to nginx.
#
#   scripts/ab_builds.sh OUT.csv RUNS CONNS PATH BUILD...
#   e.g. scripts/ab_builds.sh /tmp/ab.csv 9 50 /echo /tmp/weft-before target/release/weft
# DURATION=S: seconds per wrk run (default 3).
#
# A build may be BINARY@CONFIG.toml to serve with that configuration file (e.g. one setting
# `[fiber] linger = "0s"`). Builds are named w1, w2, ... in the order given. Needs wrk and nginx.
# WRK_SCRIPT=FILE (and WRK_SCRIPT_ARGS) drive wrk with a script, e.g. WRK_SCRIPT=scripts/pipeline.lua
# WRK_SCRIPT_ARGS=16 for 16 pipelined requests per write.
set -u
out=$1; runs=$2; c=$3; path=$4; shift 4
cd "$(dirname "$0")/.."
work=$(mktemp -d)
declare -A PID PORT
port=18300; i=0
for arg in "$@"; do
  port=$((port + 1)); i=$((i + 1)); name="w$i"
  b=${arg%%@*}; config=()
  if [[ $arg == *@* ]]; then config=(--config "${arg#*@}"); fi
  taskset -c 0 "$b" serve "${config[@]}" --root www --threads 1 --listen "127.0.0.1:$port=fiber" >"$work/$name.log" 2>&1 &
  PID[$name]=$!; PORT[$name]=$port
done
port=$((port + 1))
sed -e "s|PORT|$port|; s|WWW_ROOT|$PWD/www|" scripts/peer-nginx.conf >"$work/nginx.conf"
taskset -c 0 nginx -p "$work" -c "$work/nginx.conf" >"$work/nginx.log" 2>&1 &
PID[nginx]=$!; PORT[nginx]=$port
# On exit the servers are stopped and waited for, so a next run can bind the same ports.
trap 'kill "${PID[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
source scripts/wait_listening.sh
for n in "${!PID[@]}"; do wait_listening "$n" "${PORT[$n]}" "$work/$n.log"; done
HZ=$(getconf CLK_TCK)
# cpu_ticks PID: "user sys" ticks of PID and its children.
source scripts/cpu_ticks.sh
echo "name,run,rps,cpu_us,user_us,sys_us" >"$out"
for r in $(seq 1 "$runs"); do
  for n in $(printf '%s\n' "${!PID[@]}" | sort); do
    read -r u0 s0 < <(cpu_ticks "${PID[$n]}")
    o=$(taskset -c 1 wrk -t1 -c"$c" -d"${DURATION:-3}s" ${WRK_SCRIPT:+-s "$WRK_SCRIPT"} \
      "http://127.0.0.1:${PORT[$n]}$path" ${WRK_SCRIPT:+-- ${WRK_SCRIPT_ARGS:-}})
    read -r u1 s1 < <(cpu_ticks "${PID[$n]}")
    reqs=$(awk '/requests in/ {print $1}' <<<"$o"); rps=$(awk '/Requests\/sec/ {print $2}' <<<"$o")
    awk -v n="$n" -v r="$r" -v rps="$rps" -v u=$((u1 - u0)) -v k=$((s1 - s0)) -v q="$reqs" -v hz="$HZ" \
      'BEGIN { printf "%s,%d,%s,%.3f,%.3f,%.3f\n", n, r, rps, (u + k) / hz * 1e6 / q, u / hz * 1e6 / q, k / hz * 1e6 / q }' >>"$out"
  done
done
python3 - "$out" <<'PY'
import collections, csv, statistics as st, sys
rows = list(csv.DictReader(open(sys.argv[1])))
by = collections.defaultdict(list)
for r in rows:
    by[r["name"]].append(r)
for n, rs in sorted(by.items()):
    med = [st.median(float(r[k]) for r in rs) for k in ("rps", "cpu_us", "user_us", "sys_us")]
    print(n, "rps %.0f cpu %.3f user %.3f sys %.3f" % tuple(med))
ng = {r["run"]: float(r["cpu_us"]) for r in by["nginx"]}
for n, rs in sorted(by.items()):
    if n != "nginx":
        rat = [float(r["cpu_us"]) / ng[r["run"]] for r in rs]
        print(n, "/nginx median %.3f  runs %s" % (st.median(rat), " ".join("%.3f" % x for x in rat)))
PY
