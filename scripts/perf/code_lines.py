#!/usr/bin/env python3
"""Code cache lines (64 bytes) a request runs, by function, from a callgrind dump.

Between two requests of one connection the kernel runs its TCP path for every other
connection, which evicts the instruction cache: each line of code a request runs is fetched
again. How many lines a request spreads its instructions over therefore costs CPU time that
the instruction count does not show (BENCHMARKS.md, "Where the user time goes": the same
4,800 no-ops per request cost 0.5-0.9 us more spread over 400 lines than in one loop).
A line counts as often as its most-run instruction, at most once per request. Counts come from
a dump recorded with per-instruction positions:

    CG_OPTS=--dump-instr=yes KEEP=/tmp/echo.cg scripts/perf/instr_per_request.sh weft 18400 /echo 1 -- \\
        target/release/weft serve --listen 127.0.0.1:18400=fiber --threads 1
    scripts/perf/code_lines.py /tmp/echo.cg target/release/weft 2000

The last argument is the number of requests counted (CONNS * 100 * DEPTH for
instr_per_request.sh). Only BINARY's code is counted (libc's is not).
"""
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from callgrind_names import dump_from_args  # noqa: E402


def main():
    binary, requests, counts, function_of = dump_from_args("code_lines")
    line_runs = collections.Counter()
    line_fn = {}
    for addr, n in counts.items():
        line = addr >> 6
        if n > line_runs[line]:
            line_runs[line] = n
            line_fn[line] = function_of[addr]
    by_fn = collections.Counter()
    instr_fn = collections.Counter()
    for line, n in line_runs.items():
        by_fn[line_fn[line]] += min(1.0, n / requests)
    for addr, n in counts.items():
        instr_fn[function_of[addr]] += n / requests
    print("%7s %7s %6s  %s" % ("lines", "instr", "instr/line", "function"))
    for f, lines in by_fn.most_common(25):
        print("%7.1f %7.0f %6.1f  %s" % (lines, instr_fn[f], instr_fn[f] / lines, f[:100]))
    total = sum(by_fn.values())
    if not total:
        sys.exit("code_lines: no instructions of %s in the dump (is it the binary the dump ran?)"
                 % binary)
    instr = sum(counts.values()) / requests
    print("code lines per request: %.0f (%.0f instructions of %s, %.1f per line)"
          % (total, instr, binary.split("/")[-1], instr / total))


if __name__ == "__main__":
    main()
