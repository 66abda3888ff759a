#!/usr/bin/env bash
# The CGI paper's request (Edwards, Performance of HTTP and CGI, §1.2.3: POST with its ten header
# lines and a 542-byte url-encoded body, echoed back) through CGI (a shell script that execs
# cat), through the in-process echo route (the paper's "extension method": a handler running on
# the connection's fiber or thread) and through the reverse proxy (to a second weft), on every
# model. weft-bench on core 1, servers on core 0, alternating, median of RUNS runs; requests/s,
# server CPU per request (the process tree, CGI children included) and the mean of each
# `--timing` phase over the run.
#
#   RUNS=5 DURATION=3 CONNS=8 MODELS="fiber thread process pipeline" scripts/paper-runs/cgi_paper.sh
#
# Needs release builds of weft and weft-bench. Rows go to bench/results/<date>-cgi-paper.csv.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-5}; DURATION=${DURATION:-3}; CONNS=${CONNS:-8}
MODELS=${MODELS:-"fiber thread process pipeline"}
WEFT=${WEFT:-target/release/weft}; BENCH=${BENCH:-target/release/weft-bench}
ROOT=$(pwd)/www
work=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/cgi" bench/results
out=bench/results/$(date +%F)-cgi-paper.csv
printf '#!/bin/sh\nprintf "Content-Type: application/x-www-form-urlencoded\\r\\n\\r\\n"\nexec cat\n' >"$work/cgi/echo2"
chmod +x "$work/cgi/echo2"
# 542 bytes of url-encoded form data.
python3 -c 'import sys,urllib.parse; t="The experiment consisted of a client program invoking a CGI program launched by a CERN HTTP server. "*8; sys.stdout.write(urllib.parse.urlencode({"text": t})[:542])' >"$work/body"
[[ $(stat -c %s "$work/body") == 542 ]]
HEADERS=(-H "Accept: application/x-corba" -H "Accept: */*; q=0.300"
  -H "Accept: application/octet-stream; q=0.100" -H "Accept: text/plain" -H "Accept: text/html"
  -H "From: nje@socrates.ansa.co.uk" -H "User-Agent: Echo client/0 libwww/2.17"
  -H "Content-type: application/x-www-form-urlencoded")

# The proxy's upstream: a weft whose echo route lives at /up/echo.
printf '[echo]\npath = "/up/echo"\n' >"$work/up.toml"
taskset -c 0 "$WEFT" serve --config "$work/up.toml" --root "$ROOT" --threads 1 \
  --listen 127.0.0.1:18390=fiber >"$work/up.log" 2>&1 &
declare -A PORTS PIDS
port=18390
for m in $MODELS; do
  port=$((port + 1)); PORTS[$m]=$port
  printf '[[proxy]]\nprefix = "/up/"\nupstream = "http://127.0.0.1:18390"\n' >"$work/$m.toml"
  taskset -c 0 "$WEFT" serve --config "$work/$m.toml" --root "$ROOT" --threads 1 --cgi "$work/cgi" \
    --timing --status --listen "127.0.0.1:$port=$m" >"$work/$m.log" 2>&1 &
  PIDS[$m]=$!
done
sleep 1
phases() { curl -s "http://127.0.0.1:$1/_weft/status.json" | python3 -c 'import json,sys; p=json.load(sys.stdin)["phases"]; print(json.dumps({k: [v["count"], v["mean_us"]] for k, v in p.items()}))'; }
echo "model,path,run,rps,cpu_us_per_req,errors,head_us,body_us,handler_us,first_byte_us,last_byte_us" | tee "$out"
for path in /cgi-bin/echo2 /echo /up/echo; do for run in $(seq 1 "$RUNS"); do for m in $MODELS; do
  p=${PORTS[$m]}
  before=$(phases "$p")
  j=$(taskset -c 1 "$BENCH" load -c "$CONNS" -d "${DURATION}s" -m POST "${HEADERS[@]}" \
    --body-file "$work/body" --server-pid "${PIDS[$m]}" --json "http://127.0.0.1:$p$path")
  after=$(phases "$p")
  python3 - "$m" "$path" "$run" "$j" "$before" "$after" <<'PY' | tee -a "$out"
import json, sys
m, path, run, j, before, after = sys.argv[1:7]
r, b, a = json.loads(j), json.loads(before), json.loads(after)
def mean(k):
    n = a[k][0] - b[k][0]
    return (a[k][0] * a[k][1] - b[k][0] * b[k][1]) / n if n else 0.0
errors = sum(r["errors"].values()) if isinstance(r["errors"], dict) else r["errors"]
cpu = (r.get("server") or {}).get("cpu_us_per_request", 0.0)
print(f'{m},{path},{run},{r["requests_per_s"]:.0f},{cpu:.1f},{errors},' + ",".join(
    f"{mean(k):.1f}" for k in ["head", "body", "handler", "first_byte_out", "last_byte_out"]))
PY
done; done; done
echo
echo "medians over $RUNS runs: model,path,rps,cpu_us_per_req,head_us,body_us,handler_us,last_byte_us"
python3 - "$out" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
keys = sorted({(r["path"], r["model"]) for r in rows})
for path, m in keys:
    sel = [r for r in rows if (r["path"], r["model"]) == (path, m)]
    med = lambda k: statistics.median(float(r[k]) for r in sel)
    print(f"{m},{path},{med('rps'):.0f},{med('cpu_us_per_req'):.1f},{med('head_us'):.1f},"
          f"{med('body_us'):.1f},{med('handler_us'):.1f},{med('last_byte_us'):.1f}")
PY
