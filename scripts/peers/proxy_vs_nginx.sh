#!/usr/bin/env bash
# weft and nginx as reverse proxies in front of the same two upstream servers: weft's
# `[[upstream]]` group (round robin, `max_idle = 32`) against nginx's `upstream` block with
# `keepalive 32` (`proxy_http_version 1.1`, `Connection ""`). The upstreams are one nginx
# (one worker, two ports) answering `return 200 "Hello, World!"`. Each round runs wrk once
# against each front (the order reversed every other round); the front's CPU per request
# (weft's process; nginx's master and worker) is the figure.
#
#   scripts/peers/proxy_vs_nginx.sh [OUT_DIR]     RUNS=5 DURATION=3 CONNS=50
#
# The fronts (fiber model, one worker; nginx one worker) and the upstream run on core 0, wrk
# -t1 on core 1. Needs wrk and nginx (`apt-get install wrk nginx-light`).
set -u
cd "$(dirname "$0")/../.." || exit 2
runs=${RUNS:-5}; conns=${CONNS:-50}; dur=${DURATION:-3}
out=${1:-$(mktemp -d /tmp/weft-proxy.XXXXXX)}
mkdir -p "$out"
for tool in wrk nginx taskset curl; do
  command -v "$tool" >/dev/null || { echo "proxy_vs_nginx: $tool is missing (apt-get install wrk nginx-light curl)" >&2; exit 2; }
done
if [[ -z ${WEFT:-} ]]; then
  cargo build --release -q -p weft || exit 2
  WEFT=target/release/weft
fi
work=$(mktemp -d)
mkdir -p "$work/www" "$work/up"
root_flag=(); nginx_user=""
if ((EUID == 0)); then root_flag=(--allow-root); nginx_user="user root;"; fi
u1=18420; u2=18421; wport=18422; nport=18423
cat >"$work/up/nginx.conf" <<EOF
$nginx_user
worker_processes 1;
daemon off;
pid nginx.pid;
error_log stderr warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    server { listen 127.0.0.1:$u1; listen 127.0.0.1:$u2; location / { return 200 "Hello, World!"; } }
}
EOF
taskset -c 0 nginx -p "$work/up" -c "$work/up/nginx.conf" >"$work/up.log" 2>&1 &
up_pid=$!
cat >"$work/weft.toml" <<EOF
[[upstream]]
name = "app"
servers = ["127.0.0.1:$u1", "127.0.0.1:$u2"]
max_idle = 32

[[proxy]]
prefix = "/"
upstream = "upstream:app"
EOF
taskset -c 0 "$WEFT" serve "${root_flag[@]}" --keepalive-requests 1000000 --config "$work/weft.toml" --root "$work/www" --threads 1 \
  --listen "127.0.0.1:$wport=fiber" >"$work/weft.log" 2>&1 &
weft_pid=$!
cat >"$work/nginx.conf" <<EOF
$nginx_user
worker_processes 1;
daemon off;
pid nginx.pid;
error_log stderr warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    upstream app { server 127.0.0.1:$u1; server 127.0.0.1:$u2; keepalive 32; }
    server {
        listen 127.0.0.1:$nport;
        location / {
            proxy_pass http://app;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
EOF
taskset -c 0 nginx -p "$work" -c "$work/nginx.conf" >"$work/nginx.log" 2>&1 &
nginx_pid=$!
trap 'kill $weft_pid $nginx_pid $up_pid 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
source scripts/lib/wait_listening.sh
source scripts/lib/cpu_ticks.sh
wait_listening upstream $u2 "$work/up.log"
wait_listening weft $wport "$work/weft.log"
wait_listening nginx $nport "$work/nginx.log"
for p in $wport $nport; do
  body=$(curl -s "http://127.0.0.1:$p/")
  [[ $body == "Hello, World!" ]] || { echo "port $p answered: $body" >&2; exit 1; }
done
HZ=$(getconf CLK_TCK)
csv=$out/proxy.csv
echo "server,run,rps,cpu_us,non2xx" >"$csv"
declare -A PID=([weft]=$weft_pid [nginx]=$nginx_pid) PORT=([weft]=$wport [nginx]=$nport)
for r in $(seq 1 "$runs"); do
  order="nginx weft"; ((r % 2 == 0)) && order="weft nginx"
  for n in $order; do
    read -r u0 s0 < <(cpu_ticks "${PID[$n]}")
    o=$(taskset -c 1 wrk -t1 -c"$conns" -d"${dur}s" "http://127.0.0.1:${PORT[$n]}/")
    read -r u1_ s1_ < <(cpu_ticks "${PID[$n]}")
    reqs=$(awk '/requests in/ {print $1}' <<<"$o"); rps=$(awk '/Requests\/sec/ {print $2}' <<<"$o")
    bad=$(awk '/Non-2xx/ {print $NF}' <<<"$o")
    awk -v n="$n" -v r="$r" -v rps="$rps" -v w=$((u1_ - u0 + s1_ - s0)) -v q="$reqs" -v hz="$HZ" -v bad="${bad:-0}" \
      'BEGIN { printf "%s,%d,%s,%.3f,%s\n", n, r, rps, w / hz * 1e6 / q, bad }' >>"$csv"
  done
done
python3 - "$csv" "$conns" <<'PY' | tee "$out/summary.txt"
import collections, csv, statistics as st, sys
rows = list(csv.DictReader(open(sys.argv[1])))
by = collections.defaultdict(dict)
for r in rows:
    by[r["server"]][r["run"]] = r
print("proxy to a group of two upstreams, keep-alive 32, wrk -c%s; medians of %d rounds" % (sys.argv[2], len(by["weft"])))
for n in ("weft", "nginx"):
    rs = by[n].values()
    print("%-6s %8.0f req/s  %7.2f us CPU/request (front)  non-2xx %s"
          % (n, st.median(float(r["rps"]) for r in rs), st.median(float(r["cpu_us"]) for r in rs),
             sum(int(r["non2xx"]) for r in rs)))
cpu = [float(by["weft"][k]["cpu_us"]) / float(by["nginx"][k]["cpu_us"]) for k in by["weft"]]
print("weft/nginx CPU per proxied request %.3f (<= 1.0: %s)  runs %s" % (st.median(cpu), "met" if st.median(cpu) <= 1.0 else "NOT MET", " ".join("%.3f" % x for x in cpu)))
PY
source scripts/lib/machine.sh
stamp | tee -a "$out/summary.txt"
