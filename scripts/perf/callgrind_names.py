"""Callgrind's compressed names, for the scripts that read its dumps (scripts/perf/locked_ops.py,
scripts/perf/code_lines.py, scripts/perf/parse_instr.sh), and the per-instruction counts of a dump.

A dump names a function or object in full once, as `(N) name`, and as `(N)` after that;
`decoder()` returns a function that takes either form and gives the full name, one table of
numbers per kind of name (functions and objects are numbered apart).
"""
import collections
import re
import sys


def decoder():
    table = {}

    def name(token):
        m = re.match(r"\((\d+)\)(?: (.*))?", token)
        if not m:
            return token
        if m.group(2):
            table[m.group(1)] = m.group(2)
        return table.get(m.group(1), m.group(1))

    return name


def instruction_counts(path, binary, tool):
    """Instructions run at each address of BINARY in the callgrind dump at PATH (recorded with
    `--dump-instr=yes`), and the function each address is in: `(counts, function_of)`. Exits
    with a message naming TOOL when the dump has no instruction positions."""
    function_name, object_name = decoder(), decoder()
    counts, function_of = collections.Counter(), {}
    fn = obj = None
    after_call = False
    addr = 0
    saw_positions = False
    suffix = "/" + binary.split("/")[-1]
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("positions:"):
            saw_positions = "instr" in line
        elif line.startswith("ob="):
            obj = object_name(line[3:])
        elif line.startswith("fn="):
            fn, after_call = function_name(line[3:]), False
        elif line.startswith("cfn="):
            function_name(line[4:])
        elif line.startswith("cob="):
            object_name(line[4:])
        elif line.startswith("calls="):
            after_call = True
        elif line and line[0] in "0123456789+-*":
            parts = line.split()
            a = parts[0]
            if a.startswith("0x"):
                addr = int(a, 16)
            elif a[0] in "+-":
                step = int(a[1:], 16) if a[1:].startswith("0x") else int(a[1:])
                addr = addr + step if a[0] == "+" else addr - step
            if after_call:
                # The line after `calls=` is the call's inclusive cost, not this instruction's.
                after_call = False
                continue
            if obj and obj.endswith(suffix) and len(parts) >= 3:
                counts[addr] += int(parts[2])
                function_of[addr] = fn
    if not saw_positions:
        sys.exit("%s: the dump has no instruction positions (record with CG_OPTS=--dump-instr=yes)" % tool)
    return counts, function_of


def dump_from_args(tool):
    """For a script run as `TOOL.py CALLGRIND_DUMP BINARY REQUESTS`: BINARY, REQUESTS and the
    dump's per-instruction counts, `(binary, requests, counts, function_of)`."""
    if len(sys.argv) != 4:
        sys.exit("usage: %s.py CALLGRIND_DUMP BINARY REQUESTS" % tool)
    path, binary, requests = sys.argv[1], sys.argv[2], float(sys.argv[3])
    return (binary, requests) + instruction_counts(path, binary, tool)
