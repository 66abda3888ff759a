#!/usr/bin/env bash
# A connection per request (as ab without -k): two servers alternating run by run, the server
# on core 0 and weft-bench on core 1, `weft-bench load -c50 -d4s --no-keepalive` with the
# server's CPU per request from /proc. Prints "PATH NAME req/s us-CPU/request" per run.
#
#   A=/path/to/old/weft B=target/release/weft RUNS=5 scripts/perf/close_ab.sh
#   A=nginx B=target/release/weft scripts/perf/close_ab.sh      # nginx: one worker, access log off
#
# Build the other binary from another checkout (git worktree add /tmp/old REV; cd /tmp/old;
# CARGO_TARGET_DIR=/tmp/oldtarget cargo build --release -p weft).
set -euo pipefail
cd "$(dirname "$0")/../.."
A=${A:?A=binary of the first server (or nginx)}
B=${B:-target/release/weft}
RUNS=${RUNS:-5}
BENCH=${BENCH:-target/release/weft-bench}
PATHS=${PATHS:-"/echo /haewelmann.html"}
work=$(mktemp -d)
trap 'pkill -F "$work/nginx.pid" 2>/dev/null || true; rm -rf "$work"' EXIT
target/release/weft fileset www >/dev/null 2>&1 || true
cat >"$work/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $work/nginx.pid;
error_log stderr warn;
events { worker_connections 20000; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    open_file_cache max=10000 inactive=60s;
    open_file_cache_valid 1s;
    types { text/html html; application/octet-stream bin; }
    server {
        listen 127.0.0.1:18113 reuseport;
        root $(pwd)/www;
        location = /echo { default_type text/plain; return 200 "echo"; }
    }
}
EOF

one() { # $1 = binary or nginx, $2 = path
  local pid port=18112 server
  if [[ $1 == nginx ]]; then
    taskset -c 0 nginx -c "$work/nginx.conf" >/dev/null 2>&1 &
    server=$!
    port=18113
    sleep 0.4
    pid=$(pgrep -P "$server" | head -1)
  else
    taskset -c 0 "$1" serve --threads 1 --root www --listen "127.0.0.1:$port=fiber" >/dev/null 2>&1 &
    server=$!
    pid=$server
    sleep 0.4
  fi
  local out
  out=$(taskset -c 1 "$BENCH" load -c50 -d4s --no-keepalive --server-pid "$pid" \
    "http://127.0.0.1:$port$2" 2>&1)
  echo "$2 $1 $(echo "$out" | sed -n 's/.*requests *[0-9]* *\([0-9.]*\) req\/s.*/\1/p') \
$(echo "$out" | sed -n 's/.*server CPU \([0-9.]*\) µs\/request.*/\1/p')"
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  sleep 0.3
}

for path in $PATHS; do
  for ((i = 0; i < RUNS; i++)); do
    one "$A" "$path"
    one "$B" "$path"
  done
done
