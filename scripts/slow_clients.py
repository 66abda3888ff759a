#!/usr/bin/env python3
"""Slow clients beside normal ones (hardening): for each model, normal clients' throughput
(`weft-bench load -c50 -d5s /echo`) alone and while N connections each send one byte of a
request head every 10 s (a slowloris), alternating, median of RUNS. The server is pinned to
core 0 with one worker, the clients to core 1.

    RUNS=5 SLOW=5000 MODELS="fiber pipeline thread" scripts/slow_clients.py

Needs release builds of weft and weft-bench; prints one CSV row a run and a median summary.
"""
import os, socket, statistics, subprocess, sys, threading, time, json, resource

RUNS = int(os.environ.get("RUNS", "5"))
SLOW = int(os.environ.get("SLOW", "5000"))
MODELS = os.environ.get("MODELS", "fiber pipeline thread").split()
WEFT, BENCH = "target/release/weft", "target/release/weft-bench"
os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
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


def load(port):
    out = subprocess.run(["taskset", "-c", "1", BENCH, "load", "-c50", "-d5s", "--json",
                          f"http://127.0.0.1:{port}/echo"], capture_output=True, text=True).stdout
    r = json.loads(out)
    errors = sum(r["errors"].values()) if isinstance(r["errors"], dict) else r["errors"]
    return r["requests_per_s"], errors


def slowloris(port, stop):
    socks = []
    for _ in range(SLOW):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
            s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\nX-Slow: ")
            socks.append(s)
        except OSError:
            break
    while not stop.wait(10):
        for s in socks:
            try:
                s.send(b"a")
            except OSError:
                pass
    for s in socks:
        s.close()
    return len(socks)


print("model,run,slow_connections,rps,errors")
rows = []
for i, model in enumerate(MODELS):
    port = 18700 + i
    srv = start(model, port)
    for run in range(1, RUNS + 1):
        rps, err = load(port)
        rows.append((model, 0, rps)); print(f"{model},{run},0,{rps:.0f},{err}", flush=True)
        stop = threading.Event()
        opened = []
        t = threading.Thread(target=lambda: opened.append(slowloris(port, stop)))
        t.start()
        time.sleep(3)  # let the slow connections open
        rps, err = load(port)
        stop.set(); t.join()
        n = opened[0] if opened else 0
        rows.append((model, SLOW, rps)); print(f"{model},{run},{n},{rps:.0f},{err}", flush=True)
        time.sleep(3)  # the server closes the slow connections before the next run
    srv.terminate(); srv.wait()
print("\nmedian req/s: model, alone, beside slow clients, ratio")
for model in MODELS:
    a = statistics.median(r[2] for r in rows if r[0] == model and r[1] == 0)
    b = statistics.median(r[2] for r in rows if r[0] == model and r[1] == SLOW)
    print(f"{model},{a:.0f},{b:.0f},{b / a:.3f}")
