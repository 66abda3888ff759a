#!/usr/bin/env bash
# Soak over HTTPS with compression and sites on (issue 56): each model serves two sites (and a
# default) on a TLS listener with on-the-fly compression, for SECONDS, under wrk (mixed requests
# for both sites and an unknown host, gzip and br asked for, ranges, echo GET and POST, 404s,
# and one malformed request in 50, which is answered 400 and closed). The models run at once, so
# a 30-minute soak of all four takes 30 minutes; each server's resident memory (with its
# children: the process model's connection processes) and open descriptors are sampled every
# 10 s. Pass: resident memory grows less than 5% from the end of the warm-up (the first tenth of
# the time) to the end, and the server holds as many descriptors after the run (clients gone)
# as before it.
#
#   SECONDS_EACH=1800 scripts/robustness/soak_https.sh                 # all four models, 30 min
#   SECONDS_EACH=60 MODELS="fiber process" scripts/robustness/soak_https.sh   # a quick look
#
# Needs wrk, openssl and a release build (cargo build --release -p weft). Servers share core 0
# and the wrk clients core 1. Writes bench/results/<date>-soak-https.csv (or OUT=FILE): model,
# second, rss_kib, fds; and one summary line per model.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_EACH=${SECONDS_EACH:-1800}
MODELS=${MODELS:-"fiber thread process pipeline"}
CONNS=${CONNS:-20}
WEFT=${WEFT:-target/release/weft}
for tool in wrk openssl; do
  command -v "$tool" >/dev/null || { echo "soak_https: $tool is missing" >&2; exit 2; }
done
[[ -x $WEFT ]] || { echo "soak_https: $WEFT not built (cargo build --release -p weft)" >&2; exit 2; }
out=${OUT:-bench/results/$(date +%F)-soak-https.csv}
mkdir -p bench/results
echo "model,second,rss_kib,fds" >"$out"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=a.test -addext "subjectAltName=DNS:a.test,DNS:b.test,IP:127.0.0.1" \
  -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
mkdir -p "$work/a" "$work/b"
cp -r www/. "$work/a/"
python3 - "$work/b" <<'PY'
import os, sys
d = sys.argv[1]
with open(os.path.join(d, "index.html"), "w") as f:
    f.write("<!doctype html><title>b</title>\n" + "<p>site b, compressible text.</p>\n" * 400)
with open(os.path.join(d, "data.json"), "w") as f:
    f.write("[" + ",".join('{"n": %d, "name": "item"}' % i for i in range(2000)) + "]\n")
PY

# shellcheck source=../lib/proc_usage.sh
. scripts/lib/proc_usage.sh

cat >"$work/soak.lua" <<'LUA'
local reqs = {}
local n = 0
function init(args)
  local a, b, x = "Host: a.test\r\n", "Host: b.test\r\n", "Host: unknown.test\r\n"
  local gz, br = "Accept-Encoding: gzip\r\n", "Accept-Encoding: br, gzip\r\n"
  reqs = {
    "GET /index.html HTTP/1.1\r\n" .. a .. gz .. "\r\n",
    "GET /haewelmann.html HTTP/1.1\r\n" .. a .. br .. "\r\n",
    "GET /haewelmann.html HTTP/1.1\r\n" .. a .. "Range: bytes=100-199\r\n\r\n",
    "GET / HTTP/1.1\r\n" .. b .. gz .. "\r\n",
    "GET /data.json HTTP/1.1\r\n" .. b .. br .. "\r\n",
    "GET /echo HTTP/1.1\r\n" .. a .. "\r\n",
    "POST /echo HTTP/1.1\r\n" .. b .. "Content-Length: 11\r\n\r\nhello world",
    "GET /no/such/file HTTP/1.1\r\n" .. b .. "\r\n",
    "GET /index.html HTTP/1.1\r\n" .. x .. gz .. "\r\n",
    "GET /files/1k.bin HTTP/1.1\r\n" .. a .. "\r\n",
  }
end
function request()
  n = n + 1
  if n % 50 == 0 then
    return "GET /bad HTTP/1.1\r\nHost : a.test\r\n\r\n"
  end
  return reqs[(n % #reqs) + 1]
end
LUA

declare -A PID PORT FD0 WARM
port=18500
for m in $MODELS; do
  port=$((port + 1)); PORT[$m]=$port
  cat >"$work/$m.toml" <<TOML
root = "$work/a"

[[listen]]
addr = "127.0.0.1:$port"
model = "$m"
tls = true

[tls]
cert = "$work/cert.pem"
key = "$work/key.pem"

[compression]
enabled = true

[[site]]
hosts = ["a.test"]
root = "$work/a"

[[site]]
hosts = ["b.test"]
root = "$work/b"
TOML
  taskset -c 0 "$WEFT" serve --config "$work/$m.toml" --threads 1 --access-log off \
    >"$work/$m.log" 2>&1 &
  PID[$m]=$!
done
sleep 2
for m in $MODELS; do
  kill -0 "${PID[$m]}" 2>/dev/null || { echo "soak_https: $m did not start:" >&2; cat "$work/$m.log" >&2; exit 1; }
  FD0[$m]=$(fds "${PID[$m]}")
  taskset -c 1 wrk -t1 -c"$CONNS" -d"${SECONDS_EACH}s" -s "$work/soak.lua" \
    "https://127.0.0.1:${PORT[$m]}/" >"$work/$m.wrk" 2>&1 &
done
start=$(date +%s)
warm_at=$((SECONDS_EACH / 10))
while :; do
  sleep 10
  sec=$(( $(date +%s) - start ))
  for m in $MODELS; do
    rss=$(rss_tree "${PID[$m]}")
    echo "$m,$sec,$rss,$(fds "${PID[$m]}")" >>"$out"
    if [[ -z ${WARM[$m]:-} && $sec -ge $warm_at ]]; then WARM[$m]=$rss; fi
  done
  [[ $sec -ge $SECONDS_EACH ]] && break
done
# Let every wrk finish and its connections close.
sleep 5
fail=0
for m in $MODELS; do
  pid=${PID[$m]}
  verdict=ok
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "$m: FAIL (server died)"; fail=1; continue
  fi
  rss_end=$(rss_tree "$pid"); fd1=$(fds "$pid")
  growth=$(awk -v a="${WARM[$m]}" -v b="$rss_end" 'BEGIN { printf "%.1f", (b - a) * 100 / a }')
  if awk -v g="$growth" 'BEGIN { exit !(g >= 5) }' || [[ ${FD0[$m]} != "$fd1" ]]; then
    verdict=FAIL; fail=1
  fi
  reqs=$(awk '/ requests in / {print $1}' "$work/$m.wrk")
  errs=$(grep -E "Non-2xx|Socket errors" "$work/$m.wrk" | tr -s ' ' | paste -sd ';' || true)
  echo "$m: ${reqs:-?} requests in ${SECONDS_EACH} s (${errs:-no errors}); rss after warm-up ${WARM[$m]} KiB, at end ${rss_end} KiB (${growth}%); fds before ${FD0[$m]}, after ${fd1}: $verdict"
  kill "$pid"; wait "$pid" 2>/dev/null || true
done
exit $fail
