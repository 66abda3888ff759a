#!/usr/bin/env bash
# h2spec (the HTTP/2 conformance suite, 146 cases) against weft on every model, over TLS
# (ALPN h2) and over h2c (prior knowledge), with a summary table.
#
#   scripts/conformance/h2spec.sh [MODEL...]        (default: fiber thread process pipeline)
#
# h2spec: $H2SPEC, else `h2spec` on the PATH, else ../shared/tools/h2spec/h2spec beside the
# repository (a prebuilt static binary with its source). Builds weft (release) if needed,
# makes a self-signed certificate with openssl, starts one server per model with an https and
# an h2c listener, and writes results/quick/h2spec/<model>-<tls|h2c>.log and summary.md.
# Exit status: 0 when every run has 0 failed, 1 otherwise, 2 when h2spec is missing.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
h2spec=${H2SPEC:-$(command -v h2spec || true)}
if [ -z "$h2spec" ]; then
    for c in "$root/../shared/tools/h2spec/h2spec" /work/shared/tools/h2spec/h2spec; do
        if [ -x "$c" ]; then h2spec=$c; break; fi
    done
fi
if [ -z "$h2spec" ]; then
    echo "scripts/conformance/h2spec.sh: h2spec not found (set H2SPEC or put it on the PATH)" >&2
    exit 2
fi
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(fiber thread process pipeline)
out=${OUT:-$root/results/quick/h2spec}
mkdir -p "$out"
weft=${WEFT:-$root/target/release/weft}
if [ -z "${WEFT:-}" ]; then
    (cd "$root" && cargo build --release -q -p weft)
fi
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
    -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null
mkdir -p "$tmp/www"
echo "<!doctype html><title>h2spec</title>" >"$tmp/www/index.html"

# shellcheck source=../lib/wait_listening.sh
. "$root/scripts/lib/wait_listening.sh"
# shellcheck source=../lib/free_ports.sh
. "$root/scripts/lib/free_ports.sh"

status=0
{
    echo "# h2spec against weft ($(date -u +%F), $("$h2spec" --version 2>/dev/null | head -1 || echo h2spec))"
    echo
    echo "| model | over | passed | failed | skipped |"
    echo "|---|---|---|---|---|"
} >"$out/summary.md"
for model in "${models[@]}"; do
    { read -r tls_port; read -r plain_port; } < <(free_ports 2)
    "$weft" serve --root "$tmp/www" --https "127.0.0.1:$tls_port=$model" \
        --listen "127.0.0.1:$plain_port=$model" --h2c \
        --tls-cert "$tmp/cert.pem" --tls-key "$tmp/key.pem" --access-log off \
        >"$out/$model-server.log" 2>&1 &
    pid=$!
    wait_listening "weft ($model)" "$tls_port" "$out/$model-server.log"
    for over in tls h2c; do
        if [ "$over" = tls ]; then
            args=(-h 127.0.0.1 -p "$tls_port" -t -k)
        else
            args=(-h 127.0.0.1 -p "$plain_port")
        fi
        "$h2spec" "${args[@]}" -o 3 >"$out/$model-$over.log" 2>&1 || true
        line=$(grep -E '^[0-9]+ tests, [0-9]+ passed' "$out/$model-$over.log" | tail -1)
        passed=$(sed -E 's/.* ([0-9]+) passed.*/\1/' <<<"$line")
        skipped=$(sed -E 's/.* ([0-9]+) skipped.*/\1/' <<<"$line")
        failed=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")
        [ -n "$line" ] || { passed=?; skipped=?; failed=?; }
        echo "| $model | $over | $passed | $failed | $skipped |" >>"$out/summary.md"
        echo "$model over $over: ${line:-h2spec gave no summary (see $out/$model-$over.log)}"
        [ "$failed" = 0 ] || status=1
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
done
echo "summary: $out/summary.md"
exit $status
