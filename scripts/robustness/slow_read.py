#!/usr/bin/env python3
"""The slow read attack (issue 56) against each model: slowhttptest's slow readers take a 3 MB
file a few bytes at a time (`-X`: 1,000 connections at 200/s, a receive window of 10-20 bytes,
32 bytes read every 3 s, five pipelined requests each), while one normal client sends `GET /`
on a new connection every 200 ms. Reports the normal client's answers, median and worst
latency and failures, and how many slow readers the server cut (`timeouts.send_min_rate`, its
log lines). Before write completion the process model's 256 children were all held by slow
readers and the normal client waited 5-10 s; the target is every answer within 1 s.

    scripts/robustness/slow_read.py                       # every model, 60 s each
    MODELS=process SECONDS=30 CONNS=300 scripts/robustness/slow_read.py
    MODELS=process EXTRA='[process]\nwrite_completion = false\n[timeouts]\nsend_min_rate = 0' \
        TAG=before scripts/robustness/slow_read.py        # as before issue 56

Needs slowhttptest (apt-get install slowhttptest) and a release build (cargo build --release
-p weft). The server runs on core 0, slowhttptest and the normal client on core 1. Writes one
CSV row per model to stdout and to bench/results/<date>-slow-read[-TAG].csv.
"""
import datetime, os, shutil, socket, statistics, subprocess, sys, tempfile, threading, time

MODELS = os.environ.get("MODELS", "fiber thread process pipeline").split()
SECONDS = int(os.environ.get("SECONDS", "60"))
CONNS = int(os.environ.get("CONNS", "1000"))
WEFT = os.environ.get("WEFT", "target/release/weft")
# Extra configuration lines, e.g. the server as it was before issue 56:
# EXTRA='[process]\nwrite_completion = false\n[timeouts]\nsend_min_rate = 0'
EXTRA = os.environ.get("EXTRA", "").replace("\\n", "\n")
os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start(model, port, root, log):
    cfg = os.path.join(root, "weft.toml")
    with open(cfg, "w") as f:
        f.write("[limits]\nmax_connections = 20000\n")
        if EXTRA:
            f.write(EXTRA + "\n")
    p = subprocess.Popen(["taskset", "-c", "0", WEFT, "serve", "--config", cfg,
                          "--root", os.path.join(root, "www"), "--access-log", "off",
                          "--listen", f"127.0.0.1:{port}={model}"],
                         stdout=log, stderr=log)
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return p
        except OSError:
            time.sleep(0.1)
    p.kill()
    sys.exit(f"slow_read: weft ({model}) did not start")


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
                failures.append(repr(data[:40]))
        except OSError as e:
            failures.append(str(e))
        stop.wait(0.2)


def run(model, work):
    port = free_port()
    log_path = os.path.join(work, f"{model}.log")
    with open(log_path, "wb") as log:
        p = start(model, port, work, log)
        try:
            stop = threading.Event()
            lat, failures = [], []
            t = threading.Thread(target=normal_client, args=(port, stop, lat, failures))
            # The attack first: the normal client measures while it holds its connections.
            attack = subprocess.Popen(
                ["taskset", "-c", "1", "slowhttptest", "-c", str(CONNS), "-X", "-r", "200",
                 "-w", "10", "-y", "20", "-n", "5", "-z", "32", "-k", "3",
                 "-u", f"http://127.0.0.1:{port}/big.bin", "-p", "3", "-l", str(SECONDS)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(5)
            os.sched_setaffinity(0, {1})
            t.start()
            attack.wait(timeout=SECONDS + 120)
            stop.set()
            t.join()
        finally:
            p.terminate()
            p.wait(timeout=30)
    with open(log_path, errors="replace") as f:
        cut = sum("send_min_rate" in line for line in f)
    lat.sort()
    med = statistics.median(lat) * 1000 if lat else float("nan")
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000 if lat else float("nan")
    worst = lat[-1] * 1000 if lat else float("nan")
    over = sum(x >= 1.0 for x in lat)
    return (model, CONNS, SECONDS, len(lat), f"{med:.1f}", f"{p99:.1f}", f"{worst:.1f}", over,
            len(failures), cut)


def main():
    if not shutil.which("slowhttptest"):
        sys.exit("slow_read: slowhttptest is missing (apt-get install slowhttptest)")
    if not os.access(WEFT, os.X_OK):
        sys.exit(f"slow_read: {WEFT} not built (cargo build --release -p weft)")
    header = ("model,slow_conns,seconds,normal_answers,normal_p50_ms,normal_p99_ms,normal_max_ms,"
              "normal_over_1s,normal_failures,cut_by_send_min_rate")
    rows = []
    print(header, flush=True)
    with tempfile.TemporaryDirectory() as work:
        os.makedirs(os.path.join(work, "www"))
        with open(os.path.join(work, "www", "index.html"), "w") as f:
            f.write("<!doctype html><title>slow read</title>\n")
        with open(os.path.join(work, "www", "big.bin"), "wb") as f:
            f.write(os.urandom(3 * 1024 * 1024))
        for model in MODELS:
            row = run(model, work)
            rows.append(row)
            print(",".join(map(str, row)), flush=True)
    tag = os.environ.get("TAG", "")
    out = f"bench/results/{datetime.date.today()}-slow-read{'-' + tag if tag else ''}.csv"
    with open(out, "w") as f:
        f.write(header + "\n")
        for r in rows:
            f.write(",".join(map(str, r)) + "\n")
    print(f"written: {out}")
    ok = all(r[8] == 0 and r[7] == 0 for r in rows)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
