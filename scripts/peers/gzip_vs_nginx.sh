#!/usr/bin/env bash
# CPU per request of a gzip'd page: weft (fiber, [compression] on) against nginx `gzip on`
# (compresses per request) and nginx `gzip_static on` (sends a precompressed page.gz).
# Every client sends `Accept-Encoding: gzip`; the page is www/haewelmann.html (10,541 B).
# Servers pinned to core 0, wrk to core 1; runs alternate between servers; one CSV row per
# run (server, conns, run, requests/s, server CPU us per request from /proc) and the medians,
# then each weft server's CPU per request over each nginx's, paired run by run.
#
#   RUNS=5 DURATION=5 CONNS=50 scripts/peers/gzip_vs_nginx.sh
#   RUNS=1 DURATION=1 CONNS=10 WEFT=target/debug/weft scripts/peers/gzip_vs_nginx.sh   # quick form
#
# Servers:
#   weft         fiber, on-the-fly gzip compressed once into the response cache;
#   weft-static  fiber, precompressed = true, serving the same page.gz as nginx-static;
#   nginx-gzip   gzip on, gzip_comp_level $NGINX_GZIP_LEVEL (nginx's default 1);
#   nginx-static gzip_static on.
# WEFT_GZIP_LEVEL sets weft's gzip_level (default 6, weft's default; the level matters only
# once per file version for weft).
#
# Needs wrk and nginx (apt-get install wrk nginx-light) and a release build of weft.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-5}; DURATION=${DURATION:-5}; CONNS=${CONNS:-50}
WEFT=${WEFT:-target/release/weft}
NGINX_GZIP_LEVEL=${NGINX_GZIP_LEVEL:-1}
WEFT_GZIP_LEVEL=${WEFT_GZIP_LEVEL:-6}
PAGE=haewelmann.html
for tool in wrk nginx gzip; do
  command -v "$tool" >/dev/null || { echo "$tool not installed (apt-get install wrk nginx-light gzip)" >&2; exit 2; }
done
[[ -x $WEFT ]] || { echo "$WEFT not built (cargo build --release -p weft)" >&2; exit 2; }
work=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
# One root for all: the page and its precompressed sibling (used only where asked for).
mkdir -p "$work/www"
# nginx's worker may run as another user: the root must be readable by all.
chmod 755 "$work" "$work/www"
cp www/$PAGE "$work/www/$PAGE"
gzip -"$WEFT_GZIP_LEVEL" -n -k "$work/www/$PAGE"
# The cache takes a file once its ctime is a second old.
sleep 1.2
ROOT=$work/www

source scripts/lib/cpu_ticks.sh
source scripts/lib/wait_listening.sh

declare -A PIDS PORTS
port=18300
start_weft() { # NAME EXTRA_TOML
  port=$((port + 1)); PORTS[$1]=$port
  printf '[compression]\nenabled = true\ngzip_level = %s\n%s' "$WEFT_GZIP_LEVEL" "$2" >"$work/$1.toml"
  taskset -c 0 "$WEFT" serve --keepalive-requests 1000000 --config "$work/$1.toml" --root "$ROOT" --threads 1 \
    --listen "127.0.0.1:$port=fiber" >"$work/$1.log" 2>&1 &
  PIDS[$1]=$!
}
start_nginx() { # NAME GZIP_DIRECTIVES
  port=$((port + 1)); PORTS[$1]=$port
  mkdir -p "$work/$1"
  sed -e "s|PORT|$port|; s|WWW_ROOT|$ROOT|; s|^    sendfile on;|    sendfile on;\n    $2|" \
    scripts/peers/peer-nginx.conf >"$work/$1/nginx.conf"
  taskset -c 0 nginx -p "$work/$1" -c "$work/$1/nginx.conf" >"$work/$1.log" 2>&1 &
  PIDS[$1]=$!
}
start_weft weft ''
start_weft weft-static $'precompressed = true\n'
start_nginx nginx-gzip "gzip on; gzip_comp_level $NGINX_GZIP_LEVEL; gzip_min_length 256;"
start_nginx nginx-static "gzip_static on;"
for s in "${!PIDS[@]}"; do wait_listening "$s" "${PORTS[$s]}" "$work/$s.log"; done

# Each server must answer gzip, with a body that decodes to the page.
for s in "${!PIDS[@]}"; do
  python3 - "${PORTS[$s]}" "$s" www/$PAGE <<'PY'
import gzip, http.client, sys
port, name, page = int(sys.argv[1]), sys.argv[2], open(sys.argv[3], "rb").read()
c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
c.request("GET", "/haewelmann.html", headers={"Accept-Encoding": "gzip"})
r = c.getresponse()
body = r.read()
if r.status != 200 or r.getheader("Content-Encoding") != "gzip" or gzip.decompress(body) != page:
    sys.exit(f"{name}: not a gzip'd page: {r.status} {r.getheaders()}")
print(f"# {name}: gzip, {len(body)} B on the wire for {len(page)} B", file=sys.stderr)
PY
done

HZ=$(getconf CLK_TCK)
echo "server,conns,run,rps,cpu_us_per_req,user_us,sys_us" | tee "$work/rows.csv"
for c in $CONNS; do for run in $(seq 1 "$RUNS"); do
  for s in weft weft-static nginx-gzip nginx-static; do
    pid=${PIDS[$s]}
    read -r u0 s0 < <(cpu_ticks "$pid")
    out=$(taskset -c 1 wrk -t1 -c"$c" -d"${DURATION}s" -H 'Accept-Encoding: gzip' \
      "http://127.0.0.1:${PORTS[$s]}/$PAGE")
    read -r u1 s1 < <(cpu_ticks "$pid")
    if grep -q -E "Socket errors|Non-2xx" <<<"$out"; then echo "# $s c=$c: $(grep -E 'Socket errors|Non-2xx' <<<"$out")" >&2; fi
    reqs=$(awk '/requests in/ {print $1}' <<<"$out")
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    split=$(awk -v u="$((u1 - u0))" -v k="$((s1 - s0))" -v hz="$HZ" -v n="$reqs" \
      'BEGIN { printf "%.2f,%.2f,%.2f", (u + k) / hz * 1e6 / n, u / hz * 1e6 / n, k / hz * 1e6 / n }')
    echo "$s,$c,$run,$rps,$split" | tee -a "$work/rows.csv"
  done
done; done
echo
echo "median over $RUNS runs: server,conns,rps,cpu_us_per_req,user_us,sys_us"
python3 - "$work/rows.csv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
keys = sorted({(r["server"], int(r["conns"])) for r in rows}, key=lambda k: (k[1], k[0]))
med = lambda sel, f: statistics.median(float(r[f]) for r in sel)
for k in keys:
    sel = [r for r in rows if (r["server"], int(r["conns"])) == k]
    print(f"{k[0]},{k[1]},{med(sel, 'rps'):.0f},{med(sel, 'cpu_us_per_req'):.2f},"
          f"{med(sel, 'user_us'):.2f},{med(sel, 'sys_us'):.2f}")
print()
print("paired (same round): weft server / nginx server,conns,median cpu ratio,target,per-run ratios")
targets = {"nginx-gzip": 0.5, "nginx-static": 1.0}
for w in ("weft", "weft-static"):
    for n, target in targets.items():
        for c in sorted({int(r["conns"]) for r in rows}):
            by_run = lambda s: {r["run"]: float(r["cpu_us_per_req"]) for r in rows
                                if r["server"] == s and int(r["conns"]) == c}
            a, b = by_run(w), by_run(n)
            rs = [a[k] / b[k] for k in a if k in b and b[k] > 0]
            if rs:
                print(f"{w} / {n},{c},{statistics.median(rs):.3f},<= {target},"
                      + " ".join(f"{x:.3f}" for x in rs))
PY
