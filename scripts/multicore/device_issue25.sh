#!/usr/bin/env bash
# Issue 25's figures the 2-core machine cannot take, in one call of the lent 16-core machine
# (about 6 minutes with the defaults; the device's per-call limit is 10):
#   1. /echo at c=50 and c=1000 against ONE worker (weft's fiber model, nginx with one worker
#      process, and the bare epoll floor where it is given), the server on core 0 and wrk with
#      WRK_THREADS threads on CLIENT_CORES, so the client is not the limit as wrk's one core is
#      on the 2-core machine (BENCHMARKS.md, "A client that is not the limit at /echo c=50"):
#      scripts/perf/ab_builds.sh with THREADS=1.
#   2. scripts/multicore/multicore.sh PARTS="A D": scaling to 1/2/4/8 workers against nginx, without and
#      with 16 pipelined requests per write (D: the server's cores, not the client's, the limit).
#
#   scripts/multicore/device_issue25.sh OUT_DIR        RUNS=5 DURATION=3 CLIENT_CORES=8-15 WRK_THREADS=8
#                                            MC_RUNS=3 MC_DURATION=3 PARTS="A D" (empty: skip 2)
#
# weft is $WEFT (default target/release/weft; WEFT and FLOOR relative to the repository root);
# the floor is $FLOOR if set (a binary built from
# scripts/floors/epoll_floor.c on this machine, `cc -O2 -static -o FLOOR scripts/floors/epoll_floor.c`, since
# the lent machine may have no compiler), else it is built here where cc exists, else left out.
# wrk, nginx, taskset and python3 come from PATH (on a machine with no network, the bundle of
# scripts/multicore/carry_bundle.sh: PATH="$PWD/DIR/bin:$PATH"). Writes OUT_DIR/c50.{csv,txt},
# OUT_DIR/c1000.{csv,txt} and OUT_DIR/multicore/.
set -u
out=${1:?usage: scripts/multicore/device_issue25.sh OUT_DIR}
cd "$(dirname "$0")/../.."
mkdir -p "$out"
weft=${WEFT:-target/release/weft}
for tool in wrk nginx taskset python3 "$weft"; do
  command -v "$tool" >/dev/null || { echo "device_issue25: $tool is missing" >&2; exit 2; }
done
floor=${FLOOR:-}
if [[ -z $floor ]] && command -v cc >/dev/null; then
  floor=$(mktemp /tmp/epoll_floor.XXXXXX)
  trap 'rm -f "$floor"' EXIT
  cc -O2 -o "$floor" scripts/floors/epoll_floor.c || floor=""
fi
builds=("$weft")
[[ -n $floor ]] && builds+=("$floor")
ulimit -n 20000 2>/dev/null || true
export THREADS=1 SERVER_CORES=0 CLIENT_CORES=${CLIENT_CORES:-8-15} WRK_THREADS=${WRK_THREADS:-8}
for c in 50 1000; do
  echo "== /echo c=$c, one worker, wrk -t$WRK_THREADS on cores $CLIENT_CORES (w1 weft${floor:+, w2 the floor})"
  scripts/perf/ab_builds.sh "$out/c$c.csv" "${RUNS:-5}" "$c" /echo "${builds[@]}" | tee "$out/c$c.txt"
done
unset THREADS SERVER_CORES
if [[ -n ${PARTS-A D} ]]; then
  echo "== multicore.sh PARTS=\"${PARTS-A D}\""
  PARTS=${PARTS-A D} RUNS=${MC_RUNS:-3} DURATION=${MC_DURATION:-3} WEFT=$weft \
    scripts/multicore/multicore.sh "$out/multicore"
fi
