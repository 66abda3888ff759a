#!/usr/bin/env bash
# Two weft builds under the threads-vs-processes paper's client: mean completion time of a GET
# on a fresh connection (`weft-bench groups`: 2 clients x 20 groups x 12 concurrent), the two
# builds alternating round by round, each on core 0 with one thread, the client on core 1.
# Prints each round and the median of the per-round ratios B/A.
#
#   A=OLD_WEFT B=NEW_WEFT MODEL=process FILE=/files/1k.bin ROUNDS=7 scripts/perf/groups_ab.sh
#
# Needs taskset and python3; builds target/release/weft-bench if it is missing. Started as
# root, the servers get --allow-root.
set -u
cd "$(dirname "$0")/../.." || exit 2
a=${A:?A=the first weft binary}
b=${B:-target/release/weft}
model=${MODEL:-process}
file=${FILE:-/files/1k.bin}
rounds=${ROUNDS:-7}
bench=${BENCH:-target/release/weft-bench}
[[ -x $bench ]] || cargo build --release -q -p weft-bench || exit 2
for tool in taskset python3; do
  command -v "$tool" >/dev/null || { echo "groups_ab: $tool is missing" >&2; exit 2; }
done
root=()
[[ $(id -u) == 0 ]] && root=(--allow-root)
pids=()
port=18181
for bin in "$a" "$b"; do
  taskset -c 0 "$bin" serve --root www --threads 1 --listen "127.0.0.1:$port=$model" \
    --access-log off "${root[@]}" >"/tmp/groups_ab.$port.log" 2>&1 &
  pids+=($!)
  port=$((port + 1))
done
trap 'kill "${pids[@]}" 2>/dev/null' EXIT
sleep 1
mean() {
  taskset -c 1 "$bench" groups "http://127.0.0.1:$1$file" --json |
    python3 -c 'import json,sys; print("%.3f" % json.load(sys.stdin)["avg_ms"])'
}
ratios=()
echo "round,a_ms,b_ms,b_over_a"
for r in $(seq "$rounds"); do
  x=$(mean 18181) || exit 1
  y=$(mean 18182) || exit 1
  q=$(python3 -c "print('%.3f' % ($y / $x))")
  ratios+=("$q")
  echo "$r,$x,$y,$q"
done
python3 -c 'import statistics,sys; v=[float(x) for x in sys.argv[1:]]; print("B/A median %.3f (%.3f-%.3f)" % (statistics.median(v), min(v), max(v)))' "${ratios[@]}"
