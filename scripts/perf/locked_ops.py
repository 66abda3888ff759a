#!/usr/bin/env python3
"""Atomic read-modify-write instructions per request, by function, from a callgrind dump.

Each `lock`-prefixed instruction, and each `xchg` with a memory operand (locked implicitly),
costs tens of cycles whatever its instruction count, so an instruction count alone does not
show them. Counts come from a dump recorded with per-instruction positions:

    CG_OPTS=--dump-instr=yes KEEP=/tmp/echo.cg scripts/perf/instr_per_request.sh weft 18400 /echo 1 -- \
        target/release/weft serve --listen 127.0.0.1:18400=fiber --threads 1
    scripts/perf/locked_ops.py /tmp/echo.cg target/release/weft 2000

The last argument is the number of requests counted (2000 * DEPTH for instr_per_request.sh).
Only instructions of BINARY are looked at (libc's are not). Needs objdump (binutils).
"""
import collections
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from callgrind_names import dump_from_args  # noqa: E402


def main():
    binary, requests, counts, function_of = dump_from_args("locked_ops")
    dis = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", "-C", binary],
        capture_output=True, text=True, check=True,
    ).stdout
    locked = collections.Counter()
    for line in dis.splitlines():
        m = re.match(r"\s*([0-9a-f]+):\s*((lock\s+\S+)|(xchg\s+\S*\(.*))", line)
        if not m:
            continue
        a = int(m.group(1), 16)
        if counts.get(a):
            op = m.group(2).split()[0] if not m.group(3) else m.group(3)
            locked[(function_of[a], " ".join(op.split()[:2]))] += counts[a]
    for (f, op), c in locked.most_common(30):
        print("%6.2f  %-14s %s" % (c / requests, op, f[:110]))
    print("locked operations per request: %.2f" % (sum(locked.values()) / requests))


if __name__ == "__main__":
    main()
