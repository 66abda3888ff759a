#!/usr/bin/env bash
# weft as an embedded library beside Rust servers, on the TechEmpower plaintext and json tests:
# crates/server/examples/techempower.rs (weft's fiber model) against may_minihttp and
# actix-web hello-world servers built from crates.io in bench/peers/ (their own folders and
# target dir, not workspace members). Each server has one worker, pinned to SERVER_CORES
# (default 0); wrk -t$WRK_THREADS (default 1) on CLIENT_CORES (default 1). Each round runs every
# test against every server in turn, so same-round ratios cancel the machine's drift. Prints one
# CSV row per run (with how busy the server's and the client's cores were), medians, and weft's
# same-round ratios; a test whose client cores were 90% busy or more is marked client-bound:
# there req/s shows the client's speed more than the servers'.
#
#   scripts/peers/rust_peers.sh OUT.csv        RUNS=5 DURATION=3 CONNS=256
#   SERVER_CORES=0 CLIENT_CORES=4-11 WRK_THREADS=8 scripts/peers/rust_peers.sh OUT.csv   (more cores)
#
# Tests: plaintext with 16 requests pipelined per write, plaintext, json. Needs wrk (apt-get
# install wrk) and network access to crates.io for the first build of the peers. Where a C
# compiler is installed, also plaintext-pipelined-lean: the pipelined test with
# scripts/clients/pipeline_client.c as the client (the same requests; about 0.7x wrk's CPU per
# answer, so that on a 2-core machine the server's core, not the client's, is the limit; one
# client thread whatever WRK_THREADS, so its client_busy is of one core among CLIENT_CORES);
# and plaintext-lean and json-lean: plaintext and json from that client with one request per
# write, where with wrk at c=256 the client's core is the limit (CPU per request is then the
# server's work, not its work plus the sleeps of waiting for wrk).
set -u
out=${1:?usage: scripts/peers/rust_peers.sh OUT.csv}
runs=${RUNS:-5}; dur=${DURATION:-3}; c=${CONNS:-256}
server_cores=${SERVER_CORES:-0}; client_cores=${CLIENT_CORES:-1}; wrk_threads=${WRK_THREADS:-1}
cd "$(dirname "$0")/../.."
command -v wrk >/dev/null || { echo "rust_peers: wrk is missing (apt-get install wrk)" >&2; exit 2; }
cargo build --release -q -p weft --example techempower || exit 2
for p in may_minihttp actix; do
  CARGO_TARGET_DIR=bench/peers/target cargo build --release -q --manifest-path "bench/peers/$p/Cargo.toml" ||
    { echo "rust_peers: building the $p peer failed" >&2; exit 2; }
done
ulimit -n 20000 2>/dev/null || true
work=$(mktemp -d)
tests=(plaintext-pipelined plaintext json)
if command -v cc >/dev/null && cc -O2 -o "$work/pipeline_client" scripts/clients/pipeline_client.c; then
  tests+=(plaintext-pipelined-lean plaintext-lean json-lean)
else
  echo "rust_peers: no C compiler (cc): the -lean tests skipped" >&2
fi
declare -A PID PORT
start() { # NAME PORT CMD...
  local name=$1 port=$2; shift 2
  taskset -c "$server_cores" "$@" >"$work/$name.log" 2>&1 &
  PID[$name]=$!; PORT[$name]=$port
}
start weft 18401 target/release/examples/techempower 127.0.0.1:18401 1
start may_minihttp 18402 bench/peers/target/release/peer-may-minihttp 127.0.0.1:18402 1
start actix 18403 bench/peers/target/release/peer-actix 127.0.0.1:18403 1
trap 'kill "${PID[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
source scripts/lib/wait_listening.sh
for n in "${!PID[@]}"; do wait_listening "$n" "${PORT[$n]}" "$work/$n.log"; done
HZ=$(getconf CLK_TCK)
source scripts/lib/cpu_ticks.sh
n_server=$(taskset -c "$server_cores" nproc); n_client=$(taskset -c "$client_cores" nproc)
TIMEFORMAT='%U %S %R'
echo "test,server,run,rps,cpu_us,server_busy,client_busy" >"$out"
source scripts/lib/machine.sh
stamp
for r in $(seq 1 "$runs"); do
  for t in "${tests[@]}"; do
    for n in weft may_minihttp actix; do
      client=(wrk -t"$wrk_threads" -c"$c" -d"${dur}s")
      case $t in
        plaintext-pipelined) url=/plaintext; script=(-s scripts/clients/pipeline.lua) ; sargs=(-- 16) ;;
        plaintext) url=/plaintext; script=(); sargs=() ;;
        json) url=/json; script=(); sargs=() ;;
        plaintext-pipelined-lean) # HOST:PORT PATH CONNS DEPTH SECONDS
          client=("$work/pipeline_client" "127.0.0.1:${PORT[$n]}" /plaintext "$c" 16 "$dur") ;;
        plaintext-lean | json-lean) # one request per write: the server's core is the limit
          client=("$work/pipeline_client" "127.0.0.1:${PORT[$n]}" "/${t%-lean}" "$c" 1 "$dur") ;;
      esac
      [[ $t == *-lean ]] ||
        client+=("${script[@]}" "http://127.0.0.1:${PORT[$n]}$url" "${sargs[@]}")
      read -r u0 s0 < <(cpu_ticks "${PID[$n]}")
      # wrk's own user and system time and the wall time, from bash's `time` (last line).
      { time taskset -c "$client_cores" "${client[@]}" >"$work/wrk.out"; } 2>"$work/wrk.time"
      read -r u1 s1 < <(cpu_ticks "${PID[$n]}")
      o=$(cat "$work/wrk.out")
      read -r cu cs wall < <(tail -1 "$work/wrk.time")
      reqs=$(awk '/requests in/ {print $1}' <<<"$o"); rps=$(awk '/Requests\/sec/ {print $2}' <<<"$o")
      if grep -q "Non-2xx\|Socket errors" <<<"$o"; then echo "# $t $n run $r: $(grep -E 'Non-2xx|Socket errors' <<<"$o")" >&2; fi
      awk -v t="$t" -v n="$n" -v r="$r" -v rps="$rps" -v ticks=$((u1 - u0 + s1 - s0)) -v q="$reqs" -v hz="$HZ" \
        -v cu="$cu" -v cs="$cs" -v wall="$wall" -v ns="$n_server" -v nc="$n_client" \
        'BEGIN { printf "%s,%s,%d,%s,%.3f,%.0f,%.0f\n", t, n, r, rps, ticks / hz * 1e6 / q,
                 100 * ticks / hz / wall / ns, 100 * (cu + cs) / wall / nc }' | tee -a "$out"
    done
  done
done
python3 - "$out" <<'PY'
import collections, csv, statistics as st, sys
rows = list(csv.DictReader(open(sys.argv[1])))
by = collections.defaultdict(dict)
for r in rows:
    by[(r["test"], r["server"])][r["run"]] = r
print("%-24s %-13s %12s %12s %18s %18s %12s %12s" % ("test", "server", "req/s", "us CPU/req",
      "weft/it CPU", "weft/it req/s", "server busy", "client busy"))
bound = []
for t in ("plaintext-pipelined", "plaintext", "json", "plaintext-pipelined-lean", "plaintext-lean",
          "json-lean"):
    for n in ("weft", "may_minihttp", "actix"):
        rs = by[(t, n)]
        if not rs:
            continue
        rps = st.median(float(x["rps"]) for x in rs.values())
        cpu = st.median(float(x["cpu_us"]) for x in rs.values())
        w = by[(t, "weft")]
        rc = st.median(float(w[k]["cpu_us"]) / float(rs[k]["cpu_us"]) for k in rs)
        rr = st.median(float(w[k]["rps"]) / float(rs[k]["rps"]) for k in rs)
        # Files written before the busy columns existed read as unknown.
        busy = lambda col: st.median(float(x.get(col) or "nan") for x in rs.values())
        sb, cb = busy("server_busy"), busy("client_busy")
        if cb >= 90:
            bound.append("%s/%s" % (t, n))
        print("%-24s %-13s %12.0f %12.3f %18.3f %18.3f %11.0f%% %11.0f%%" % (t, n, rps, cpu, rc, rr, sb, cb))
if bound:
    print("client-bound (client cores >= 90%% busy; req/s there is mostly the client's): %s" % ", ".join(bound))
PY
