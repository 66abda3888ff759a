#!/bin/bash
# CPU per keep-alive request of the process model, builds alternating: each BIN serves /echo
# (`--threads 1`, core 0), `wrk -t1 -c10 -d3s` on core 1; the CPU of the server, its master and
# the children the master has reaped (counted once their connections close), per request.
#
#   scripts/perf/process_ka_cpu.sh BIN...     ROUNDS=5
cd "$(dirname "$0")/../.."
tree_ticks() { local t=0; for p in $1 $(cat /proc/$1/task/*/children 2>/dev/null); do t=$((t + $(awk '{print $14+$15+$16+$17}' /proc/$p/stat))); done; echo $t; }
port=18900; hz=$(getconf CLK_TCK)
for ((round = 0; round < ${ROUNDS:-5}; round++)); do for b in "$@"; do
  port=$((port+1))
  taskset -c 0 $b serve --allow-root --root www --threads 1 --listen 127.0.0.1:$port=process >/dev/null 2>&1 & pid=$!
  sleep 0.6
  a=$(tree_ticks $pid)
  n=$(taskset -c 1 wrk -t1 -c10 -d3s http://127.0.0.1:$port/echo | awk '/requests in/ {print $1}')
  sleep 0.7
  c=$(tree_ticks $pid)
  awk -v b="$b" -v t=$((c - a)) -v n="$n" -v hz="$hz" 'BEGIN {printf "%s %d req %.2f us/req\n", b, n, t * 1e6 / hz / n}'
  kill $pid; wait $pid 2>/dev/null
done; done
