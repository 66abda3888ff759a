#!/usr/bin/env python3
"""Plots scripts/peers/busy_sweep.sh's CSV: CPU per request and resident bytes per connection
against the number of busy connections (log scale), one line per server, medians of the runs.

    python3 scripts/peers/busy_plot.py OUT.csv      # writes OUT-cpu.svg and OUT-rss.svg

A plain SVG writer (no plotting library on the machines this runs on); the experiments' plots
move to one library with issue 58.
"""
import collections
import csv
import math
import statistics
import sys

COLORS = {"fiber": "#2563eb", "nginx": "#16a34a", "thread": "#dc2626", "lwan": "#7c3aed"}
DASHES = {"fiber": "", "nginx": "6 3", "thread": "2 3", "lwan": "8 3 2 3"}
W, H, L, R, T, B = 560, 320, 70, 130, 34, 46


def medians(path):
    runs = collections.defaultdict(list)
    for row in csv.DictReader(open(path)):
        runs[(row["server"], int(row["connections"]))].append(row)
    out = collections.defaultdict(list)
    for (server, n), rows in sorted(runs.items()):
        cpu = statistics.median(float(r["cpu_us"]) for r in rows)
        rss = statistics.median(float(r["rss_bytes_per_conn"]) for r in rows)
        out[server].append((n, cpu, rss))
    return out


def nice(v):
    p = 10 ** math.floor(math.log10(v)) if v > 0 else 1
    for m in (1, 2, 2.5, 5, 10):
        if m * p >= v:
            return m * p
    return 10 * p


def plot(series, title, ylabel, pick, log_y, path):
    xs = [n for pts in series.values() for n, *_ in pts]
    ys = [pick(p) for pts in series.values() for p in pts]
    x0, x1 = math.log10(min(xs)), math.log10(max(xs))
    if log_y:
        y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
        fy = lambda v: T + (H - T - B) * (1 - (math.log10(v) - y0) / max(y1 - y0, 1e-9))
        yticks = [10 ** e for e in range(y0, y1 + 1)]
    else:
        top = nice(max(ys))
        fy = lambda v: T + (H - T - B) * (1 - v / top)
        yticks = [top * i / 4 for i in range(5)]
    fx = lambda n: L + (W - L - R) * (math.log10(n) - x0) / max(x1 - x0, 1e-9)
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="18" text-anchor="middle" font-size="14">{title}</text>']
    for v in yticks:
        y = fy(v)
        svg.append(f'<line x1="{L}" x2="{W - R}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e7eb"/>')
        svg.append(f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end">{v:g}</text>')
    for n in sorted(set(xs)):
        x = fx(n)
        svg.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{T}" y2="{H - B}" stroke="#f0f2f5"/>')
        svg.append(f'<text x="{x:.1f}" y="{H - B + 16}" text-anchor="middle">{f"{n / 1000:g}k" if n >= 1000 else n}</text>')
    svg.append(f'<text x="{(L + W - R) / 2}" y="{H - 8}" text-anchor="middle">busy keep-alive connections (log scale)</text>')
    svg.append(f'<text transform="translate(16,{(T + H - B) / 2}) rotate(-90)" text-anchor="middle">{ylabel}</text>')
    for i, (server, pts) in enumerate(sorted(series.items())):
        color, dash = COLORS.get(server, "#4b5563"), DASHES.get(server, "")
        d = " ".join(f'{"L" if k else "M"}{fx(p[0]):.1f} {fy(pick(p)):.1f}' for k, p in enumerate(pts))
        svg.append(f'<path d="{d}" fill="none" stroke="{color}" stroke-width="2" stroke-dasharray="{dash}"/>')
        for p in pts:
            svg.append(f'<circle cx="{fx(p[0]):.1f}" cy="{fy(pick(p)):.1f}" r="3" fill="{color}"/>')
        ly = T + 14 + 18 * i
        svg.append(f'<line x1="{W - R + 12}" x2="{W - R + 40}" y1="{ly}" y2="{ly}" stroke="{color}" stroke-width="2" stroke-dasharray="{dash}"/>')
        svg.append(f'<text x="{W - R + 46}" y="{ly + 4}">{server}</text>')
    svg.append("</svg>")
    open(path, "w").write("\n".join(svg) + "\n")
    print(path)


def main():
    path = sys.argv[1]
    series = medians(path)
    base = path[:-4] if path.endswith(".csv") else path
    plot(series, "CPU per request, /echo", "us of server CPU per request", lambda p: p[1], False, base + "-cpu.svg")
    plot(series, "Resident bytes per busy connection", "bytes per connection (log scale)", lambda p: max(p[2], 1), True,
         base + "-rss.svg")


if __name__ == "__main__":
    main()
