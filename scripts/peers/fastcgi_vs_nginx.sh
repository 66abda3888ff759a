#!/usr/bin/env bash
# weft and nginx in front of php-fpm: `hello.php` through weft's `[[fastcgi]]` and through
# nginx's `fastcgi_pass` with `fastcgi_keep_conn on` and an upstream `keepalive`, each with a
# php-fpm pool of its own started from the same configuration (a php-fpm worker stays with a
# kept connection, so one server's idle kept connections would hold the workers the other
# needs), each keeping as many connections as its pool has workers. Each round runs wrk once against each
# server (the order reversed every other round); the web server's CPU per request (weft's
# process; nginx's master and worker) is the figure, php-fpm's is printed beside it.
#
#   scripts/peers/fastcgi_vs_nginx.sh [OUT_DIR]     RUNS=5 DURATION=3 CHILDREN=4 CONNS=4
#
# weft (fiber model, one worker), nginx (one worker) and php-fpm (pm = static, CHILDREN
# workers) run on core 0, wrk -t1 on core 1. CONNS stays at CHILDREN: nginx with more client
# connections than php-fpm workers opens connections no worker takes while the kept ones
# are held (its requests then wait for fastcgi_read_timeout); weft queues them (max_conns).
# Needs wrk, nginx and php-fpm (`apt-get install wrk nginx-light php-fpm`).
set -u
cd "$(dirname "$0")/../.." || exit 2
runs=${RUNS:-5}; children=${CHILDREN:-4}; conns=${CONNS:-$children}; dur=${DURATION:-3}
out=${1:-$(mktemp -d /tmp/weft-fastcgi.XXXXXX)}
mkdir -p "$out"
fpm=$(compgen -G '/usr/sbin/php-fpm*' | sort | tail -1)
for tool in wrk nginx taskset; do
  command -v "$tool" >/dev/null || { echo "fastcgi_vs_nginx: $tool is missing (apt-get install wrk nginx-light)" >&2; exit 2; }
done
[[ -n $fpm ]] || { echo "fastcgi_vs_nginx: php-fpm is missing (apt-get install php-fpm)" >&2; exit 2; }
if [[ -z ${WEFT:-} ]]; then
  cargo build --release -q -p weft || exit 2
  WEFT=target/release/weft
fi
work=$(mktemp -d)
mkdir -p "$work/www"
printf '<?php\necho "Hello, World!";\n' >"$work/www/hello.php"
root_flag=(); fpm_root=(); nginx_user=""
if ((EUID == 0)); then root_flag=(--allow-root); fpm_root=(-R); nginx_user="user root;"; fi
declare -A FPM
for n in weft nginx; do
  cat >"$work/php-fpm-$n.conf" <<EOF
[global]
error_log = $work/php-fpm-$n.log
daemonize = no
[bench]
listen = $work/php-$n.sock
listen.backlog = 4096
pm = static
pm.max_children = $children
EOF
  taskset -c 0 "$fpm" -n -y "$work/php-fpm-$n.conf" -F "${fpm_root[@]}" >"$work/fpm-$n.out" 2>&1 &
  FPM[$n]=$!
done
wport=18410; nport=18411
cat >"$work/weft.toml" <<EOF
[[fastcgi]]
server = "unix:$work/php-weft.sock"
max_conns = $children
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
    upstream php { server unix:$work/php-nginx.sock; keepalive $children; }
    server {
        listen 127.0.0.1:$nport;
        root $work/www;
        location ~ \.php\$ {
            fastcgi_pass php;
            fastcgi_keep_conn on;
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_FILENAME \$document_root\$fastcgi_script_name;
        }
    }
}
EOF
taskset -c 0 nginx -p "$work" -c "$work/nginx.conf" >"$work/nginx.log" 2>&1 &
nginx_pid=$!
trap 'kill $weft_pid $nginx_pid "${FPM[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
source scripts/lib/wait_listening.sh
source scripts/lib/cpu_ticks.sh
wait_listening weft $wport "$work/weft.log"
wait_listening nginx $nport "$work/nginx.log"
for p in $wport $nport; do
  body=$(curl -s "http://127.0.0.1:$p/hello.php" 2>/dev/null || wrk -t1 -c1 -d1s "http://127.0.0.1:$p/hello.php" >/dev/null)
  [[ -z $body || $body == "Hello, World!" ]] || { echo "port $p answered: $body" >&2; exit 1; }
done
HZ=$(getconf CLK_TCK)
csv=$out/fastcgi.csv
echo "server,run,rps,cpu_us,php_fpm_cpu_us,non2xx" >"$csv"
declare -A PID=([weft]=$weft_pid [nginx]=$nginx_pid) PORT=([weft]=$wport [nginx]=$nport)
for r in $(seq 1 "$runs"); do
  order="nginx weft"; ((r % 2 == 0)) && order="weft nginx"
  for n in $order; do
    read -r u0 s0 < <(cpu_ticks "${PID[$n]}"); read -r fu0 fs0 < <(cpu_ticks "${FPM[$n]}")
    o=$(taskset -c 1 wrk -t1 -c"$conns" -d"${dur}s" "http://127.0.0.1:${PORT[$n]}/hello.php")
    read -r u1 s1 < <(cpu_ticks "${PID[$n]}"); read -r fu1 fs1 < <(cpu_ticks "${FPM[$n]}")
    reqs=$(awk '/requests in/ {print $1}' <<<"$o"); rps=$(awk '/Requests\/sec/ {print $2}' <<<"$o")
    bad=$(awk '/Non-2xx/ {print $NF}' <<<"$o")
    awk -v n="$n" -v r="$r" -v rps="$rps" -v w=$((u1 - u0 + s1 - s0)) -v f=$((fu1 - fu0 + fs1 - fs0)) \
      -v q="$reqs" -v hz="$HZ" -v bad="${bad:-0}" \
      'BEGIN { printf "%s,%d,%s,%.3f,%.3f,%s\n", n, r, rps, w / hz * 1e6 / q, f / hz * 1e6 / q, bad }' >>"$csv"
  done
done
python3 - "$csv" "$children" "$conns" <<'PY' | tee "$out/summary.txt"
import collections, csv, statistics as st, sys
rows = list(csv.DictReader(open(sys.argv[1])))
by = collections.defaultdict(dict)
for r in rows:
    by[r["server"]][r["run"]] = r
print("hello.php, php-fpm pm=static %s workers per server, wrk -c%s; medians of %d rounds" % (sys.argv[2], sys.argv[3], len(by["weft"])))
for n in ("weft", "nginx"):
    rs = by[n].values()
    print("%-6s %8.0f req/s  %7.2f us CPU/request (web server)  %7.2f us php-fpm  non-2xx %s"
          % (n, st.median(float(r["rps"]) for r in rs), st.median(float(r["cpu_us"]) for r in rs),
             st.median(float(r["php_fpm_cpu_us"]) for r in rs), sum(int(r["non2xx"]) for r in rs)))
cpu = [float(by["weft"][k]["cpu_us"]) / float(by["nginx"][k]["cpu_us"]) for k in by["weft"]]
rps = [float(by["weft"][k]["rps"]) / float(by["nginx"][k]["rps"]) for k in by["weft"]]
print("weft/nginx CPU per request %.3f (<= 1.0: %s)  runs %s" % (st.median(cpu), "met" if st.median(cpu) <= 1.0 else "NOT MET", " ".join("%.3f" % x for x in cpu)))
print("weft/nginx req/s           %.3f (>= 1.0: %s)  runs %s" % (st.median(rps), "met" if st.median(rps) >= 1.0 else "NOT MET", " ".join("%.3f" % x for x in rps)))
PY
source scripts/lib/machine.sh
stamp | tee -a "$out/summary.txt"
