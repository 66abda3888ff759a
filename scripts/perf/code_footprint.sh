#!/usr/bin/env bash
# What it costs a request to run its code from many cache lines rather than few, measured on
# the floor (scripts/floors/epoll_floor.c) with the same extra instructions per request twice: in one
# 64-byte loop ("compact") and spread over LINES functions of their own line ("spread"). Between
# two requests the kernel's TCP path evicts the instruction cache, so each line a request runs
# is fetched again; the spread build's extra CPU per request over the compact one is that
# price (BENCHMARKS.md, "Where the user time goes"). Runs scripts/perf/ab_builds.sh: the bare
# floor (w1), compact (w2), spread (w3) and nginx, /echo at 50 connections.
#
#   scripts/perf/code_footprint.sh OUT.csv [RUNS]      LINES=400 (functions), NOPS=12 (per function)
#
# Needs a C compiler, python3, wrk and nginx.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: scripts/perf/code_footprint.sh OUT.csv [RUNS]}; runs=${2:-7}
lines=${LINES:-400}; nops=${NOPS:-12}
command -v cc >/dev/null || { echo "code_footprint: no C compiler (cc)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Each request runs LINES * NOPS no-ops (no dependencies between them: only where they are
# fetched from differs) before its send.
python3 - "$lines" "$nops" scripts/floors/epoll_floor.c "$work/floor_fp.c" <<'PY'
import sys
lines, nops, src_path, out_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
body = '"' + "nop\\n" * nops + '"'
fns = "".join(
    "__attribute__((noinline, aligned(64))) static void f%d(void) { __asm__ volatile(%s); }\n"
    % (i, body) for i in range(lines))
work = ("static void work(void) {\n#ifdef SPREAD\n" + "".join(" f%d();\n" % i for i in range(lines))
        + "#else\n for (int i = 0; i < %d; i++) { __asm__ volatile(%s); }\n#endif\n}\n" % (lines, body))
src = open(src_path).read()
anchor = "int main("
send = "send(fd, RESPONSE,"
assert anchor in src and send in src, "epoll_floor.c changed: update code_footprint.sh"
src = src.replace(anchor, fns + work + anchor).replace(send, "work(); " + send)
open(out_path, "w").write(src)
PY
cc -O2 -o "$work/floor" scripts/floors/epoll_floor.c
cc -O2 -I scripts/floors -o "$work/floor_compact" "$work/floor_fp.c"
cc -O2 -I scripts/floors -DSPREAD -o "$work/floor_spread" "$work/floor_fp.c"
scripts/perf/ab_builds.sh "$out" "$runs" 50 /echo "$work/floor" "$work/floor_compact" "$work/floor_spread"
