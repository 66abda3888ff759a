#!/usr/bin/env bash
# The pipeline's thread allocations under a saturating SPECweb99-like load (issue 7): the
# controller against fixed allocations (the default start, an equal split of M, and others
# to find the best static one), alternating run by run, medians of RUNS.
#
#   RUNS=5 CLIENTS=300 DUR=8s scripts/pipeline_alloc.sh
#
# The server (pipeline model, M = 16) is pinned to core 0, `weft-bench specweb` to core 1,
# each connection unpaced (--pace-kbit 0) so the server is the bottleneck. ROOT holds the
# file set (written there when missing). ALLOCS overrides the list ("ctl" = controller on
# from the default start; "a r p s" = that allocation, controller off). Output: one line per
# run, then the medians; raw lines in OUT (default bench/results/pipeline-alloc.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
CLIENTS=${CLIENTS:-300}
DUR=${DUR:-8s}
ROOT=${ROOT:-/tmp/swroot}
PORT=${PORT:-8096}
OUT=${OUT:-bench/results/pipeline-alloc.txt}
WEFT=${WEFT:-target/release/weft}
BENCH=${BENCH:-target/release/weft-bench}
if [[ -z "${ALLOCS:-}" ]]; then
  ALLOCS=("ctl" "1 2 2 2" "4 4 4 4" "1 1 1 1" "1 1 1 3" "1 1 2 6" "1 1 4 4" "2 2 6 6")
else
  IFS=';' read -r -a ALLOCS <<<"$ALLOCS"
fi
[[ -x $WEFT && -x $BENCH ]] || cargo build --release -p weft -p weft-bench
[[ -d $ROOT/specweb ]] || "$BENCH" fileset-specweb "$ROOT/specweb" -c "$CLIENTS"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: >"$OUT"

run_one() { # $1 = allocation
  local conf=$work/p.toml a r p s ctl
  if [[ $1 == ctl ]]; then
    printf '[pipeline]\ncontroller = true\n' >"$conf"
  else
    read -r a r p s <<<"$1"
    printf '[pipeline]\ncontroller = false\naccept = %s\nreceive = %s\nprocess = %s\nsend = %s\n' \
      "$a" "$r" "$p" "$s" >"$conf"
  fi
  taskset -c 0 "$WEFT" serve --config "$conf" --root "$ROOT" \
    --listen "127.0.0.1:$PORT=pipeline" >"$work/server.log" 2>&1 &
  local pid=$!
  for _ in $(seq 50); do
    curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break
    sleep 0.1
  done
  local ops
  ops=$(taskset -c 1 "$BENCH" specweb "http://127.0.0.1:$PORT/specweb/" -c "$CLIENTS" -d "$DUR" \
    --pace-kbit 0 | sed -n 's/.* requests, \([0-9.]*\) ops\/s.*/\1/p')
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  echo "$1,${ops:-0}" | tee -a "$OUT"
}

for ((run = 0; run < RUNS; run++)); do
  # Rotate the order each run so no allocation always follows the same one.
  n=${#ALLOCS[@]}
  for ((i = 0; i < n; i++)); do
    run_one "${ALLOCS[$(((i + run) % n))]}"
  done
done

echo "# medians of $RUNS runs, $CLIENTS unpaced clients, $DUR each (ops/s)"
python3 - "$OUT" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    k, v = line.rsplit(",", 1)
    rows.setdefault(k, []).append(float(v))
med = {k: statistics.median(v) for k, v in rows.items()}
static = {k: v for k, v in med.items() if k != "ctl"}
best = max(static, key=static.get)
for k, v in med.items():
    print(f"{k:>10}: {v:9.0f}  (runs {min(rows[k]):.0f}-{max(rows[k]):.0f})")
if "ctl" in med:
    print(f"controller / best static ({best}): {med['ctl'] / static[best]:.3f}")
    if "4 4 4 4" in med:
        print(f"controller / equal split (4 4 4 4): {med['ctl'] / med['4 4 4 4']:.3f}")
EOF
