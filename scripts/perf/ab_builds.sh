#!/usr/bin/env bash
# Two or more weft builds against each other and nginx, on one path and concurrency: each round
# runs wrk once against every server in turn (the fiber model, one worker, on core 0; wrk -t1
# on core 1; the order reversed every other round), so the same-round ratio to nginx cancels
# the machine's drift. Prints one CSV row per run, the medians of each server, and each
# build's same-round CPU ratio to nginx.
#
#   scripts/perf/ab_builds.sh OUT.csv RUNS CONNS PATH BUILD...
#   e.g. scripts/perf/ab_builds.sh /tmp/ab.csv 9 50 /echo /tmp/weft-before target/release/weft
# DURATION=S: seconds per wrk run (default 3).
#
# A build may be BINARY@CONFIG.toml to serve with that configuration file (e.g. one setting
# `[fiber] linger = "0s"`), and "BINARY FLAG..." (one argument) to serve with those flags
# too (e.g. "target/release/weft --congestion reno"). Builds are named w1, w2, ... in the order given. Needs wrk and nginx.
# MODEL=NAME serves the builds with that model (default fiber), e.g. MODEL=pipeline.
# WRK_SCRIPT=FILE (and WRK_SCRIPT_ARGS) drive wrk with a script, e.g. WRK_SCRIPT=scripts/clients/pipeline.lua
# WRK_SCRIPT_ARGS=16 for 16 pipelined requests per write.
# On a bigger machine: THREADS=N workers for each build (nginx: N worker processes) on
# SERVER_CORES (default 0), wrk -tWRK_THREADS on CLIENT_CORES (default 1), e.g. THREADS=8
# SERVER_CORES=0-7 CLIENT_CORES=8-15 WRK_THREADS=8. Started as root, weft gets --allow-root and
# nginx `user root;`.
# NGINX_CONF=FILE runs nginx with that configuration instead of scripts/peers/peer-nginx.conf
# (e.g. scripts/peers/peer-nginx-tuned.conf, with open_file_cache for static files).
# LWAN=BINARY adds lwan (scripts/peers/build_lwan.sh builds target/peers/lwan) to every round:
# one thread on the server cores, scripts/peers/peer-lwan.conf, serving a copy of www/ from its
# file cache with `/echo` a 4-byte file "echo" (weft's /echo answers the same 4 bytes); each
# build's same-round CPU ratio to lwan is printed beside the one to nginx.
# CLIENT=lean drives the servers with scripts/clients/pipeline_client.c instead of wrk (built here; needs
# cc), LEAN_DEPTH requests per write (default 1: no pipelining): about 0.7x wrk's CPU per
# answer, so on a 2-core machine the server's core, not the client's, is the limit, and the
# server's CPU per request is its work rather than its work plus the sleeps a server that
# waits for its client pays (BENCHMARKS.md, "A client that is not the limit at /echo c=50").
set -u
out=$1; runs=$2; c=$3; path=$4; shift 4
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
if [[ ${CLIENT:-wrk} == lean ]]; then
  cc -O2 -o "$work/lean" scripts/clients/pipeline_client.c ||
    { echo "ab_builds: CLIENT=lean needs cc" >&2; rm -rf "$work"; exit 2; }
elif [[ ${CLIENT:-wrk} != wrk ]]; then
  echo "ab_builds: CLIENT is wrk or lean, not ${CLIENT}" >&2; rm -rf "$work"; exit 2
fi
declare -A PID PORT
port=18300; i=0
threads=${THREADS:-1}; score=${SERVER_CORES:-0}; ccore=${CLIENT_CORES:-1}; wrkt=${WRK_THREADS:-1}
root_flag=(); nginx_user=""
if ((EUID == 0)); then root_flag=(--allow-root); nginx_user="user root;"; fi
for arg in "$@"; do
  port=$((port + 1)); i=$((i + 1)); name="w$i"
  read -r -a words <<<"${arg%%@*}"; b=${words[0]}; flags=("${words[@]:1}"); config=()
  if [[ $arg == *@* ]]; then config=(--config "${arg#*@}"); fi
  # Connections unbounded, as the nginx peers' `keepalive_requests 1000000` (a build older
  # than the flag has no bound).
  ka=(); "$b" serve --help 2>/dev/null | grep -q -- --keepalive-requests && ka=(--keepalive-requests 1000000)
  taskset -c "$score" "$b" serve "${ka[@]}" "${root_flag[@]}" "${config[@]}" "${flags[@]}" --root www --threads "$threads" --listen "127.0.0.1:$port=${MODEL:-fiber}" >"$work/$name.log" 2>&1 &
  PID[$name]=$!; PORT[$name]=$port
done
port=$((port + 1))
sed -e "s|PORT|$port|; s|WWW_ROOT|$PWD/www|; s|^worker_processes 1;|$nginx_user worker_processes $threads;|" \
  "${NGINX_CONF:-scripts/peers/peer-nginx.conf}" >"$work/nginx.conf"
taskset -c "$score" nginx -p "$work" -c "$work/nginx.conf" >"$work/nginx.log" 2>&1 &
PID[nginx]=$!; PORT[nginx]=$port
if [[ -n ${LWAN:-} ]]; then
  [[ -x $LWAN ]] || { echo "ab_builds: LWAN=$LWAN is not an executable (scripts/peers/build_lwan.sh)" >&2; exit 2; }
  port=$((port + 1))
  cp -r www "$work/lwan-root"; printf echo >"$work/lwan-root/echo"
  sed -e "s|PORT|$port|; s|ROOT|$work/lwan-root|; s|^threads = 1|threads = $threads|" \
    scripts/peers/peer-lwan.conf >"$work/lwan.conf"
  lwan_bin=$(realpath "$LWAN")
  (cd "$work" && exec taskset -c "$score" "$lwan_bin" --config "$work/lwan.conf") >"$work/lwan.log" 2>&1 &
  PID[lwan]=$!; PORT[lwan]=$port
fi
# On exit the servers are stopped and waited for, so a next run can bind the same ports.
trap 'kill "${PID[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
source scripts/lib/wait_listening.sh
for n in "${!PID[@]}"; do wait_listening "$n" "${PORT[$n]}" "$work/$n.log"; done
HZ=$(getconf CLK_TCK)
# cpu_ticks PID: "user sys" ticks of PID and its children.
source scripts/lib/cpu_ticks.sh
echo "name,run,rps,cpu_us,user_us,sys_us" >"$out"
# Within a round the servers run in name order, and in the reverse order every other round,
# so that no server always runs right after the same one (an order effect would otherwise sit
# in every same-round ratio; A/A runs with the fixed order, 2026-11-28, showed none beyond the
# noise: 1.009 fiber, 1.007 pipeline).
names=$(printf '%s\n' "${!PID[@]}" | sort)
for r in $(seq 1 "$runs"); do
  order=$names
  if ((r % 2 == 0)); then order=$(tac <<<"$names"); fi
  for n in $order; do
    read -r u0 s0 < <(cpu_ticks "${PID[$n]}")
    if [[ ${CLIENT:-wrk} == lean ]]; then
      o=$(taskset -c "$ccore" "$work/lean" "127.0.0.1:${PORT[$n]}" "$path" "$c" "${LEAN_DEPTH:-1}" "${DURATION:-3}")
    else
      o=$(taskset -c "$ccore" wrk -t"$wrkt" -c"$c" -d"${DURATION:-3}s" ${WRK_SCRIPT:+-s "$WRK_SCRIPT"} \
        "http://127.0.0.1:${PORT[$n]}$path" ${WRK_SCRIPT:+-- ${WRK_SCRIPT_ARGS:-}})
    fi
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
lw = {r["run"]: float(r["cpu_us"]) for r in by.get("lwan", [])}
for n, rs in sorted(by.items()):
    if lw and n not in ("nginx", "lwan"):
        rat = [float(r["cpu_us"]) / lw[r["run"]] for r in rs]
        print(n, "/lwan median %.3f  runs %s" % (st.median(rat), " ".join("%.3f" % x for x in rat)))
w1 = {r["run"]: r for r in by.get("w1", [])}
for n, rs in sorted(by.items()):
    if n not in ("nginx", "w1") and w1:
        rq = [float(r["rps"]) / float(w1[r["run"]]["rps"]) for r in rs]
        cp = [float(r["cpu_us"]) / float(w1[r["run"]]["cpu_us"]) for r in rs]
        print(n, "/w1 same round: req/s median %.3f (%.3f-%.3f), CPU per request median %.3f (%.3f-%.3f)"
              % (st.median(rq), min(rq), max(rq), st.median(cp), min(cp), max(cp)))
PY
source scripts/lib/machine.sh
stamp
