#!/usr/bin/env bash
# Same-round A/B of two or more builds of crates/server/examples/techempower.rs on 16-deep
# pipelined /plaintext, c=256 (the rust_peers.sh test): each build on core 0 with one worker,
# wrk -t1 on core 1, rounds alternating. Prints medians and each build's per-round ratio to the
# first (w1).
#
#   scripts/peers/techempower_ab.sh RUNS OUT.csv BUILD...
#   e.g. scripts/peers/techempower_ab.sh 7 /tmp/te.csv /tmp/te-before target/release/examples/techempower
#
# Needs wrk (apt-get install wrk).
set -u
cd "$(dirname "$0")/../.."
command -v wrk >/dev/null || { echo "techempower_ab: wrk is missing (apt-get install wrk)" >&2; exit 2; }
ulimit -n 20000 2>/dev/null || true
source scripts/lib/cpu_ticks.sh
source scripts/lib/wait_listening.sh
runs=$1; out=$2; shift 2
work=$(mktemp -d)
declare -A PID PORT; i=0
for b in "$@"; do
  i=$((i + 1)); p=$((18600 + i))
  taskset -c 0 "$b" "127.0.0.1:$p" 1 >"$work/w$i.log" 2>&1 &
  PID[w$i]=$!; PORT[w$i]=$p
done
trap 'kill "${PID[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
for n in "${!PID[@]}"; do wait_listening "$n" "${PORT[$n]}" "$work/$n.log"; done
HZ=$(getconf CLK_TCK)
echo "name,run,rps,cpu_us" > $out
for n in "${!PID[@]}"; do taskset -c 1 wrk -t1 -c256 -d1s -s scripts/clients/pipeline.lua http://127.0.0.1:${PORT[$n]}/plaintext -- 16 >/dev/null; done
for r in $(seq 1 $runs); do for n in $(printf '%s\n' "${!PID[@]}" | sort); do
  read -r u0 s0 < <(cpu_ticks ${PID[$n]})
  o=$(taskset -c 1 wrk -t1 -c256 -d3s -s scripts/clients/pipeline.lua http://127.0.0.1:${PORT[$n]}/plaintext -- 16)
  read -r u1 s1 < <(cpu_ticks ${PID[$n]})
  q=$(awk '/requests in/ {print $1}' <<<"$o"); rps=$(awk '/Requests\/sec/ {print $2}' <<<"$o")
  python3 -c "print('$n,$r,$rps,%.3f' % (($u1-$u0+$s1-$s0)/$HZ/$q*1e6))" >> $out
done; done
python3 - $out <<'PY'
import csv,sys,statistics as st,collections
rows=list(csv.DictReader(open(sys.argv[1]))); by=collections.defaultdict(dict)
for r in rows: by[r['run']][r['name']]=(float(r['rps']),float(r['cpu_us']))
names=sorted({r['name'] for r in rows})
for n in names: print(n,'rps %.0f cpu %.3f'%(st.median(by[k][n][0] for k in by), st.median(by[k][n][1] for k in by)))
for n in names[1:]:
  print(n,'/w1 rps', '%.3f'%st.median(by[k][n][0]/by[k]['w1'][0] for k in by), 'cpu', '%.3f'%st.median(by[k][n][1]/by[k]['w1'][1] for k in by), [round(by[k][n][1]/by[k]['w1'][1],3) for k in sorted(by)])
PY
