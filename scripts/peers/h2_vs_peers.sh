#!/usr/bin/env bash
# HTTP/2: weft's CPU per request against nginx and h2o, and each one's memory per idle h2
# connection. Every server is pinned to core 0 with one worker (weft: the fiber model,
# --threads 1; nginx: worker_processes 1; h2o: num-threads 1), h2load on core 1 with 100
# connections of 10 concurrent streams each (h2load -c 100 -m 10), over TLS with ALPN h2 (the
# default) or over h2c with prior knowledge (OVER=h2c: plain listeners, http:// URLs). Paths:
# /echo (4 B `echo`, text/plain) and the sample site's 10,541 B page /haewelmann.html, the
# bytes of perf_check.sh's HTTP/1.1 page figure; every server serves the same www/.
#
#   scripts/peers/h2_vs_peers.sh [OUT_DIR]     RUNS=5 DURATION=3 OVER=tls IDLE_CONNS=2000
#                                              WEFT=target/release/weft MODEL=fiber
#   SERVERS="weft nginx h2o hyper" scripts/peers/h2_vs_peers.sh   (with the hyper/h2-crate peer)
#
# CPU per request: the server's utime + stime (/proc/PID/stat, all threads, and its children:
# nginx's worker, h2o's children if any) over one h2load run, divided by the requests h2load
# reports succeeded. Each run is `-n N` requests, N sized per server from a warm-up run so
# that a run lasts about DURATION s, not `-D`: with -D h2load counts only the requests of its
# timed window while /proc counts the whole run (its warm-up and connection setup included).
# A run's 100 connections are new, so 100 full handshakes are in every server's CPU (spread
# over the run's requests: tens of thousands at the least). Rounds alternate the servers (the order reversed every other round, as in
# scripts/perf/ab_builds.sh); medians of RUNS rounds, and the median of the same-round ratios
# weft/nginx and weft/h2o, against the targets (weft/nginx <= 0.9, weft/h2o <= 1.0). Over TLS
# h2load offers only TLS_AES_128_GCM_SHA256 (TLS13_CIPHERS), so every server encrypts with
# the same cipher; the CSV records what was negotiated.
#
# Memory per idle h2 connection: before the CPU rounds, on the fresh servers,
# scripts/idle/h2_idle_rss.py --attach opens IDLE_CONNS connections to each (TLS with ALPN h2
# or h2c, preface, SETTINGS exchanged, then held) and reads the server's VmRSS before and
# after (target for weft: <= 8 KiB per connection). IDLE_CONNS=0 skips it.
#
# The peers: nginx from peer-nginx.conf's settings plus TLS and HTTP/2, tuned for static files
# (open_file_cache, sendfile, tcp_nopush), /echo as `return 200 "echo"` with text/plain, as
# in peer-nginx.conf; `ssl_protocols TLSv1.2 TLSv1.3` (nginx before 1.23.4 leaves TLS 1.3 out by
# default, and h2load then gets TLS 1.2). On nginx before 1.25.1 HTTP/2 is `listen ... http2`,
# from 1.25.1 `http2 on;`: the version decides. h2o: `file.dir` for www/, and /echo as
# `file.file` of a 4-byte file `echo` (text/plain; h2o adds Last-Modified, ETag and
# Accept-Ranges to it): h2o has no directive that answers fixed text, and its mruby handler
# (H2O_ECHO=mruby: `[200, {"content-type" => "text/plain"}, ["echo"]]`) cost 2.4x the file's
# CPU per request on Debian's h2o 2.2.5 (7.9 against 3.3 us), so the file is the stricter peer.
# h2o gets `max-connections: 20000` (its default, 1024, would refuse most idle connections);
# it keeps its private key in a child process (neverbleed, no switch for it in 2.2.5) and runs
# as `nobody` when started as root; its children's CPU and memory are counted with its own.
# hyper (not in the default SERVERS: SERVERS="weft nginx h2o hyper" or SERVERS="weft hyper"):
# the `h2` crate behind hyper 1.x's server::conn::http2 on a current-thread tokio runtime, TLS
# from tokio-rustls on rustls' ring provider (weft's TLS stack) with ALPN h2, built here from
# scripts/peers/hyper_h2/ (its own workspace and target dir; crates.io on the first build). It
# serves /echo as weft does and the page from memory, read once at start, with weft's headers
# (hyper has no file serving or cache). Its weft/hyper ratios are information, with no target.
# SERVERS="weft nginx h2o" picks servers (weft must be one); a peer that is not installed is
# left out with a line saying so, and its ratios are empty.
#
# Each server listens on 127.0.0.1 at a port free when the script starts (the kernel's pick,
# none given twice), and counts as up once `ss -ltnp` shows its own process (the pid started
# here) listening there: a leftover server or another program on that port is not taken for
# it.
#
# OUT_DIR (default: a new temporary folder, printed) gets rounds.csv (every run), median.csv
# (per server and path), ratios.csv (path,ratio,value,target,verdict: what perf_check.sh
# reads), idle.csv and the servers' logs and configurations. Needs h2load
# (apt-get install nghttp2-client), nginx (nginx-light) and h2o (h2o), openssl, python3, taskset
# and ss (iproute2).
set -u
cd "$(dirname "$0")/../.." || exit 2
runs=${RUNS:-5}; dur=${DURATION:-3}; over=${OVER:-tls}; idle_k=${IDLE_CONNS:-2000}
model=${MODEL:-fiber}; ciphers=${TLS13_CIPHERS:-TLS_AES_128_GCM_SHA256}
conns=100; streams=10
paths=(/echo /haewelmann.html)
out=${1:-$(mktemp -d /tmp/weft-h2-peers.XXXXXX)}
mkdir -p "$out"
if [[ $over != tls && $over != h2c ]]; then echo "h2_vs_peers: OVER is tls or h2c, not $over" >&2; exit 2; fi
for tool in h2load openssl python3 taskset ss; do
  command -v "$tool" >/dev/null ||
    { echo "h2_vs_peers: $tool is missing (apt-get install nghttp2-client openssl python3 iproute2)" >&2; exit 2; }
done
servers=()
for s in ${SERVERS:-weft nginx h2o}; do
  if [[ $s == hyper ]]; then
    cargo build --release -q --manifest-path scripts/peers/hyper_h2/Cargo.toml ||
      { echo "h2_vs_peers: building scripts/peers/hyper_h2 failed: hyper left out" >&2; continue; }
  elif [[ $s != weft ]] && ! command -v "$s" >/dev/null; then
    echo "h2_vs_peers: $s is not installed (apt-get install ${s/nginx/nginx-light}): left out" >&2
    continue
  fi
  servers+=("$s")
done
if [[ " ${servers[*]} " != *" weft "* ]]; then echo "h2_vs_peers: SERVERS must include weft" >&2; exit 2; fi
if [[ -z ${WEFT:-} ]]; then
  cargo build --release -q -p weft || exit 2
  WEFT=target/release/weft
fi
ulimit -n 20000 2>/dev/null || true
www=$PWD/www
page=$www/haewelmann.html
if [[ ! -f $page ]]; then echo "h2_vs_peers: $page is missing (weft fileset www)" >&2; exit 2; fi
work=$(mktemp -d /tmp/weft-h2.XXXXXX)
declare -A PID PORT
# On exit the servers are stopped and waited for (none outlives the script); their logs and
# configurations are kept in OUT_DIR.
trap 'kill "${PID[@]}" 2>/dev/null; wait 2>/dev/null; cp "$work"/*.log "$work"/*.conf "$out"/ 2>/dev/null; rm -rf "$work"' EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
  -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null || { echo "h2_vs_peers: openssl req failed" >&2; exit 2; }
root_flag=(); nginx_user=""
if ((EUID == 0)); then root_flag=(--allow-root); nginx_user="user root;"; fi
scheme=https; idle_flag=(); proto_want=h2
if [[ $over == h2c ]]; then scheme=http; idle_flag=(--h2c); proto_want=h2c; fi

# free_port: a port of 127.0.0.1 that no socket holds now and no server here was given.
free_port() {
  local p
  while p=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') &&
    [[ " ${PORT[*]} " == *" $p "* ]]; do :; done
  echo "$p"
}
start_weft() {
  local listen=(--https "127.0.0.1:$port=$model" --tls-cert "$work/cert.pem" --tls-key "$work/key.pem")
  if [[ $over == h2c ]]; then listen=(--listen "127.0.0.1:$port=$model" --h2c); fi
  printf '[limits]\nmax_connections = 20000\n' >"$work/weft.conf"
  taskset -c 0 "$WEFT" serve "${root_flag[@]}" --keepalive-requests 1000000 --config "$work/weft.conf" --threads 1 "${listen[@]}" \
    --root "$www" --access-log off >"$work/weft.log" 2>&1 &
}
start_nginx() {
  local listen_line="listen 127.0.0.1:$port reuseport;" h2=""
  local v; v=$(nginx -v 2>&1 | sed -n 's|.*nginx/\([0-9.]*\).*|\1|p')
  # nginx 1.25.1 made HTTP/2 a server directive (`http2 on;`); before, a listen parameter.
  if [[ $(printf '%s\n' "$v" 1.25.1 | sort -V | head -1) == 1.25.1 ]]; then
    h2="http2 on;"
    [[ $over == tls ]] && listen_line="listen 127.0.0.1:$port ssl reuseport;"
  elif [[ $over == tls ]]; then
    listen_line="listen 127.0.0.1:$port ssl http2 reuseport;"
  else
    listen_line="listen 127.0.0.1:$port http2 reuseport;"
  fi
  local tls=""
  if [[ $over == tls ]]; then
    # nginx before 1.23.4 offers TLS 1.0-1.2 only unless told: TLS 1.3, as the others.
    tls="ssl_protocols TLSv1.2 TLSv1.3; ssl_certificate $work/cert.pem; ssl_certificate_key $work/key.pem;"
  fi
  # peer-nginx.conf's settings, tuned for static files, with TLS and HTTP/2. keepalive_requests
  # also bounds the requests of an HTTP/2 connection (nginx 1.19.7+; 1000 by default).
  cat >"$work/nginx.conf" <<EOF
$nginx_user
worker_processes 1;
daemon off;
pid nginx.pid;
error_log stderr warn;
events { worker_connections 20000; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    open_file_cache max=1000 inactive=60s;
    open_file_cache_valid 60s;
    keepalive_requests 1000000;
    keepalive_timeout 75s;
    types { text/html html; application/octet-stream bin; }
    server {
        $listen_line
        $h2
        $tls
        root $www;
        location = /echo { default_type text/plain; return 200 "echo"; }
    }
}
EOF
  taskset -c 0 nginx -p "$work" -c "$work/nginx.conf" >"$work/nginx.log" 2>&1 &
}
start_h2o() {
  local tls="" echo_handler
  if [[ $over == tls ]]; then
    tls="  ssl:
    certificate-file: $work/cert.pem
    key-file: $work/key.pem"
  fi
  if [[ ${H2O_ECHO:-file} == file ]]; then
    printf 'echo' >"$work/echo.txt"
    echo_handler="file.file: $work/echo.txt"
  else
    echo_handler='mruby.handler: |
          Proc.new do |env|
            [200, {"content-type" => "text/plain"}, ["echo"]]
          end'
  fi
  # h2o drops to `nobody` when started as root: the files it reads after that must be readable
  # by all (www/ is; the certificate is read before).
  cat >"$work/h2o.conf" <<EOF
num-threads: 1
max-connections: 20000
http2-idle-timeout: 75
error-log: $work/h2o-error.log
listen:
  host: 127.0.0.1
  port: $port
$tls
hosts:
  default:
    paths:
      /echo:
        $echo_handler
      /:
        file.dir: $www
EOF
  chmod 755 "$work"
  taskset -c 0 h2o -c "$work/h2o.conf" >"$work/h2o.log" 2>&1 &
}
start_hyper() {
  local tls=("$work/cert.pem" "$work/key.pem")
  [[ $over == h2c ]] && tls=()
  taskset -c 0 scripts/peers/hyper_h2/target/release/peer-hyper-h2 "127.0.0.1:$port" "$www" "${tls[@]}" \
    >"$work/hyper.log" 2>&1 &
}
for s in "${servers[@]}"; do
  port=$(free_port); PORT[$s]=$port
  # taskset execs the server: $! is the server's own pid.
  "start_$s"; PID[$s]=$!
done
# wait_own_listener SERVER: waits up to 10 s for SERVER's process (PID) to listen on its PORT
# itself, as `ss -ltnp` shows (nginx's worker holds the socket too: the pid need only be
# among its holders). If it exits first or is not listening by then, prints its log and exits.
wait_own_listener() {
  local s=$1 state
  for _ in $(seq 100); do
    ss -Hltnp "sport = :${PORT[$s]}" 2>/dev/null | grep -q "pid=${PID[$s]}," && return 0
    # Exited (a zombie until reaped): it will not listen.
    state=$(sed 's/.*) //' "/proc/${PID[$s]}/stat" 2>/dev/null | cut -d' ' -f1)
    [[ -z $state || $state == Z ]] && break
    sleep 0.1
  done
  echo "h2_vs_peers: $s (pid ${PID[$s]}) is not listening on 127.0.0.1:${PORT[$s]}; its log:" >&2
  cat "$work/$s.log" >&2; exit 1
}
for s in "${servers[@]}"; do wait_own_listener "$s"; done
# shellcheck source=scripts/lib/cpu_ticks.sh
source scripts/lib/cpu_ticks.sh
HZ=$(getconf CLK_TCK)

# Memory per idle connection, on the fresh servers.
echo "server,transport,connections,rss_before_kib,rss_after_kib,bytes_per_connection,open_after" >"$out/idle.csv"
if ((idle_k > 0)); then
  for s in "${servers[@]}"; do
    if python3 scripts/idle/h2_idle_rss.py --attach "${PID[$s]}" "${PORT[$s]}" "$s" "${idle_flag[@]}" "$idle_k" \
      >"$work/idle-$s.csv"; then
      tail -n +2 "$work/idle-$s.csv" >>"$out/idle.csv"
    else
      echo "h2_vs_peers: idle connections to $s failed" >&2
    fi
  done
  sleep 1
fi

# h2run SERVER PATH N: one h2load run; prints "requests succeeded rps protocol cipher".
h2run() {
  local o
  o=$(taskset -c 1 h2load -c "$conns" -m "$streams" -n "$3" ${ciphers:+--tls13-ciphers="$ciphers"} \
    "$scheme://127.0.0.1:${PORT[$1]}$2" 2>&1)
  awk '/^finished in/ {rps = $4}
    /^requests:/ {n = $2; ok = $8}
    /^Application protocol:/ {proto = $3}
    /^Cipher:/ {cipher = $2}
    END {print (n == "" ? 0 : n), (ok == "" ? 0 : ok), (rps == "" ? 0 : rps), (proto == "" ? "none" : proto), (cipher == "" ? "-" : cipher)}' <<<"$o"
}

echo "server,path,run,requests,succeeded,rps,cpu_us,user_us,sys_us,protocol,cipher" >"$out/rounds.csv"
declare -A N
for path in "${paths[@]}"; do
  # Warm-up run per server (not recorded): its rate sizes N for about DURATION s per run.
  for s in "${servers[@]}"; do
    read -r _ ok rps proto _ < <(h2run "$s" "$path" $((conns * streams * 20)))
    if [[ $proto != "$proto_want" || $ok == 0 ]]; then
      echo "h2_vs_peers: $s $path: no HTTP/2 answers (protocol $proto, $ok succeeded); its log:" >&2
      cat "$work/$s.log" >&2; exit 1
    fi
    N[$s]=$(awk -v r="$rps" -v d="$dur" -v c="$conns" 'BEGIN { n = int(r * d / c) * c; print (n < 10 * c ? 10 * c : n) }')
  done
  for r in $(seq 1 "$runs"); do
    order=("${servers[@]}")
    if ((r % 2 == 0)); then mapfile -t order < <(printf '%s\n' "${servers[@]}" | tac); fi
    for s in "${order[@]}"; do
      read -r u0 k0 < <(cpu_ticks "${PID[$s]}")
      read -r n ok rps proto cipher < <(h2run "$s" "$path" "${N[$s]}")
      read -r u1 k1 < <(cpu_ticks "${PID[$s]}")
      if ((ok < n)); then echo "h2_vs_peers: $s $path run $r: $ok of $n requests succeeded" >&2; fi
      awk -v s="$s" -v p="$path" -v r="$r" -v n="$n" -v ok="$ok" -v rps="$rps" -v u=$((u1 - u0)) \
        -v k=$((k1 - k0)) -v hz="$HZ" -v proto="$proto" -v cipher="$cipher" 'BEGIN {
          if (ok > 0) c = sprintf("%.3f,%.3f,%.3f", (u + k) / hz * 1e6 / ok, u / hz * 1e6 / ok, k / hz * 1e6 / ok)
          else c = ",,"
          printf "%s,%s,%d,%d,%d,%s,%s,%s,%s\n", s, p, r, n, ok, rps, c, proto, cipher }' >>"$out/rounds.csv"
    done
  done
done

# shellcheck source=scripts/lib/machine.sh
source scripts/lib/machine.sh
python3 - "$out" "$over" "$runs" "$conns" "$streams" "$(stamp)" <<'PY'
import collections, csv, os, statistics as st, sys
out, over, runs, c, m, stamp = sys.argv[1:]
rows = [r for r in csv.DictReader(open(os.path.join(out, "rounds.csv"))) if r["cpu_us"]]
by = collections.defaultdict(list)
for r in rows:
    by[(r["server"], r["path"])].append(r)
paths = list(dict.fromkeys(r["path"] for r in rows))
servers = list(dict.fromkeys(r["server"] for r in rows))
print(f"== HTTP/2 over {'TLS (ALPN h2)' if over == 'tls' else 'h2c (prior knowledge)'}: h2load -c {c} -m {m} on core 1,"
      f" one worker on core 0, median of {runs} rounds")
print(f"{'path':<18} {'server':<6} {'req/s':>9} {'CPU us/req':>11} {'user':>7} {'sys':>7}  cipher")
with open(os.path.join(out, "median.csv"), "w") as f:
    f.write("server,path,rps,cpu_us,user_us,sys_us\n")
    for p in paths:
        for s in servers:
            rs = by.get((s, p))
            if not rs:
                continue
            med = [st.median(float(r[k]) for r in rs) for k in ("rps", "cpu_us", "user_us", "sys_us")]
            f.write("%s,%s,%.0f,%.3f,%.3f,%.3f\n" % (s, p, *med))
            print(f"{p:<18} {s:<6} {med[0]:>9.0f} {med[1]:>11.3f} {med[2]:>7.3f} {med[3]:>7.3f}  {rs[0]['cipher']}")
targets = {"nginx": 0.9, "h2o": 1.0, "hyper": None}
with open(os.path.join(out, "ratios.csv"), "w") as f:
    f.write("path,ratio,value,target,verdict\n")
    for p in paths:
        weft = {r["run"]: float(r["cpu_us"]) for r in by.get(("weft", p), [])}
        for peer, t in targets.items():
            peer_runs = {r["run"]: float(r["cpu_us"]) for r in by.get((peer, p), [])}
            rat = [weft[k] / v for k, v in peer_runs.items() if k in weft and v > 0]
            if not rat:
                continue
            v = st.median(rat)
            verdict = "info" if t is None else "met" if v <= t else "NOT MET"
            name = "echo" if p == "/echo" else "page"
            f.write(f"{name},weft/{peer},{v:.3f},{'' if t is None else t},{verdict}\n")
            goal = "no target" if t is None else f"<= {t}: {verdict}"
            print(f"{p:<18} weft/{peer:<5} CPU/request {v:.3f} ({goal})  runs {' '.join('%.3f' % x for x in rat)}")
idle = list(csv.DictReader(open(os.path.join(out, "idle.csv"))))
for r in idle:
    verdict = ("met" if float(r["bytes_per_connection"]) <= 8192 else "NOT MET") if r["server"] == "weft" else "info"
    print(f"idle h2 connection ({r['transport']}, {r['connections']}) {r['server']:<6} {r['bytes_per_connection']:>7} B"
          f" ({r['open_after']} open after 2 s){'  (<= 8192: ' + verdict + ')' if r['server'] == 'weft' else ''}")
print(stamp)
print(f"raw: {out}")
PY
