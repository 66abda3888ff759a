#!/usr/bin/env python3
"""Two weft builds side by side over HTTPS: A and B serve at once (each pinned to core 0, one
worker, fiber model unless MODEL=, the same P-256 certificate made here by `openssl req`);
`weft-bench load` (core 1) goes to each in turn, alternating which goes first, RUNS rounds of
D seconds per case: `keepalive` (c=50, the 10,541 B page `/haewelmann.html` of www/),
and `handshake` (c=8, a new connection and a full handshake per request). Prints req/s and
the server's CPU microseconds per request (weft-bench's --server-pid: utime+stime of the
server over the run), the medians, and the median of the paired B/A CPU ratios per case.

    A=/tmp/old-target/release/weft B=target/release/weft RUNS=5 D=4 scripts/perf/tls_ab.py

Needs openssl on PATH and a release weft-bench (BENCH=, default target/release/weft-bench).
"""
import json, os, statistics, subprocess, sys, tempfile, time

os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
A = os.environ.get("A")
B = os.environ.get("B", "target/release/weft")
if not A:
    sys.exit("A=<weft binary> is required (B defaults to target/release/weft)")
BENCH = os.environ.get("BENCH", "target/release/weft-bench")
MODEL = os.environ.get("MODEL", "fiber")
RUNS = int(os.environ.get("RUNS", "5"))
D = os.environ.get("D", "4")
PORTS = {"A": 18843, "B": 18844}
PIN = (os.cpu_count() or 1) >= 2
PAGE = "/haewelmann.html"
CASES = {"keepalive": ["-c50"], "handshake": ["-c8", "--no-keepalive"]}

tmp = tempfile.mkdtemp(prefix="weft-tls-ab-")
cert, key = os.path.join(tmp, "c.pem"), os.path.join(tmp, "k.pem")
subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                "-nodes", "-days", "1", "-subj", "/CN=localhost", "-addext",
                "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", key, "-out", cert],
               check=True, capture_output=True)


def serve(binary, port):
    cmd = [binary, "serve", "--root", "www", "--threads", "1", "--allow-root",
           "--https", f"127.0.0.1:{port}={MODEL}", "--tls-cert", cert, "--tls-key", key]
    if PIN:
        cmd = ["taskset", "-c", "0"] + cmd
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def load(k, pid, args):
    cmd = [BENCH, "load", *args, f"-d{D}s", "--json", "--insecure", "--server-pid", str(pid),
           f"https://127.0.0.1:{PORTS[k]}{PAGE}"]
    if PIN:
        cmd = ["taskset", "-c", "1"] + cmd
    out = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    return out


srv = {"A": serve(A, PORTS["A"]), "B": serve(B, PORTS["B"])}
time.sleep(1)
failed = False
print("case,build,round,rps,server_us_cpu_per_request,errors")
try:
    for case, args in CASES.items():
        res = {"A": [], "B": []}
        for r in range(RUNS):
            for k in ("A", "B") if r % 2 == 0 else ("B", "A"):
                out = load(k, srv[k].pid, args)
                errors = sum(out["errors"].values())
                failed |= errors > 0
                us = out["server"]["cpu_us_per_request"]
                res[k].append((out["requests_per_s"], us))
                print(f"{case},{k},{r + 1},{out['requests_per_s']:.0f},{us:.2f},{errors}", flush=True)
        for k in ("A", "B"):
            print(f"{case} {k}: median req/s {statistics.median(x[0] for x in res[k]):.0f}, "
                  f"us CPU/request {statistics.median(x[1] for x in res[k]):.2f}")
        paired = statistics.median(b[1] / a[1] for a, b in zip(res["A"], res["B"]))
        print(f"{case}: median paired CPU/request ratio B/A: {paired:.3f}", flush=True)
finally:
    for s in srv.values():
        s.terminate()
        s.wait()
if failed:
    sys.exit("some requests failed")
