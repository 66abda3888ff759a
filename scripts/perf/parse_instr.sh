#!/usr/bin/env bash
# User-space instructions per parsed request head, for each input of the parser benchmark
# (crates/http/benches/parse.rs: cgi_paper, browser_40, short), counted by valgrind's callgrind:
# the deterministic A/B figure for a parser change, where the benchmark's times move by +-15%
# on a shared VM. Builds the benchmark, runs each input for one second under callgrind, and
# prints the inclusive instructions of `Parser::parse` over its number of calls.
#
#   scripts/perf/parse_instr.sh            (needs valgrind and python3: apt-get install valgrind)
set -u
cd "$(dirname "$0")/../.."
for tool in valgrind python3; do
  command -v "$tool" >/dev/null || { echo "parse_instr: $tool is missing (apt-get install valgrind python3)" >&2; exit 2; }
done
bin=$(cargo bench -p weft-http --bench parse --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "parse" and m.get("executable"):
        print(m["executable"])')
[[ -x $bin ]] || { echo "parse_instr: the parse benchmark did not build" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for input in cgi_paper browser_40 short; do
  valgrind --tool=callgrind --callgrind-out-file="$work/cg" "$bin" --bench "weft/$input" \
    --profile-time 1 >/dev/null 2>&1 || { echo "parse_instr: callgrind failed on $input" >&2; exit 1; }
  PYTHONPATH=scripts/perf python3 - "$work/cg" "$input" <<'PY'
import sys
from callgrind_names import decoder
name = decoder()
calls, cost, callee, pending = 0, 0, None, None
for line in open(sys.argv[1]):
    line = line.rstrip("\n")
    if line.startswith("cfn="):
        callee = name(line[4:])
    elif line.startswith("fn="):
        name(line[3:])
    elif line.startswith("calls="):
        pending = int(line[6:].split()[0])
    elif pending is not None:
        # The line after `calls=` holds the inclusive cost of those calls.
        if callee and callee.endswith("Parser::parse"):
            calls += pending
            cost += int(line.split()[1])
        pending = None
if not calls:
    sys.exit("parse_instr: no calls of Parser::parse in the profile")
print("%-10s instructions/head %.0f (%d heads)" % (sys.argv[2], cost / calls, calls))
PY
done
