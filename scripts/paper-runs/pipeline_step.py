#!/usr/bin/env python3
"""The pipeline controller under a load step (issue 7).

Starts weft's pipeline model (controller on) pinned to core 0, runs the SPECweb99-like load
of `weft-bench specweb --step FEW,MANY,FEW` on core 1, then reads the controller's history
from /_weft/status.json (one sample per period, the last 60 s) and writes:

  OUT/step.csv   t, threads per stage, queue per stage, U, W, the clients of the step
  OUT/step.svg   threads per stage over time and U x M (`weft-bench plot`; also step.png)

and prints how long the allocation took to settle after each step (the time from the step
to the last change of the allocation within it) and the CPU the controller thread
(`weft-pipeline`) used, as a share of one core over the run.

Environment: ROOT (document root holding specweb/, default /tmp/swroot; the file set is
written there when missing), FEW (20), MANY (600), STEP (15 s), PACE (kbit/s per
connection, default 0 = unpaced), OUT (bench/results/pipeline-step), CONFIG (more
[pipeline] lines), WEFT and BENCH (binaries; default target/release/), DYNAMIC (percent of
operations sent to /dyn/, which the server proxies to `weft-bench backend` on core 1;
default 0) and DELAY (the backend's delay, default 5ms).
"""
import json
import os
import subprocess
import sys
import time
import urllib.request

ROOT = os.environ.get("ROOT", "/tmp/swroot")
FEW = int(os.environ.get("FEW", "20"))
MANY = int(os.environ.get("MANY", "600"))
STEP = int(os.environ.get("STEP", "15"))
PACE = os.environ.get("PACE", "0")
OUT = os.environ.get("OUT", "bench/results/pipeline-step")
EXTRA = os.environ.get("CONFIG", "")
WEFT = os.environ.get("WEFT", "target/release/weft")
BENCH = os.environ.get("BENCH", "target/release/weft-bench")
PORT = int(os.environ.get("PORT", "8097"))
DYNAMIC = os.environ.get("DYNAMIC", "0")
DELAY = os.environ.get("DELAY", "5ms")
BACKEND_PORT = int(os.environ.get("BACKEND_PORT", "9001"))
STAGES = ["accept", "receive", "process", "send"]


def thread_cpu(pid, name):
    """utime+stime in clock ticks of the server's threads called `name`."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if f.read().strip() != name:
                    continue
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total


def main():
    os.makedirs(OUT, exist_ok=True)
    if not os.path.isdir(os.path.join(ROOT, "specweb")):
        subprocess.run([BENCH, "fileset-specweb", os.path.join(ROOT, "specweb"), "-c", str(MANY)],
                       check=True)
    conf = os.path.join(OUT, "step.toml")
    dynamic = float(DYNAMIC) > 0
    with open(conf, "w") as f:
        f.write(f"[pipeline]\ncontroller = true\n{EXTRA}\n")
        if dynamic:
            f.write(f'[[proxy]]\nprefix = "/dyn/"\nupstream = "http://127.0.0.1:{BACKEND_PORT}"\n')
    backend = None
    load_extra = ["--dynamic", DYNAMIC, "--dynamic-prefix", "/dyn/"] if dynamic else []
    srv = subprocess.Popen(
        ["taskset", "-c", "0", WEFT, "serve", "--config", conf, "--root", ROOT, "--status",
         "--listen", f"127.0.0.1:{PORT}=pipeline"],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(OUT, "server.log"), "w"))
    try:
        if dynamic:
            # Started inside the try, so that the finally below stops it whatever fails.
            backend = subprocess.Popen(
                ["taskset", "-c", "1", BENCH, "backend", "--listen",
                 f"127.0.0.1:{BACKEND_PORT}", "--delay", DELAY], stdout=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{PORT}"
        for _ in range(50):
            try:
                urllib.request.urlopen(base + "/_weft/status.json", timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        tick = os.sysconf("SC_CLK_TCK")
        cpu0, t0 = thread_cpu(srv.pid, "weft-pipeline"), time.time()
        # Let the controller record a few idle periods, then take the step's start from it.
        time.sleep(1.0)
        hist0 = json.load(urllib.request.urlopen(base + "/_weft/status.json"))
        t_start = hist0["listeners"][0]["pipeline"]["history"][-1]["t"]
        subprocess.run(
            ["taskset", "-c", "1", BENCH, "specweb", base + "/specweb/",
             "--step", f"{FEW},{MANY},{FEW}", "--step-duration", f"{STEP}s",
             "--pace-kbit", PACE, "--server-pid", str(srv.pid)] + load_extra,
            check=True, stdout=open(os.path.join(OUT, "load.txt"), "w"))
        cpu1, t1 = thread_cpu(srv.pid, "weft-pipeline"), time.time()
        status = json.load(urllib.request.urlopen(base + "/_weft/status.json"))
    finally:
        srv.terminate()
        srv.wait()
        if backend:
            backend.terminate()
            backend.wait()
    pl = status["listeners"][0]["pipeline"]
    rows = [r for r in pl["history"] if r["t"] > t_start]
    for r in rows:
        r["t"] = round(r["t"] - t_start, 3)
    bounds = [STEP, 2 * STEP]
    with open(os.path.join(OUT, "step.csv"), "w") as f:
        f.write("t,clients," + ",".join(f"threads_{s}" for s in STAGES) + ","
                + ",".join(f"queue_{s}" for s in STAGES) + ",u,u_x_m\n")
        for r in rows:
            clients = FEW if r["t"] < STEP or r["t"] >= 2 * STEP else MANY
            f.write(f"{r['t']},{clients}," + ",".join(map(str, r["threads"])) + ","
                    + ",".join(map(str, r["queue"]))
                    + f",{r['u']},{min(r['u'], 1.0) * pl['threads_total']:.3f}\n")
    subprocess.run(
        [BENCH, "plot", os.path.join(OUT, "step.csv"), "--x", "t",
         "--y", ",".join([f"threads_{s}" for s in STAGES] + ["u_x_m"]),
         "--out", os.path.join(OUT, "step"), "--x-label", "seconds", "--y-label", "threads",
         "--title", f"pipeline threads per stage, load step {FEW} / {MANY} / {FEW} clients "
                    f"(steps at {bounds[0]} s and {bounds[1]} s)"],
        check=True, stdout=subprocess.DEVNULL)
    print(f"samples: {len(rows)} (period {pl['period_ms']} ms), M = {pl['threads_total']}")
    for i, (lo, hi) in enumerate([(0, STEP), (STEP, 2 * STEP), (2 * STEP, 3 * STEP)]):
        seg = [r for r in rows if lo <= r["t"] < hi]
        if not seg:
            continue
        last_change = lo
        for a, b in zip(seg, seg[1:]):
            if a["threads"] != b["threads"]:
                last_change = b["t"]
        moves = sum(1 for a, b in zip(seg, seg[1:]) if a["threads"] != b["threads"])
        print(f"step {i + 1} ({[FEW, MANY, FEW][i]} clients, {lo}-{hi} s): "
              f"{moves} changes, settled {last_change - lo:.2f} s after the step, "
              f"final allocation {seg[-1]['threads']}, max queue {max(max(r['queue']) for r in seg)}")
    share = (cpu1 - cpu0) / tick / (t1 - t0) * 100
    print(f"controller thread CPU: {(cpu1 - cpu0) / tick:.2f} s over {t1 - t0:.1f} s = {share:.2f}% of one core")
    with open(os.path.join(OUT, "load.txt")) as f:
        for line in f:
            if "ops/s" in line or "conforming" in line or "server CPU" in line:
                print("load:", line.strip())


if __name__ == "__main__":
    sys.exit(main())
