#!/usr/bin/env bash
# weft-bench against wrk on the same server: is the load generator the bottleneck?
# One weft server (one worker) pinned to core 0; wrk -t1 and weft-bench load (one thread)
# pinned to core 1, alternating run by run; one CSV row per run (on stderr) and a table of
# the medians: requests per second and the client's own CPU per request.
#
#   RUNS=5 DURATION=3 CONNS=50 PATHS="/echo /haewelmann.html" scripts/clients/bench_vs_wrk.sh
#
# Needs wrk and release builds of weft and weft-bench
# (cargo build --release -p weft -p weft-bench).
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-5}; DURATION=${DURATION:-3}; CONNS=${CONNS:-50}
PATHS=${PATHS:-"/echo /haewelmann.html"}; PORT=${PORT:-18080}
WEFT=${WEFT:-target/release/weft}; BENCH=${BENCH:-target/release/weft-bench}
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)" >&2; exit 1; }
"$WEFT" fileset www >/dev/null

TIMES=$(mktemp)
taskset -c 0 "$WEFT" serve --keepalive-requests 1000000 --threads 1 --listen "127.0.0.1:$PORT" >/dev/null 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null; rm -f "$TIMES"' EXIT
sleep 1

# Each function prints "req/s,client CPU µs per request": CPU is the client's user+sys time
# (GNU time) over the requests it completed, which the machine's other load disturbs far less
# than requests per second.
cpu_s() { awk '{ print $1 + $2 }' "$TIMES"; }
# wrk prints "Requests/sec: N" and "N requests in"; errors as "Socket errors" / "Non-2xx" lines.
wrk_run() {
  local out; out=$(/usr/bin/time -o "$TIMES" -f "%U %S" taskset -c 1 wrk -t1 -c"$CONNS" -d"${DURATION}s" "$1")
  if grep -q -E "Socket errors|Non-2xx" <<<"$out"; then echo "# wrk $1: $(grep -E 'Socket errors|Non-2xx' <<<"$out")" >&2; fi
  local rps n; rps=$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out"); n=$(awk '/ requests in / { print $1 }' <<<"$out")
  echo "$rps,$(python3 -c "print(round($(cpu_s) * 1e6 / $n, 2))")"
}
bench_run() {
  local out; out=$(/usr/bin/time -o "$TIMES" -f "%U %S" taskset -c 1 "$BENCH" load -c"$CONNS" -d"${DURATION}s" --json "$1")
  CPU=$(cpu_s) python3 -c 'import json, os, sys
r = json.load(sys.stdin)
e = r["errors"]
if sum(e.values()): print("# weft-bench: errors", e, file=sys.stderr)
cpu = float(os.environ["CPU"]) * 1e6 / r["requests"]
print("%.1f,%.2f" % (r["requests_per_s"], cpu))' <<<"$out"
}

echo "path,client,run,rps,client_cpu_us_per_req"
for path in $PATHS; do
  for run in $(seq 1 "$RUNS"); do
    url="http://127.0.0.1:$PORT$path"
    echo "$path,wrk,$run,$(wrk_run "$url")"
    echo "$path,weft-bench,$run,$(bench_run "$url")"
  done
done | tee /dev/stderr | python3 -c '
import collections, statistics, sys
rows = collections.defaultdict(list)
for line in sys.stdin:
    path, client, run, rps, cpu = line.strip().split(",")
    if client != "client":
        rows[(path, client)].append((float(rps), float(cpu)))
print()
print("| path | wrk req/s | weft-bench req/s | ratio | wrk client µs CPU/req | weft-bench client µs CPU/req | ratio |")
print("|---|---|---|---|---|---|---|")
for path in dict.fromkeys(p for p, _ in rows):
    w, b = rows[(path, "wrk")], rows[(path, "weft-bench")]
    wr, br = statistics.median(r for r, _ in w), statistics.median(r for r, _ in b)
    wc, bc = statistics.median(c for _, c in w), statistics.median(c for _, c in b)
    print(f"| `{path}` | {wr:,.0f} | {br:,.0f} | **{br / wr:.3f}** | {wc:.2f} | {bc:.2f} | {bc / wc:.3f} |")
'
