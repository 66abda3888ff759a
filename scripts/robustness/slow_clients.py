#!/usr/bin/env python3
"""Slow clients beside normal ones (hardening): for each model, normal clients' throughput
(`weft-bench load -c50 -d5s /echo`) alone and while N connections each send one byte of a
request head every 10 s (a slowloris: the bytes are spread evenly, N/10 a second, so about
half of the slow connections send during each 5 s load), alternating in the order
alone, beside, beside, alone, ... so neither phase always goes first; median of RUNS of each,
and the median of the RUNS paired (same-round) ratios. The server is pinned to core 0 with
one worker, the clients to core 1.

    RUNS=5 SLOW=5000 MODELS="fiber pipeline thread" scripts/robustness/slow_clients.py

Needs release builds of weft and weft-bench; prints one CSV row a run and a median summary.
"""
import os, socket, statistics, subprocess, sys, threading, time, json, resource

RUNS = int(os.environ.get("RUNS", "5"))
SLOW = int(os.environ.get("SLOW", "5000"))
MODELS = os.environ.get("MODELS", "fiber pipeline thread").split()
WEFT = os.environ.get("WEFT", "target/release/weft")
BENCH = "target/release/weft-bench"
os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
resource.setrlimit(resource.RLIMIT_NOFILE, (20000, 20000))
# The slow clients run here: keep them off the server's core.
os.sched_setaffinity(0, {1})


def start(model, port):
    cfg = f"/tmp/slow-{model}.toml"
    with open(cfg, "w") as f:
        f.write("[limits]\nmax_connections = 20000\n")
    p = subprocess.Popen(["taskset", "-c", "0", WEFT, "serve", "--config", cfg, "--root", "www",
                          "--threads", "1", "--listen", f"127.0.0.1:{port}={model}"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)
    return p


def cpu_ticks(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])


def load(port, pid):
    t0 = cpu_ticks(pid)
    out = subprocess.run(["taskset", "-c", "1", BENCH, "load", "-c50", "-d5s", "--json",
                          f"http://127.0.0.1:{port}/echo"], capture_output=True, text=True).stdout
    r = json.loads(out)
    errors = sum(r["errors"].values()) if isinstance(r["errors"], dict) else r["errors"]
    ticks = cpu_ticks(pid) - t0
    us_per_req = ticks * 1e6 / os.sysconf("SC_CLK_TCK") / max(r["requests"], 1)
    return r["requests_per_s"], errors, us_per_req


def slowloris(port, stop):
    socks = []
    for _ in range(SLOW):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
            s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\nX-Slow: ")
            socks.append(s)
        except OSError:
            break
    # One byte to each connection in turn, N/10 a second: each gets one every 10 s.
    gap = 10.0 / max(len(socks), 1)
    i = 0
    while socks and not stop.wait(gap * 50):
        for s in socks[i:i + 50]:
            try:
                s.send(b"a")
            except OSError:
                pass
        i = (i + 50) % len(socks)
    for s in socks:
        s.close()
    return len(socks)


print("model,run,slow_connections,rps,server_us_cpu_per_request,errors")
rows = []
for i, model in enumerate(MODELS):
    port = 18700 + i
    srv = start(model, port)
    def alone(run):
        rps, err, us = load(port, srv.pid)
        rows.append((model, run, 0, rps, us))
        print(f"{model},{run},0,{rps:.0f},{us:.2f},{err}", flush=True)

    def beside(run):
        stop = threading.Event()
        opened = []
        t = threading.Thread(target=lambda: opened.append(slowloris(port, stop)))
        t.start()
        time.sleep(3)  # let the slow connections open
        rps, err, us = load(port, srv.pid)
        stop.set(); t.join()
        n = opened[0] if opened else 0
        rows.append((model, run, SLOW, rps, us))
        print(f"{model},{run},{n},{rps:.0f},{us:.2f},{err}", flush=True)
        time.sleep(3)  # the server closes the slow connections before the next run

    for run in range(1, RUNS + 1):
        for phase in ((alone, beside) if run % 2 else (beside, alone)):
            phase(run)
    srv.terminate(); srv.wait()
print("\nmedians: model, req/s alone, req/s beside, ratio of medians, median paired ratio,"
      " us CPU/request alone, beside, ratio of medians, median paired ratio")
for model in MODELS:
    line = [model]
    for col, fmt in ((3, "{:.0f}"), (4, "{:.2f}")):
        a = {r[1]: r[col] for r in rows if r[0] == model and r[2] == 0}
        b = {r[1]: r[col] for r in rows if r[0] == model and r[2] == SLOW}
        ma, mb = statistics.median(a.values()), statistics.median(b.values())
        paired = statistics.median(b[k] / a[k] for k in a)
        line += [fmt.format(ma), fmt.format(mb), f"{mb / ma:.3f}", f"{paired:.3f}"]
    print(",".join(line))
