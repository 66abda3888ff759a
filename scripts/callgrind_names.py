"""Callgrind's compressed names, for the scripts that read its dumps (scripts/locked_ops.py,
scripts/parse_instr.sh).

A dump names a function or object in full once, as `(N) name`, and as `(N)` after that;
`decoder()` returns a function that takes either form and gives the full name, one table of
numbers per kind of name (functions and objects are numbered apart).
"""
import re


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
