#!/usr/bin/env bash
# The pipeline's thread allocations under a saturating SPECweb99-like load (issue 7): the
# controller against fixed allocations (the default start, an equal split of M, and others
# to find the best static one), alternating run by run, medians of RUNS; the throughput of
# the whole run and of its steady state (from second WARM, default 2).
#
#   RUNS=5 CLIENTS=300 DUR=8s scripts/paper-runs/pipeline_alloc.sh
#   DYNAMIC=30 DELAY=5ms RUNS=5 CLIENTS=300 DUR=15s scripts/paper-runs/pipeline_alloc.sh
#
# DYNAMIC=PCT makes that share of operations dynamic (SPECweb99: 30%): the server proxies
# /dyn/ to `weft-bench backend` (core 1, beside the client), which answers after DELAY, so the
# process stage's threads block on it as they would on a database or a disk.
#
# The server (pipeline model, M = 16) is pinned to core 0, `weft-bench specweb` to core 1,
# each connection unpaced (--pace-kbit 0) so the server is the bottleneck. ROOT holds the
# file set (written there when missing). ALLOCS overrides the list ("ctl" = controller on
# from the default start; "ctl:a r p s" = the controller from that start; "a r p s" = that
# allocation, controller off; "fiber" = weft's fiber
# model with one worker and "nginx" = nginx with one worker, as peers on the same load, with
# /dyn/ proxied to the backend, upstream keep-alive on). Output: one line per
# run (allocation, ops/s whole, ops/s steady, round), then the medians and, per allocation,
# the median of the controller's ratio to it within each round; raw lines in OUT (default
# bench/results/pipeline-alloc.txt), the allocations each controller run held in OUT.ctl,
# each run's mean response time, weighted bandwidth and conforming share in OUT.metrics.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-5}
CLIENTS=${CLIENTS:-300}
DUR=${DUR:-8s}
ROOT=${ROOT:-/tmp/swroot}
PORT=${PORT:-8096}
OUT=${OUT:-bench/results/pipeline-alloc.txt}
WEFT=${WEFT:-target/release/weft}
BENCH=${BENCH:-target/release/weft-bench}
DYNAMIC=${DYNAMIC:-0}
DELAY=${DELAY:-5ms}
WARM=${WARM:-2}
BACKEND_PORT=${BACKEND_PORT:-9000}
dynamic_on=$(awk -v d="$DYNAMIC" 'BEGIN { print (d + 0 > 0) ? 1 : 0 }')
if [[ -z "${ALLOCS:-}" && $dynamic_on == 1 ]]; then
  ALLOCS=("ctl" "1 2 2 2" "4 4 4 4" "1 1 12 2" "1 1 13 1" "1 2 11 2" "2 2 8 4")
elif [[ -z "${ALLOCS:-}" ]]; then
  ALLOCS=("ctl" "1 2 2 2" "4 4 4 4" "1 1 1 1" "1 1 1 3" "1 1 2 6" "1 1 4 4" "2 2 6 6")
else
  IFS=';' read -r -a ALLOCS <<<"$ALLOCS"
fi
[[ -x $WEFT && -x $BENCH ]] || cargo build --release -p weft -p weft-bench
[[ -d $ROOT/specweb ]] || "$BENCH" fileset-specweb "$ROOT/specweb" -c "$CLIENTS"
work=$(mktemp -d)
backend=
server=
locker=
cleanup() {
  [[ -z $server ]] || kill "$server" 2>/dev/null || true
  [[ -z $backend ]] || kill "$backend" 2>/dev/null || true
  [[ -z $locker ]] || kill "$locker" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
# LOCK=1 (the default where vmtouch is installed: apt-get install vmtouch) locks the file set
# into the page cache for the whole series (mlock through `vmtouch -l`), so that no run reads
# from disk what another found in memory: a VM that reclaims idle page cache (a DAMON pageout
# scheme) otherwise sends part of the file set to disk between runs, and the spread of the
# runs then hides the allocations' differences. LOCK=0 only reads it once beforehand, so the
# first run does not pay for what the later ones find in the page cache.
LOCK=${LOCK:-$(command -v vmtouch >/dev/null && echo 1 || echo 0)}
if [[ $LOCK == 1 ]]; then
  vmtouch -l -m 64G "$ROOT/specweb" >"$work/vmtouch.log" 2>&1 &
  locker=$!
  # Locked when the kernel's count of locked memory stops growing.
  prev=-1
  while :; do
    sleep 2
    kill -0 "$locker" 2>/dev/null || { echo "vmtouch failed:" >&2; cat "$work/vmtouch.log" >&2; exit 1; }
    now=$(awk '/^Mlocked:/ { print $2 }' /proc/meminfo)
    [[ $now == "$prev" ]] && break
    prev=$now
  done
  echo "# file set locked in memory: $((now / 1024)) MiB locked" >&2
else
  find "$ROOT/specweb" -type f -exec cat {} + >/dev/null
fi
: >"$OUT"
: >"$OUT.ctl"
: >"$OUT.metrics"
extra=(--timeline)
proxy=
if [[ $dynamic_on == 1 ]]; then
  taskset -c 1 "$BENCH" backend --listen "127.0.0.1:$BACKEND_PORT" --delay "$DELAY" \
    >"$work/backend.log" 2>&1 &
  backend=$!
  for _ in $(seq 50); do
    curl -s -o /dev/null "http://127.0.0.1:$BACKEND_PORT/" && break
    sleep 0.1
  done
  if ! kill -0 "$backend" 2>/dev/null; then
    echo "weft-bench backend did not start:" >&2
    cat "$work/backend.log" >&2
    exit 1
  fi
  extra+=(--dynamic "$DYNAMIC" --dynamic-prefix /dyn/)
  proxy=$(printf '[[proxy]]\nprefix = "/dyn/"\nupstream = "http://127.0.0.1:%s"\n' "$BACKEND_PORT")
fi

run_one() { # $1 = allocation
  local conf=$work/p.toml a r p s ctl model=pipeline
  if [[ $1 == nginx ]]; then
    sed -e "s|PORT|$PORT|; s|WWW_ROOT|$ROOT|" scripts/peers/peer-nginx.conf >"$work/nginx.conf"
    sed -i "s|^    server {|    upstream backend { server 127.0.0.1:$BACKEND_PORT; keepalive 32; }\n    server {\n        location /dyn/ { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection \"\"; }|" \
      "$work/nginx.conf"
    grep -q 'location /dyn/' "$work/nginx.conf" || { echo "nginx.conf: no /dyn/ location" >&2; exit 1; }
  elif [[ $1 == fiber ]]; then
    printf 'threads = 1\n' >"$conf"
    model=fiber
  else
    # "ctl" and "ctl:a r p s": the controller (its history on the status page) from the
    # default start or that one; "a r p s": that allocation held.
    local start=$1
    if [[ $1 == ctl* ]]; then
      printf '[status]\nenabled = true\n[pipeline]\ncontroller = true\n' >"$conf"
      start=${1#ctl}
      start=${start#:}
    else
      printf '[pipeline]\ncontroller = false\n' >"$conf"
    fi
    if [[ -n $start ]]; then
      read -r a r p s <<<"$start"
      printf 'accept = %s\nreceive = %s\nprocess = %s\nsend = %s\n' "$a" "$r" "$p" "$s" >>"$conf"
    fi
  fi
  [[ -z $proxy ]] || echo "$proxy" >>"$conf"
  if [[ $1 == nginx ]]; then
    taskset -c 0 nginx -p "$work" -c "$work/nginx.conf" >"$work/server.log" 2>&1 &
  else
    taskset -c 0 "$WEFT" serve --config "$conf" --root "$ROOT" \
      --listen "127.0.0.1:$PORT=$model" >"$work/server.log" 2>&1 &
  fi
  local pid=$!
  server=$pid
  for _ in $(seq 50); do
    curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break
    sleep 0.1
  done
  local out ops steady
  out=$(taskset -c 1 "$BENCH" specweb "http://127.0.0.1:$PORT/specweb/" -c "$CLIENTS" -d "$DUR" \
    --pace-kbit 0 "${extra[@]}")
  if [[ $1 == ctl* ]]; then
    # The allocations the controller held during the load (the history's last 60 s, of
    # which the last second, after the load, is left out), most held first, beside OUT
    # (a controller from another start is named first on its line).
    [[ $1 == ctl ]] || printf '%s: ' "$1" >>"$OUT.ctl"
    curl -s "http://127.0.0.1:$PORT/_weft/status.json" | python3 -c '
import collections, json, sys
h = json.load(sys.stdin)["listeners"][0]["pipeline"]["history"]
end = h[-1]["t"] - 1.0
n = collections.Counter(tuple(x["threads"]) for x in h if x["t"] <= end and x["u"] > 0.01)
print(" ".join(f"{list(k)}x{v}" for k, v in n.most_common()))' >>"$OUT.ctl" || true
  fi
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  server=
  local errors
  errors=$(sed -n 's/^ *errors \([0-9]*\).*/\1/p' <<<"$out")
  if [[ ${errors:-1} != 0 ]]; then
    # A failed request (a 502 from a dead backend, a 404 from a wrong route) is cheap and
    # would inflate ops/s: such a run is reported and not counted.
    echo "# $1: ${errors:-?} errors, run not counted" | tee -a "$OUT.errors" >&2
    return
  fi
  ops=$(sed -n 's/.* requests, \([0-9.]*\) ops\/s.*/\1/p' <<<"$out")
  # Steady state: the operations of the seconds from WARM on (SPECweb99 leaves out a
  # ramp-up period too); the last second is left out (it can be cut short).
  steady=$(awk -F, -v warm="$WARM" '/^[0-9]+,/ { n[$1] = $3; last = $1 }
    END { s = 0; c = 0; for (i = warm; i < last; i++) { s += n[i]; c++ }
          if (c > 0) printf "%.1f", s / c; else print 0 }' <<<"$out")
  echo "$1,${ops:-0},${steady:-0},$run" | tee -a "$OUT"
  # The SPECweb99 figures of the whole run beside ops/s: mean response time, weighted
  # bandwidth (per connection) and the share of conforming connections.
  awk -v a="$1" -v r="$run" '/mean response/ { for (i = 1; i <= NF; i++) if ($i == "response") m = $(i + 1) }
    /weighted bandwidth/ { w = $3 }
    /conforming \(/ { c = $NF; gsub(/[()%]/, "", c) }
    END { printf "%s,%s,%s,%s,%s\n", a, r, m, w, c }' <<<"$out" >>"$OUT.metrics"
}

for ((run = 0; run < RUNS; run++)); do
  # Rotate the order each run so no allocation always follows the same one.
  n=${#ALLOCS[@]}
  for ((i = 0; i < n; i++)); do
    run_one "${ALLOCS[$(((i + run) % n))]}"
  done
done

echo "# medians of $RUNS runs, $CLIENTS unpaced clients, $DUR each, dynamic $DYNAMIC% (delay $DELAY)"
echo "# ops/s over the whole run, and steady (whole seconds from second $WARM on)"
python3 - "$OUT" <<'EOF'
import statistics, sys
rows = {}
rounds = {}
for line in open(sys.argv[1]):
    k, whole, steady, rnd = line.strip().rsplit(",", 3)
    rows.setdefault(k, []).append((float(whole), float(steady)))
    rounds.setdefault(rnd, {})[k] = (float(whole), float(steady))
for col, name in ((0, "whole run"), (1, "steady")):
    med = {k: statistics.median(v[col] for v in r) for k, r in rows.items()}
    static = {k: v for k, v in med.items() if k not in ("fiber", "nginx") and not k.startswith("ctl")}
    best = max(static, key=static.get) if static else None
    print(f"## {name}")
    for k, v in med.items():
        lo = min(x[col] for x in rows[k])
        hi = max(x[col] for x in rows[k])
        print(f"{k:>10}: {v:9.0f}  (runs {lo:.0f}-{hi:.0f})")
    if "ctl" in med and best:
        print(f"controller / best static ({best}): {med['ctl'] / static[best]:.3f}")
        if "4 4 4 4" in med:
            print(f"controller / equal split (4 4 4 4): {med['ctl'] / med['4 4 4 4']:.3f}")
        for peer in ("fiber", "nginx"):
            if peer in med:
                print(f"controller / {peer}: {med['ctl'] / med[peer]:.3f}")
        # The machine's speed drifts between rounds more than within one: the controller
        # against each allocation run in the same round, the median of those ratios.
        for k in med:
            if k == "ctl":
                continue
            r = [d["ctl"][col] / d[k][col] for d in rounds.values() if "ctl" in d and k in d and d[k][col] > 0]
            if r:
                print(f"paired controller / {k}: median {statistics.median(r):.3f} "
                      f"(rounds {' '.join(f'{x:.3f}' for x in r)})")
print("## whole run, medians: mean response ms, weighted bandwidth kbit/s, conforming %")
m = {}
for line in open(sys.argv[1] + ".metrics"):
    k, _, *v = line.strip().rsplit(",", 4)
    try:
        m.setdefault(k, []).append([float(x) for x in v])
    except ValueError:
        continue
for k, r in m.items():
    med = [statistics.median(x[i] for x in r) for i in range(3)]
    print(f"{k:>10}: {med[0]:8.2f} ms  {med[1]:8.1f} kbit/s  {med[2]:5.1f}%")
EOF
