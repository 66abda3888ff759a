#!/usr/bin/env bash
# The cost curve of busy keep-alive connections (the fibers paper's question): CPU per request
# and resident bytes per connection against how many connections are busy at once, for weft's
# fiber model, nginx (one worker, scripts/peers/peer-nginx.conf), lwan where it is built
# (scripts/peers/build_lwan.sh; one thread, scripts/peers/peer-lwan.conf, `/echo` a 4-byte
# file from its file cache) and, up to 5,000, weft's thread model. For each count, fresh servers (so no server keeps the memory of a larger count)
# on core 0, `wrk -t1 -cN` on core 1 asking /echo, ROUNDS rounds alternating the servers; RSS
# is read at the end of each run (nginx: its worker) less the server's RSS before the first
# run, over N.
#
#   scripts/peers/busy_sweep.sh OUT.csv      COUNTS="100 1000 5000 10000 15000" ROUNDS=3 DURATION=6
#   WEFT=target/release/weft (default)   LWAN=target/peers/lwan (default, where it exists; "" for none)
#
# Prints one row per run and, per count, the medians and the fiber/nginx ratio, and plots them
# beside OUT.csv (`weft-bench plot --series server`: OUT-cpu.svg/.png, OUT-rss.svg/.png). Needs wrk,
# nginx and an open-file limit above the largest count (20,000 here). Started as root, weft
# gets --allow-root and nginx `user root;`.
set -u
out=${1:?usage: busy_sweep.sh OUT.csv}
cd "$(dirname "$0")/../.." || exit 2
for tool in wrk nginx taskset python3; do
  command -v "$tool" >/dev/null || { echo "busy_sweep: $tool is missing (apt-get install wrk nginx-light)" >&2; exit 2; }
done
weft=${WEFT:-target/release/weft}
[[ -x $weft ]] || cargo build --release -q -p weft || exit 2
counts=${COUNTS:-100 1000 5000 10000 15000}
lwan=${LWAN-target/peers/lwan}
[[ -z $lwan || -x $lwan ]] || lwan=""
rounds=${ROUNDS:-3}
duration=${DURATION:-6}
root_flag=(); nginx_user=""
if ((EUID == 0)); then root_flag=(--allow-root); nginx_user="user root;"; fi
source scripts/lib/free_ports.sh
source scripts/lib/wait_listening.sh
source scripts/lib/cpu_ticks.sh
HZ=$(getconf CLK_TCK)
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
echo "server,connections,run,rps,cpu_us,rss_bytes_per_conn" >"$out"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
for n in $counts; do
  declare -A PID=() PORT=() BASE=() WATCH=()
  read -r pf pt pn pl < <(free_ports 4 | tr '\n' ' ')
  taskset -c 0 "$weft" serve "${root_flag[@]}" --root www --threads 1 --keepalive-requests 0 \
    --listen "127.0.0.1:$pf=fiber" >"$work/fiber.log" 2>&1 &
  PID[fiber]=$!; PORT[fiber]=$pf
  if ((n <= 5000)); then
    taskset -c 0 "$weft" serve "${root_flag[@]}" --root www --keepalive-requests 0 \
      --listen "127.0.0.1:$pt=thread" >"$work/thread.log" 2>&1 &
    PID[thread]=$!; PORT[thread]=$pt
  fi
  sed -e "s|PORT|$pn|; s|WWW_ROOT|$PWD/www|; s|^worker_processes 1;|$nginx_user worker_processes 1;|" \
    scripts/peers/peer-nginx.conf >"$work/nginx.conf"
  taskset -c 0 nginx -p "$work" -c "$work/nginx.conf" >"$work/nginx.log" 2>&1 &
  PID[nginx]=$!; PORT[nginx]=$pn
  if [[ -n $lwan ]]; then
    mkdir -p "$work/lwan-root"; printf echo >"$work/lwan-root/echo"
    sed -e "s|PORT|$pl|; s|ROOT|$work/lwan-root|" scripts/peers/peer-lwan.conf >"$work/lwan.conf"
    (cd "$work" && exec taskset -c 0 "$OLDPWD/$lwan" --config "$work/lwan.conf") >"$work/lwan.log" 2>&1 &
    PID[lwan]=$!; PORT[lwan]=$pl
  fi
  for s in "${!PID[@]}"; do wait_listening "$s" "${PORT[$s]}" "$work/$s.log"; done
  sleep 0.5
  for s in "${!PID[@]}"; do
    # nginx's memory is its worker's (the master only forks it).
    w=${PID[$s]}
    if [[ $s == nginx ]]; then w=$(pgrep -P "${PID[$s]}" | head -1); fi
    WATCH[$s]=$w; BASE[$s]=$(rss_kb "$w")
  done
  names=$(printf '%s\n' "${!PID[@]}" | sort)
  for r in $(seq 1 "$rounds"); do
    order=$names
    if ((r % 2 == 0)); then order=$(tac <<<"$names"); fi
    for s in $order; do
      read -r u0 s0 < <(cpu_ticks "${PID[$s]}")
      o=$(taskset -c 1 wrk -t1 -c"$n" -d"${duration}s" "http://127.0.0.1:${PORT[$s]}/echo")
      read -r u1 s1 < <(cpu_ticks "${PID[$s]}")
      rss=$(rss_kb "${WATCH[$s]}")
      reqs=$(awk '/requests in/ {print $1}' <<<"$o"); rps=$(awk '/Requests\/sec/ {print $2}' <<<"$o")
      awk -v s="$s" -v n="$n" -v r="$r" -v rps="$rps" -v t=$((u1 - u0 + s1 - s0)) -v q="$reqs" \
        -v hz="$HZ" -v rss="$rss" -v base="${BASE[$s]}" \
        'BEGIN { printf "%s,%d,%d,%s,%.3f,%.0f\n", s, n, r, rps, t / hz * 1e6 / q, (rss - base) * 1024 / n }' |
        tee -a "$out"
    done
  done
  kill "${PID[@]}" 2>/dev/null; wait 2>/dev/null
  unset PID PORT BASE WATCH
done
python3 - "$out" <<'PY'
import collections, csv, statistics as st, sys
rows = list(csv.DictReader(open(sys.argv[1])))
by = collections.defaultdict(list)
for r in rows:
    by[(int(r["connections"]), r["server"])].append(r)
print("connections,server,rps,cpu_us_per_request,rss_bytes_per_connection,cpu_vs_nginx_same_round")
for (n, s), rs in sorted(by.items()):
    ng = {r["run"]: float(r["cpu_us"]) for r in by.get((n, "nginx"), [])}
    ratio = [float(r["cpu_us"]) / ng[r["run"]] for r in rs if r["run"] in ng]
    print("%d,%s,%.0f,%.3f,%.0f,%s" % (n, s, st.median(float(r["rps"]) for r in rs),
          st.median(float(r["cpu_us"]) for r in rs), st.median(float(r["rss_bytes_per_conn"]) for r in rs),
          "%.3f" % st.median(ratio) if ratio and s != "nginx" else ""))
PY
bench=${BENCH:-target/release/weft-bench}
[[ -x $bench ]] || cargo build --release -q -p weft-bench || exit 2
stem=${out%.csv}
"$bench" plot "$out" --series server --log-x --x connections --y cpu_us --out "$stem-cpu" \
  --title "CPU per request against busy keep-alive connections (wrk -t1, /echo, one worker)" \
  --x-label "busy connections" --y-label "microseconds of CPU per request" >/dev/null
"$bench" plot "$out" --series server --log-x --x connections --y rss_bytes_per_conn --out "$stem-rss" \
  --title "Resident bytes per busy keep-alive connection" \
  --x-label "busy connections" --y-label "bytes per connection" >/dev/null
echo "plotted: $stem-cpu.svg, $stem-rss.svg (and .png)"
source scripts/lib/machine.sh
stamp
