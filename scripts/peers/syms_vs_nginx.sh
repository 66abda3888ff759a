#!/usr/bin/env bash
# Where a request's CPU time goes, weft (fiber model) against nginx, function by function in
# microseconds per request, kernel included: `perf record` of each server in turn (one worker
# on core 0) while `wrk -t1` on core 1 drives /echo, then each symbol's samples over the
# requests wrk counted. Prints the totals, the kernel's share, and the symbols where the two
# differ most either way.
#
#   scripts/peers/syms_vs_nginx.sh            C=50 DURATION=4 WEFT=target/release/weft
#
# Needs perf (linux-perf, perf_event_paranoid <= 2 for one's own processes), wrk and nginx.
set -u
cd "$(dirname "$0")/../.."
c=${C:-50}; d=${DURATION:-4}; weft=${WEFT:-target/release/weft}
for tool in perf wrk nginx python3 taskset; do
  command -v "$tool" >/dev/null || { echo "syms_vs_nginx: $tool is missing" >&2; exit 2; }
done
ulimit -n 20000 2>/dev/null || true
work=$(mktemp -d)
taskset -c 0 "$weft" serve --keepalive-requests 1000000 --root www --threads 1 --listen 127.0.0.1:18401=fiber >"$work/weft.log" 2>&1 &
wpid=$!
sed -e "s|PORT|18402|; s|WWW_ROOT|$PWD/www|" scripts/peers/peer-nginx.conf >"$work/nginx.conf"
taskset -c 0 nginx -p "$work" -c "$work/nginx.conf" >"$work/nginx.log" 2>&1 &
npid=$!
trap 'kill $wpid $npid 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
source scripts/lib/wait_listening.sh
wait_listening weft 18401 "$work/weft.log"
wait_listening nginx 18402 "$work/nginx.log"
nworker=$(pgrep -P "$npid" | head -1)
for s in "weft:18401:$wpid" "nginx:18402:$nworker"; do
  IFS=: read -r n port pid <<<"$s"
  taskset -c 1 wrk -t1 -c"$c" -d1s "http://127.0.0.1:$port/echo" >/dev/null
  perf record -q -o "$work/$n.data" -F 10000 -p "$pid" -- sleep "$((d + 1))" 2>/dev/null &
  rec=$!
  sleep 0.2
  taskset -c 1 wrk -t1 -c"$c" -d"${d}s" "http://127.0.0.1:$port/echo" | awk '/requests in/ {print $1}' >"$work/$n.req"
  wait $rec
  perf report -i "$work/$n.data" --no-children --sort sym -F overhead,sample,sym 2>/dev/null |
    grep -v '^#' | grep . >"$work/$n.sym"
done
python3 - "$work" <<'PY'
import re, sys
work = sys.argv[1]
def load(n):
    q = int(open(f"{work}/{n}.req").read())
    d = {}
    for line in open(f"{work}/{n}.sym"):
        m = re.match(r"\s*([\d.]+)%\s+(\d+)\s+(\[.\])\s+(.*)", line)
        if m:
            d[m.group(3) + " " + m.group(4).strip()] = int(m.group(2)) / q * 1e6 / 10000
    return d, q
w, qw = load("weft"); n, qn = load("nginx")
kern = lambda d: sum(v for k, v in d.items() if k.startswith("[k]"))
print("requests: weft %d, nginx %d (us per request below; 10 kHz samples)" % (qw, qn))
print("total  weft %.3f  nginx %.3f  ratio %.3f" % (sum(w.values()), sum(n.values()), sum(w.values()) / sum(n.values())))
print("kernel weft %.3f  nginx %.3f" % (kern(w), kern(n)))
keys = sorted(set(w) | set(n), key=lambda k: -(w.get(k, 0) - n.get(k, 0)))
print("weft  nginx  (weft heavier)")
for k in keys[:20]:
    print("%6.3f %6.3f %s" % (w.get(k, 0), n.get(k, 0), k[:80]))
print("weft  nginx  (nginx heavier)")
for k in keys[-15:]:
    print("%6.3f %6.3f %s" % (w.get(k, 0), n.get(k, 0), k[:80]))
PY
