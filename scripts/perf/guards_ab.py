#!/usr/bin/env python3
"""What the per-client guards cost when no client is over them: one weft build serving twice at
once per model (core 0, one worker), A with no guards and B with `limits.conn_per_ip` and
`[rate_limit]` set far above what the client asks (every request and connection is counted in
the shared table, none is refused); `weft-bench load -cC -dD /echo` (core 1) goes to each in
turn after an unmeasured WARM-second load (default 1), alternating which goes first, RUNS
rounds (even, so each goes first as often). Prints req/s and the server's CPU
microseconds per request (utime+stime from /proc over the run), the medians and the median of
the paired B/A CPU ratios per model. A round where B refused anything (a non-2xx) is an error.

    MODELS="fiber thread" C=50 D=4 RUNS=8 scripts/perf/guards_ab.py

WEFT= and BENCH= choose the binaries (default target/release/weft and weft-bench).
"""
import json, os, statistics, subprocess, sys, time

os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PIN = (os.cpu_count() or 1) >= 2
if PIN:
    os.sched_setaffinity(0, {1})
WEFT = os.environ.get("WEFT", "target/release/weft")
BENCH = os.environ.get("BENCH", "target/release/weft-bench")
MODELS = os.environ.get("MODELS", "fiber thread").split()
C = int(os.environ.get("C", "50"))
D = os.environ.get("D", "4")
RUNS = int(os.environ.get("RUNS", "8"))
WARM = os.environ.get("WARM", "1")
PORTS = {"A": 18820, "B": 18821}
# Far above one client at full speed on loopback, so that B counts every request and refuses
# none.
GUARDS = (f"[limits]\nconn_per_ip = {C * 4}\n"
          "[rate_limit]\nrate = \"100000000r/s\"\nburst = 100000\n")


def ticks(pid):
    """utime + stime of pid and its reaped children (the process model's)."""
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in f[11:15])


def serve(model, port, guards):
    cfg = f"/tmp/guards_ab_{port}.toml"
    with open(cfg, "w") as f:
        f.write(GUARDS if guards else "")
    cmd = [WEFT, "serve", "--config", cfg, "--root", "www", "--threads", "1",
           "--listen", f"127.0.0.1:{port}={model}", "--echo", "/echo"]
    if PIN:
        cmd = ["taskset", "-c", "0"] + cmd
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def tree_ticks(pid):
    """CPU ticks of pid and every live descendant (the process model's children)."""
    total = ticks(pid)
    try:
        kids = open(f"/proc/{pid}/task/{pid}/children").read().split()
    except OSError:
        kids = []
    for k in kids:
        try:
            total += tree_ticks(int(k))
        except OSError:
            pass
    return total


failed = False
print("model,build,round,rps,server_us_cpu_per_request,errors,non_2xx")
for model in MODELS:
    srv = {"A": serve(model, PORTS["A"], False), "B": serve(model, PORTS["B"], True)}
    time.sleep(1)
    res = {k: [] for k in srv}
    try:
        for r in range(RUNS):
            for k in ("A", "B") if r % 2 == 0 else ("B", "A"):
                # Unmeasured: the process model forks its children for this load, and
                # whichever server ran second would otherwise find its caches warm.
                subprocess.run([BENCH, "load", f"-c{C}", f"-d{WARM}s",
                                f"http://127.0.0.1:{PORTS[k]}/echo"],
                               capture_output=True, check=True)
                t0 = tree_ticks(srv[k].pid)
                out = json.loads(subprocess.run(
                    [BENCH, "load", f"-c{C}", f"-d{D}s", "--json",
                     f"http://127.0.0.1:{PORTS[k]}/echo"],
                    capture_output=True, text=True, check=True).stdout)
                us = ((tree_ticks(srv[k].pid) - t0) * 1e6 / os.sysconf("SC_CLK_TCK")
                      / max(out["requests"], 1))
                errors = sum(out["errors"].values())
                bad = out["statuses"]["4xx"] + out["statuses"]["5xx"]
                failed |= bad > 0 or errors > 0
                res[k].append((out["requests_per_s"], us))
                print(f"{model},{k},{r + 1},{out['requests_per_s']:.0f},{us:.2f},{errors},{bad}",
                      flush=True)
    finally:
        for s in srv.values():
            s.terminate()
            s.wait()
    for k, what in (("A", "off"), ("B", "on")):
        print(f"{model} guards {what}: median req/s {statistics.median(x[0] for x in res[k]):.0f}, "
              f"us CPU/request {statistics.median(x[1] for x in res[k]):.2f}")
    paired = statistics.median(b[1] / a[1] for a, b in zip(res["A"], res["B"]))
    print(f"{model}: median paired CPU/request ratio on/off: {paired:.3f}")
if failed:
    sys.exit("some requests failed or were refused")
