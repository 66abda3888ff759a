#!/usr/bin/env bash
# Failed requests when an upstream server dies under load, per model: three weft backends in
# an `[[upstream]]` group behind a weft front (health checks every 200 ms), `weft-bench load
# -c 20` through the front for DURATION seconds.
#   killed: one backend is SIGKILLed half-way (passive health and retries: the try that meets
#           the dead server goes to the next one; no request may fail);
#   down:   one backend is SIGKILLed before the load, after the health checks marked it down
#           (no request may even meet it).
# Prints the client's errors and status classes per case, and the front's
# weft_upstream_requests_total / failures_total for the killed server.
#
#   scripts/checks/upstream_failover.sh        DURATION=6 MODELS="fiber thread process pipeline"
#
# The front on core 0, the backends and the client on core 1. Needs taskset, python3, curl and
# the release builds (`cargo build --release -p weft -p weft-bench`).
set -u
cd "$(dirname "$0")/../.." || exit 2
dur=${DURATION:-6}; models=${MODELS:-fiber thread process pipeline}
weft=${WEFT:-target/release/weft}; bench=${WEFT_BENCH:-target/release/weft-bench}
for b in "$weft" "$bench"; do
  [[ -x $b ]] || { echo "upstream_failover: $b not built (cargo build --release -p weft -p weft-bench)" >&2; exit 2; }
done
for tool in taskset python3 curl; do
  command -v "$tool" >/dev/null || { echo "upstream_failover: $tool is missing" >&2; exit 2; }
done
root_flag=(); ((EUID == 0)) && root_flag=(--allow-root)
work=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/root"
echo ok >"$work/root/who.txt"
port=19300
wait_port() {
  for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$1/" && return 0
    sleep 0.05
  done
  echo "upstream_failover: nothing on port $1" >&2; return 1
}
# metric NAME SERVER: the front's value of NAME for SERVER.
metric() {
  curl -s "http://127.0.0.1:$front/_weft/metrics" | python3 -c '
import sys
name, server = sys.argv[1], sys.argv[2]
for l in sys.stdin:
    if l.startswith(name + "{") and ("server=\"" + server + "\"") in l:
        print(l.rsplit(" ", 1)[1].strip()); break
else:
    print("-")' "$1" "$2"
}
echo "model,case,requests,2xx,5xx,connect_errors,read_errors,timeouts,killed_server_requests,killed_server_failures"
for model in $models; do
  for case in killed down; do
    backs=()
    for i in 1 2 3; do
      port=$((port + 1))
      taskset -c 1 "$weft" serve "${root_flag[@]}" --root "$work/root" --threads 1 --health /healthz \
        --access-log off --listen "127.0.0.1:$port=fiber" >"$work/back-$model-$case-$i.log" 2>&1 &
      pids+=($!); backs+=("$!:$port")
      wait_port "$port" || exit 1
    done
    port=$((port + 1)); front=$port
    list=$(printf '"127.0.0.1:%s", ' "${backs[@]#*:}")
    cat >"$work/front.toml" <<EOF
[[upstream]]
name = "app"
servers = [${list%, }]

[upstream.health]
path = "/healthz"
interval = "200ms"

[[proxy]]
prefix = "/who.txt"
upstream = "upstream:app"
EOF
    taskset -c 0 "$weft" serve "${root_flag[@]}" --config "$work/front.toml" --root "$work/root" \
      --threads 1 --status --access-log off --keepalive-requests 1000000 \
      --listen "127.0.0.1:$front=$model" >"$work/front-$model-$case.log" 2>&1 &
    pids+=($!)
    wait_port "$front" || exit 1
    victim=${backs[1]%%:*}; vport=${backs[1]#*:}
    if [[ $case == down ]]; then
      { kill -9 "$victim" && wait "$victim"; } 2>/dev/null
      sleep 1.5  # fall = 3 checks at 200 ms, with room
      (:) &
    else
      (sleep "$((dur / 2))"; kill -9 "$victim") &
    fi
    out=$(taskset -c 1 "$bench" load -c 20 -d "${dur}s" --json "http://127.0.0.1:$front/who.txt" 2>/dev/null)
    wait $! 2>/dev/null
    reqs=$(metric weft_upstream_requests_total "127.0.0.1:$vport")
    fails=$(metric weft_upstream_failures_total "127.0.0.1:$vport")
    python3 -c '
import json, sys
j = json.loads(sys.stdin.read()); e = j["errors"]; s = j["statuses"]
print(",".join(map(str, [sys.argv[1], sys.argv[2], j["requests"], s["2xx"], s["5xx"],
      e["connect"], e["read"], e["timeout"], sys.argv[3], sys.argv[4]])))' \
      "$model" "$case" "$reqs" "$fails" <<<"$out"
    kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; pids=()
  done
done
