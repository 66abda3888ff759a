#!/usr/bin/env python3
"""A/B of two weft builds on keep-alive load: both serve at once (core 0, one worker, MODEL),
`weft-bench load -cC -d4s URLPATH` (core 1) goes to each in turn, alternating which goes
first, RUNS rounds; prints req/s and the server's CPU microseconds per request (utime+stime
from /proc over the run), the medians and the median of the paired B/A CPU ratios.

    A=/tmp/weft-old B=target/release/weft MODEL=pipeline URLPATH=/echo C=50 RUNS=7 \\
        scripts/perf/ka_ab.py
"""
import json, os, statistics, subprocess, time

os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
os.sched_setaffinity(0, {1})
BINS = {"A": os.environ["A"], "B": os.environ.get("B", "target/release/weft")}
MODEL = os.environ.get("MODEL", "pipeline")
PATH = os.environ.get("URLPATH", "/echo")
C = os.environ.get("C", "50")
RUNS = int(os.environ.get("RUNS", "7"))
PORTS = {"A": 18810, "B": 18811}


def ticks(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])


srv = {k: subprocess.Popen(["taskset", "-c", "0", b, "serve", "--root", "www", "--threads", "1",
                            "--listen", f"127.0.0.1:{PORTS[k]}={MODEL}"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
       for k, b in BINS.items()}
time.sleep(1)
res = {k: [] for k in BINS}
print("build,round,rps,server_us_cpu_per_request,errors")
try:
    for r in range(RUNS):
        for k in ("A", "B") if r % 2 == 0 else ("B", "A"):
            t0 = ticks(srv[k].pid)
            out = json.loads(subprocess.run(
                ["target/release/weft-bench", "load", f"-c{C}", "-d4s", "--json",
                 f"http://127.0.0.1:{PORTS[k]}{PATH}"], capture_output=True, text=True).stdout)
            us = (ticks(srv[k].pid) - t0) * 1e6 / os.sysconf("SC_CLK_TCK") / max(out["requests"], 1)
            errors = sum(out["errors"].values())
            res[k].append((out["requests_per_s"], us))
            print(f"{k},{r + 1},{out['requests_per_s']:.0f},{us:.2f},{errors}", flush=True)
finally:
    for s in srv.values():
        s.terminate()
for k in BINS:
    print(f"{k} ({BINS[k]}): median req/s {statistics.median(x[0] for x in res[k]):.0f}, "
          f"us CPU/request {statistics.median(x[1] for x in res[k]):.2f}")
paired = statistics.median(b[1] / a[1] for a, b in zip(res["A"], res["B"]))
print(f"median paired CPU/request ratio B/A: {paired:.3f}")
