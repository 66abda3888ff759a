#!/usr/bin/env bash
# Runs a plain-HTTP tool against an HTTPS server through `weft-bench tls-shim`.
#
#   scripts/conformance/through_tls_shim.sh HOST:PORT [--insecure | --cacert FILE] -- COMMAND [ARG...]
#
# Starts the shim on a free loopback port (plain TCP in, TLS to HOST:PORT out), waits until it
# listens, runs COMMAND with SHIM_HOST, SHIM_PORT and SHIM_ADDR (HOST:PORT) in its
# environment and every `{addr}`, `{host}` and `{port}` in its arguments replaced, stops the
# shim and exits with COMMAND's status. The shim verifies the server's certificate against
# the system's CAs unless told otherwise.
#
# For the HTTP/1.1 conformance probe (h1spec): the repository has no h1spec runner and no
# package registry this project uses carries h1spec, so it must be fetched by hand (network
# access to its repository); then, e.g.
#   scripts/conformance/through_tls_shim.sh 127.0.0.1:8443 --insecure -- h1spec -h {host} -p {port}
# runs it through TLS exactly as it runs on plain HTTP. Any plain client works the same way:
#   scripts/conformance/through_tls_shim.sh 127.0.0.1:8443 --insecure -- curl -si http://{addr}/
#
# weft-bench: $WEFT_BENCH, else target/release/weft-bench, else target/debug/weft-bench.
set -euo pipefail

target=${1:?usage: scripts/conformance/through_tls_shim.sh HOST:PORT [--insecure|--cacert FILE] -- COMMAND...}
shift
shim_args=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    shim_args+=("$1")
    shift
done
[ "${1:-}" = "--" ] && shift
[ $# -gt 0 ] || { echo "scripts/conformance/through_tls_shim.sh: no COMMAND after --" >&2; exit 2; }

root=$(cd "$(dirname "$0")/../.." && pwd)
bench=${WEFT_BENCH:-}
for b in "$root/target/release/weft-bench" "$root/target/debug/weft-bench"; do
    [ -n "$bench" ] && break
    [ -x "$b" ] && bench=$b
done
[ -n "$bench" ] || { echo "scripts/conformance/through_tls_shim.sh: build weft-bench first (cargo build --release -p weft-bench)" >&2; exit 2; }

log=$(mktemp)
"$bench" tls-shim --listen 127.0.0.1:0 --connect "$target" "${shim_args[@]}" >"$log" 2>&1 &
shim=$!
trap 'kill "$shim" 2>/dev/null || true; wait "$shim" 2>/dev/null || true; rm -f "$log"' EXIT
addr=
for _ in $(seq 100); do
    addr=$(sed -n 's|.*plain tcp://\([^ ]*\) .*|\1|p' "$log")
    [ -n "$addr" ] && break
    kill -0 "$shim" 2>/dev/null || { cat "$log" >&2; exit 2; }
    sleep 0.05
done
[ -n "$addr" ] || { echo "scripts/conformance/through_tls_shim.sh: the shim did not start" >&2; cat "$log" >&2; exit 2; }
export SHIM_ADDR=$addr SHIM_HOST=${addr%:*} SHIM_PORT=${addr##*:}
args=()
for a in "$@"; do
    a=${a//\{addr\}/$SHIM_ADDR}
    a=${a//\{host\}/$SHIM_HOST}
    args+=("${a//\{port\}/$SHIM_PORT}")
done
echo "# through tls-shim $SHIM_ADDR -> $target: ${args[*]}" >&2
status=0
"${args[@]}" || status=$?
# What the shim reported (failed handshakes, for one) goes with the result.
grep -v '^weft-bench tls-shim:' "$log" >&2 || true
exit "$status"
