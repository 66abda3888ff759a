#!/usr/bin/env bash
# Multi-core scaling (issue 25), for a machine with 16 or more cores:
#   A. weft's fiber model with N worker threads against nginx with N worker processes, each on
#      cores 0..N-1, N in WORKERS; /echo at CONNS connections from wrk -tWRK_THREADS pinned to
#      CLIENT_CORES. Requests/s, CPU per request, and how busy the server's and the client's
#      cores were (from /proc/stat), so a client-bound point shows as one.
#   B. the fiber model against the thread model (one OS thread per connection) and nginx, all on
#      cores 0..MAXW-1 (MAXW = the largest of WORKERS), /echo at c=50 and c=1000.
#   C. 16 requests pipelined per write, fiber against nginx on MAXW cores, CONNS connections.
#   D. A's scaling with 16 requests pipelined per write: the client spends far less per request
#      than the server there, so each point is bound by the server's cores, not by the client's.
# Each round runs every server of a table once in turn, RUNS rounds; the summary gives medians.
#
#   scripts/multicore/multicore.sh OUT_DIR
#   PARTS="A B C" (D on request) RUNS=3 DURATION=5 WORKERS="1 2 4 8" CONNS=256 CLIENT_CORES=8-15 WRK_THREADS=8
#   MIN_CORES=16 WEFT=target/release/weft; wrk, nginx, taskset and python3 from PATH.
#
# Writes OUT_DIR/multicore.csv (one row per run), OUT_DIR/summary.txt and OUT_DIR/machine.txt.
# The summary gives, per worker count, req/s over N times the one-worker req/s, the same-round
# fiber/nginx ratio, the CPU per request at one worker over that at N (a scaling figure the
# client cannot bound), and marks a point client-bound when the client's cores were >= 90% busy.
# Started as root, weft gets --allow-root and nginx `user root;` (a bare benchmark machine).
set -u
cd "$(dirname "$0")/../.."
out=${1:?usage: scripts/multicore/multicore.sh OUT_DIR}
mkdir -p "$out"
runs=${RUNS:-3}; dur=${DURATION:-5}; workers=${WORKERS:-1 2 4 8}; conns=${CONNS:-256}
client_cores=${CLIENT_CORES:-8-15}; wrk_threads=${WRK_THREADS:-8}
weft=${WEFT:-target/release/weft}
for tool in wrk nginx taskset python3; do
  command -v "$tool" >/dev/null || { echo "multicore: $tool is missing (apt-get install wrk nginx-light)" >&2; exit 2; }
done
[[ -x $weft ]] || { echo "multicore: $weft is not built (cargo build --release -p weft)" >&2; exit 2; }
maxw=0; for n in $workers; do ((n > maxw)) && maxw=$n; done
if (($(nproc) < ${MIN_CORES:-16})); then echo "multicore: needs ${MIN_CORES:-16} cores, this machine has $(nproc)" >&2; exit 2; fi
ulimit -n 65536 2>/dev/null || ulimit -n 20000 2>/dev/null || true
{
  echo "date: $(date -u +%FT%TZ)"; echo "cores: $(nproc)"; echo "kernel: $(uname -r)"
  grep -m1 'model name' /proc/cpuinfo; echo "weft: $($weft --version 2>&1 | head -1)"
  echo "nginx: $(nginx -v 2>&1)"; echo "wrk: $(wrk -v 2>&1 | head -1)"
  echo "cpu siblings: $(cat /sys/devices/system/cpu/cpu{0..15}/topology/thread_siblings_list 2>/dev/null | tr '\n' ' ')"
  echo "runs $runs, ${dur}s each, workers: $workers, conns $conns, client: wrk -t$wrk_threads on cores $client_cores"
} | tee "$out/machine.txt"

source scripts/lib/cpu_ticks.sh
source scripts/lib/wait_listening.sh
HZ=$(getconf CLK_TCK)
root_flag=(); nginx_user=""
if ((EUID == 0)); then root_flag=(--allow-root); nginx_user="user root;"; fi
work=$(mktemp -d)
declare -A PID PORT
trap 'kill "${PID[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
port=18500

# cores_busy CPULIST: busy and total jiffies summed over the cores of CPULIST (e.g. 0-3 or 8-15).
cores_busy() {
  python3 - "$1" <<'PY'
import sys
want = set()
for part in sys.argv[1].split(","):
    a, _, b = part.partition("-")
    want.update(range(int(a), int(b or a) + 1))
busy = total = 0
for line in open("/proc/stat"):
    f = line.split()
    if f[0].startswith("cpu") and f[0] != "cpu" and int(f[0][3:]) in want:
        v = [int(x) for x in f[1:]]
        total += sum(v[:8]); busy += sum(v[:8]) - v[3] - v[4]
print(busy, total)
PY
}

# start NAME MODEL N: a server on cores 0..N-1 (MODEL fiber, thread or nginx).
start() {
  local name=$1 model=$2 n=$3
  port=$((port + 1)); PORT[$name]=$port
  if [[ $model == nginx ]]; then
    mkdir -p "$work/$name"
    sed -e "s|PORT|$port|; s|WWW_ROOT|$PWD/www|; s|^worker_processes 1;|$nginx_user worker_processes $n;|" \
      scripts/peers/peer-nginx.conf >"$work/$name/nginx.conf"
    taskset -c "0-$((n - 1))" nginx -e stderr -p "$work/$name" -c "$work/$name/nginx.conf" >"$work/$name.log" 2>&1 &
  else
    taskset -c "0-$((n - 1))" "$weft" serve "${root_flag[@]}" --root www --threads "$n" \
      --listen "127.0.0.1:$port=$model" >"$work/$name.log" 2>&1 &
  fi
  PID[$name]=$!
  wait_listening "$name" "$port" "$work/$name.log"
  taskset -c "$client_cores" wrk -t"$wrk_threads" -c"$conns" -d1s "http://127.0.0.1:$port/echo" >/dev/null # warm-up
}

stop_all() {
  kill "${PID[@]}" 2>/dev/null; wait 2>/dev/null; PID=(); PORT=()
}

# measure PART WORKERS NAME CONNS RUN SERVER_CORES [WRK_SCRIPT ARGS]: one wrk run, one CSV row.
measure() {
  local part=$1 n=$2 name=$3 c=$4 r=$5 scores=$6 script=${7:-} sargs=${8:-}
  local u0 s0 u1 s1 sb0 st0 sb1 st1 cb0 ct0 cb1 ct1 o
  read -r u0 s0 < <(cpu_ticks "${PID[$name]}")
  read -r sb0 st0 < <(cores_busy "$scores"); read -r cb0 ct0 < <(cores_busy "$client_cores")
  o=$(taskset -c "$client_cores" wrk -t"$wrk_threads" -c"$c" -d"${dur}s" ${script:+-s "$script"} \
    "http://127.0.0.1:${PORT[$name]}/echo" ${script:+-- $sargs})
  read -r u1 s1 < <(cpu_ticks "${PID[$name]}")
  read -r sb1 st1 < <(cores_busy "$scores"); read -r cb1 ct1 < <(cores_busy "$client_cores")
  awk -v p="$part" -v w="$n" -v n="${name%%-*}" -v c="$c" -v r="$r" \
    -v q="$(awk '/requests in/ {print $1}' <<<"$o")" -v rps="$(awk '/Requests\/sec/ {print $2}' <<<"$o")" \
    -v err="$(awk '/Non-2xx|Socket errors/ {printf "%s;", $0}' <<<"$o")" \
    -v t=$((u1 - u0 + s1 - s0)) -v hz="$HZ" -v sb=$((sb1 - sb0)) -v st=$((st1 - st0)) \
    -v cb=$((cb1 - cb0)) -v ct=$((ct1 - ct0)) 'BEGIN {
      printf "%s,%d,%s,%d,%d,%s,%.3f,%.3f,%.3f,%s\n", p, w, n, c, r, rps, t / hz * 1e6 / q,
        st ? sb / st : 0, ct ? cb / ct : 0, err }' | tee -a "$out/multicore.csv"
}

echo "part,workers,server,conns,run,rps,cpu_us_per_req,server_cores_busy,client_cores_busy,errors" >"$out/multicore.csv"
parts=${PARTS:-A B C}
if [[ $parts == *A* ]]; then
echo "== A. fiber vs nginx, /echo c=$conns, workers: $workers"
for n in $workers; do
  start "fiber-$n" fiber "$n"; start "nginx-$n" nginx "$n"
  for r in $(seq 1 "$runs"); do
    measure A "$n" "fiber-$n" "$conns" "$r" "0-$((n - 1))"
    measure A "$n" "nginx-$n" "$conns" "$r" "0-$((n - 1))"
  done
  stop_all
done
fi

if [[ $parts == *B* ]]; then
echo "== B. fiber vs thread vs nginx on $maxw cores, /echo c=50 and c=1000"
start "fiber-B" fiber "$maxw"; start "thread-B" thread "$maxw"; start "nginx-B" nginx "$maxw"
for c in 50 1000; do
  for r in $(seq 1 "$runs"); do
    for s in fiber thread nginx; do measure B "$maxw" "$s-B" "$c" "$r" "0-$((maxw - 1))"; done
  done
done
stop_all
fi

if [[ $parts == *C* ]]; then
echo "== C. 16 pipelined per write, fiber vs nginx on $maxw cores, c=$conns"
start "fiber-C" fiber "$maxw"; start "nginx-C" nginx "$maxw"
for r in $(seq 1 "$runs"); do
  for s in fiber nginx; do measure C "$maxw" "$s-C" "$conns" "$r" "0-$((maxw - 1))" scripts/clients/pipeline.lua 16; done
done
stop_all
fi

if [[ $parts == *D* ]]; then
echo "== D. 16 pipelined per write, fiber vs nginx, c=$conns, workers: $workers"
for n in $workers; do
  start "fiber-D$n" fiber "$n"; start "nginx-D$n" nginx "$n"
  for r in $(seq 1 "$runs"); do
    for s in fiber nginx; do measure D "$n" "$s-D$n" "$conns" "$r" "0-$((n - 1))" scripts/clients/pipeline.lua 16; done
  done
  stop_all
done
fi

python3 - "$out/multicore.csv" <<'PY' | tee "$out/summary.txt"
import collections, csv, statistics as st, sys
rows = list(csv.DictReader(open(sys.argv[1])))
g = collections.defaultdict(list)
for r in rows:
    g[(r["part"], int(r["workers"]), int(r["conns"]), r["server"])].append(r)
med = lambda rs, k: st.median(float(r[k]) for r in rs)
print("part workers conns server    req/s  cpu_us/req  server_busy client_busy")
for k in sorted(g):
    rs = g[k]
    print("%-4s %7d %5d %-7s %9.0f %10.3f %10.2f %11.2f" % (k + (med(rs, "rps"), med(rs, "cpu_us_per_req"),
          med(rs, "server_cores_busy"), med(rs, "client_cores_busy"))))
for part, what in (("A", ""), ("D", ", 16 pipelined per write")):
    a = {(w, s): med(rs, "rps") for (p, w, c, s), rs in g.items() if p == part}
    cpu = {(w, s): med(rs, "cpu_us_per_req") for (p, w, c, s), rs in g.items() if p == part}
    busy = {(w, s): med(rs, "client_cores_busy") for (p, w, c, s), rs in g.items() if p == part}
    ws = sorted({w for w, s in a})
    if not ws:
        continue
    print("\n%s%s: scaling of req/s from %d worker (linear = 1.00), fiber/nginx req/s, and CPU per" % (part, what, ws[0]))
    print("request at 1 worker over CPU per request at N (1.00: no per-request cost of more workers):")
    for w in ws:
        f, n = a.get((w, "fiber")), a.get((w, "nginx"))
        fl = f / (a[(ws[0], "fiber")] * w / ws[0]); nl = n / (a[(ws[0], "nginx")] * w / ws[0])
        fc = cpu[(ws[0], "fiber")] / cpu[(w, "fiber")]; nc = cpu[(ws[0], "nginx")] / cpu[(w, "nginx")]
        bound = "  (client-bound: its cores %.0f%% busy)" % (100 * busy[(w, "fiber")]) if busy[(w, "fiber")] >= 0.9 else ""
        print("  %d workers: fiber %.2f  nginx %.2f  fiber/nginx %.3f  CPU efficiency fiber %.2f nginx %.2f%s"
              % (w, fl, nl, f / n, fc, nc, bound))
for p in "BC":
    for c in sorted({c for (pp, w, c, s) in g if pp == p}):
        x = {s: med(rs, "rps") for (pp, w, cc, s), rs in g.items() if pp == p and cc == c}
        if "fiber" in x:
            print("%s c=%d: " % (p, c) + "  ".join("fiber/%s req/s %.3f" % (s, x["fiber"] / v) for s, v in sorted(x.items()) if s != "fiber"))
PY
