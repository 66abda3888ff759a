#!/usr/bin/env bash
# User-space instructions per request, counted by valgrind's callgrind: a figure that does not
# move with the machine's load, for A/B of a change to the per-request path where the CPU-time
# ratios (scripts/perf/ab_builds.sh) swing by +-10% on a shared VM. Kernel work is not counted:
# it is the same for every server that makes the same system calls, and the CPU-time tables
# keep measuring it.
#
#   scripts/perf/instr_per_request.sh NAME PORT PATH DEPTH -- CMD...
#   e.g. scripts/perf/instr_per_request.sh weft 18401 /plaintext 16 -- target/release/examples/techempower 127.0.0.1:18401 1
#        scripts/perf/instr_per_request.sh weft 18400 /echo 1 -- target/release/weft serve --listen 127.0.0.1:18400=fiber --threads 1
#
# CMD must serve PATH on 127.0.0.1:PORT with status 200. The client (python3) opens CONNS
# connections (default 20); each sends DEPTH requests per write (DEPTH 1: no pipelining) and
# reads the answers, 20 rounds to warm up, then the counters are zeroed and 100 rounds counted
# (CONNS * 100 * DEPTH requests). Prints `NAME depth=DEPTH instructions/request N`. KEEP=FILE keeps the
# counted callgrind dump there (read it with `callgrind_annotate FILE`); CG_OPTS adds options to
# valgrind (e.g. CG_OPTS=--dump-instr=yes for per-instruction counts). Needs valgrind
# (apt-get install valgrind) and python3.
set -u
name=$1; port=$2; path=$3; depth=$4; shift 4
conns=${CONNS:-20}
[[ ${1:-} == -- ]] && shift
for tool in valgrind callgrind_control python3; do
  command -v "$tool" >/dev/null || { echo "instr_per_request: $tool is missing (apt-get install valgrind python3)" >&2; exit 2; }
done
work=$(mktemp -d)
valgrind --tool=callgrind ${CG_OPTS:-} --callgrind-out-file="$work/cg.%p" "$@" >"$work/server.log" 2>&1 &
pid=$!
trap 'kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$work"' EXIT
client() { # ROUNDS
  python3 - "$port" "$path" "$conns" "$1" "$depth" <<'PY'
import socket, sys
port, path, conns, rounds, depth = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
req = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode() * depth
socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(conns)]
for _ in range(rounds):
    for s in socks:
        s.sendall(req)
    for s in socks:
        got = b""
        while got.count(b"HTTP/1.1 200 ") < depth:
            d = s.recv(65536)
            if not d:
                sys.exit("instr_per_request: the server closed a connection")
            got += d
PY
}
for _ in $(seq 1 200); do
  python3 -c "import socket; socket.create_connection(('127.0.0.1', $port))" 2>/dev/null && break
  sleep 0.3
done
client 20 || exit 1
callgrind_control -z "$pid" >/dev/null 2>&1
client 100 || exit 1
callgrind_control -d "$pid" >/dev/null 2>&1
sleep 1
ir=$(awk '/^(summary|totals):/ {print $2; exit}' "$work"/cg.*.1 2>/dev/null)
[[ -n $ir ]] || { echo "instr_per_request: no callgrind dump (see $work/server.log)" >&2; exit 1; }
[[ -n ${KEEP:-} ]] && cp "$(ls "$work"/cg.*.1 | head -1)" "$KEEP"
awk -v n="$name" -v d="$depth" -v ir="$ir" -v q=$((conns * 100 * depth)) \
  'BEGIN { printf "%s depth=%d instructions/request %.0f\n", n, d, ir / q }'
