#!/usr/bin/env python3
"""Slowloris and slow bodies against each model, with the minimum rates (issue 24): per model,
SLOW connections trickling a request head and SLOW trickling a small request body, one byte
each every TRICKLE seconds (so no per-read timeout ever fires), while one normal client sends
`GET /` on a new connection every 50 ms for DURATION seconds. Reports the normal client's
worst and median latency and its failures, and how many slow connections were cut with 408 by
the minimum rates (`timeouts.header_min_rate`, `body_min_rate`, after `min_rate_grace`) and
when (seconds after they connected).

    SLOW=1000 MODELS="fiber thread process pipeline" scripts/robustness/slow_min_rate.py
    SLOW=100 DURATION=6 GRACE=2s WEFT=target/debug/weft scripts/robustness/slow_min_rate.py   # quick

Timeouts are the defaults (60 s) except the grace (GRACE, default the server's 20 s): only the
rates can cut the slow clients within DURATION. Writes one CSV row per model to stdout and to
bench/results/<date>-slow-min-rate.csv.
"""
import os, resource, socket, statistics, subprocess, sys, threading, time, datetime

SLOW = int(os.environ.get("SLOW", "1000"))
MODELS = os.environ.get("MODELS", "fiber thread process pipeline").split()
DURATION = float(os.environ.get("DURATION", "30"))
TRICKLE = float(os.environ.get("TRICKLE", "2"))
GRACE = os.environ.get("GRACE", "")
WEFT = os.environ.get("WEFT", "target/release/weft")
os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
_, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 20000), hard))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start(model, port):
    cfg = f"/tmp/slow-min-rate-{os.getpid()}-{model}.toml"
    with open(cfg, "w") as f:
        f.write("[limits]\nmax_connections = 20000\n")
        if GRACE:
            f.write(f'[timeouts]\nmin_rate_grace = "{GRACE}"\n')
    p = subprocess.Popen([WEFT, "serve", "--config", cfg, "--root", "www",
                          "--listen", f"127.0.0.1:{port}={model}"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return p
        except OSError:
            time.sleep(0.1)
    p.kill()
    sys.exit(f"weft ({model}) did not start")


def normal_client(port, stop, lat, failures):
    while not stop.is_set():
        t0 = time.monotonic()
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.settimeout(10)
            s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            s.close()
            if data.startswith(b"HTTP/1.1 200"):
                lat.append(time.monotonic() - t0)
            else:
                failures.append(data[:40])
        except OSError as e:
            failures.append(str(e))
        stop.wait(0.05)


def run(model):
    port = free_port()
    p = start(model, port)
    slow = []  # [socket, kind, connected_at]
    for i in range(SLOW):
        for kind, first in (("head", b"GET / HTTP/1.1\r\nHost: t\r\nX-Slow: "),
                            ("body", b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4000\r\n\r\n")):
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                s.sendall(first)
                s.setblocking(False)
                slow.append([s, kind, time.monotonic()])
            except OSError:
                pass
    lat, failures = [], []
    stop = threading.Event()
    t = threading.Thread(target=normal_client, args=(port, stop, lat, failures))
    t.start()
    cut = {"head": [], "body": []}
    other = 0
    end = time.monotonic() + DURATION
    next_byte = time.monotonic()
    while time.monotonic() < end and slow:
        now = time.monotonic()
        trickle = now >= next_byte
        if trickle:
            next_byte = now + TRICKLE
        keep = []
        for entry in slow:
            s, kind, at = entry
            try:
                data = s.recv(4096)
                if data.startswith(b"HTTP/1.1 408"):
                    cut[kind].append(now - at)
                else:
                    other += 1
                s.close()
                continue
            except BlockingIOError:
                pass
            except OSError:
                other += 1
                s.close()
                continue
            if trickle:
                try:
                    s.send(b"a")
                except OSError:
                    pass
            keep.append(entry)
        slow = keep
        time.sleep(0.05)
    stop.set()
    t.join()
    for s, _, _ in slow:
        s.close()
    p.terminate()
    p.wait()
    worst = max(lat) if lat else float("nan")
    med = statistics.median(lat) if lat else float("nan")

    def q(v):
        return f"{statistics.median(v):.2f}" if v else ""
    return (f"{model},{SLOW},{SLOW},{len(lat)},{len(failures)},{med * 1000:.2f},{worst * 1000:.2f},"
            f"{len(cut['head'])},{q(cut['head'])},{len(cut['body'])},{q(cut['body'])},{len(slow)},{other}")


header = ("model,slow_heads,slow_bodies,normal_answers,normal_failures,normal_median_ms,"
          "normal_worst_ms,heads_cut_408,heads_cut_median_s,bodies_cut_408,bodies_cut_median_s,"
          "slow_still_open,slow_ended_otherwise")
rows = [header]
print(header, flush=True)
for model in MODELS:
    row = run(model)
    print(row, flush=True)
    rows.append(row)
os.makedirs("bench/results", exist_ok=True)
out = f"bench/results/{datetime.date.today().isoformat()}-slow-min-rate.csv"
with open(out, "w") as f:
    f.write("\n".join(rows) + "\n")
print(f"written to {out}", file=sys.stderr)
