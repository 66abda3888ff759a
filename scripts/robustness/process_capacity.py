#!/usr/bin/env python3
"""The process model beside clients that only hold connections (issue 29).

Starts `weft serve` with the process model (pinned to core 0), opens IDLE keep-alive
connections that each sent one complete `GET /echo` and then stay idle, and PARTIAL connections
that sent a request head without its final CRLF; then a normal client (this script, core 1)
makes N requests, half on new connections and half on one keep-alive connection, and the
latency of each is measured (connect to the whole response). Prints one CSV row per build:

  build,idle,partial,requests,answered,p50_ms,p99_ms,max_ms

  scripts/robustness/process_capacity.py [WEFT ...]     IDLE=1000 PARTIAL=1000 N=200 MAX_CHILDREN=256

Each WEFT (default target/release/weft) is measured in turn. A request that gets no answer
within 10 s counts as unanswered.
"""
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IDLE = int(os.environ.get("IDLE", "1000"))
PARTIAL = int(os.environ.get("PARTIAL", "1000"))
N = int(os.environ.get("N", "200"))
MAX_CHILDREN = int(os.environ.get("MAX_CHILDREN", "256"))
REQ = b"GET /echo HTTP/1.1\r\nHost: t\r\n\r\n"


def read_response(s, deadline):
    buf = b""
    while True:
        s.settimeout(max(0.001, deadline - time.time()))
        try:
            data = s.recv(65536)
        except socket.timeout:
            return None
        if not data:
            return None
        buf += data
        if b"\r\n\r\n" in buf:
            head, _, body = buf.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length":
                    length = int(v)
            if len(body) >= length:
                return head.split(b"\r\n")[0]


def measure(weft, port):
    cfg = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
    cfg.write(f"[process]\nmax_children = {MAX_CHILDREN}\n[limits]\nmax_connections = 20000\n"
              "[timeouts]\nheader_read = \"60s\"\nkeepalive = \"75s\"\n")
    cfg.close()
    srv = subprocess.Popen(["taskset", "-c", "0", weft, "serve", "--config", cfg.name,
                            "--root", os.path.join(ROOT, "www"),
                            "--listen", f"127.0.0.1:{port}=process"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    held = []
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        for _ in range(IDLE):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(REQ)
            held.append(s)
        for _ in range(PARTIAL):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"GET /echo HTTP/1.1\r\nHost: t\r\n")
            held.append(s)
        time.sleep(1)
        lat, answered = [], 0
        ka = None
        for i in range(N):
            t0 = time.time()
            deadline = t0 + 10
            try:
                if i % 2 == 0:
                    s = socket.create_connection(("127.0.0.1", port), timeout=10)
                    s.sendall(b"GET /echo HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                    ok = read_response(s, deadline)
                    s.close()
                else:
                    if ka is None:
                        ka = socket.create_connection(("127.0.0.1", port), timeout=10)
                    ka.sendall(REQ)
                    ok = read_response(ka, deadline)
                    if ok is None:
                        ka.close()
                        ka = None
            except OSError:
                ok = None
            if ok and ok.startswith(b"HTTP/1.1 200"):
                answered += 1
                lat.append((time.time() - t0) * 1000)
        lat.sort()
        pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] if lat else float("nan")
        name = os.path.basename(os.path.dirname(weft)) + "/" + os.path.basename(weft)
        print(f"{name},{IDLE},{PARTIAL},{N},{answered},{pick(0.5):.2f},{pick(0.99):.2f},"
              f"{(lat[-1] if lat else float('nan')):.2f}", flush=True)
    finally:
        for s in held:
            s.close()
        srv.terminate()
        srv.wait()
        os.unlink(cfg.name)


def main():
    builds = sys.argv[1:] or [os.path.join(ROOT, "target/release/weft")]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    print("build,idle,partial,requests,answered,p50_ms,p99_ms,max_ms")
    for i, weft in enumerate(builds):
        measure(weft, 18600 + i)


if __name__ == "__main__":
    main()
