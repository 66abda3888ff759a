#!/usr/bin/env python3
"""Resident memory per idle keep-alive HTTPS connection against plain HTTP (issue 22's target:
an idle TLS connection on the fiber model <= 8 KiB).

For each model and each of plain/TLS: start weft (pinned to core 0, one worker) with a P-256
certificate made here by `openssl req`, measure the resident set of its process tree, open N
connections that each complete a request (TLS: handshake, GET, response read) and stay open,
wait, measure again, and print (RSS after - RSS before) / N. The TLS figure minus the plain
one is what the TLS session costs while the connection is parked.

    scripts/idle/tls_idle_rss.py [N ...]            (default: 2000 5000)
    MODELS="fiber thread" WEFT=target/release/weft scripts/idle/tls_idle_rss.py 5000

Needs a release build of weft (target/release/weft), python3's ssl module and openssl.
CSV on stdout: server,transport,connections,rss_before_kib,rss_after_kib,bytes_per_connection
"""
import os, resource, socket, ssl, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WEFT = os.environ.get("WEFT", os.path.join(ROOT, "target/release/weft"))
MODELS = os.environ.get("MODELS", "fiber thread").split()
REQ = b"GET /echo HTTP/1.1\r\nHost: localhost\r\n\r\n"


def tree_rss_kib(pid):
    pids = [pid]
    try:
        pids += [int(p) for p in subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()]
    except ValueError:
        pass
    total = 0
    for p in pids:
        with open(f"/proc/{p}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total


def make_cert(work):
    cert, key = os.path.join(work, "cert.pem"), os.path.join(work, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost"], check=True, capture_output=True)
    return cert, key


def open_conn(port, ctx):
    s = socket.create_connection(("127.0.0.1", port))
    if ctx is not None:
        s = ctx.wrap_socket(s, server_hostname="localhost")
    s.sendall(REQ)
    data = s.recv(4096)
    if not data.startswith(b"HTTP/1.1 200"):
        raise SystemExit(f"port {port}: got {data[:40]!r}")
    return s


def wait_port(port):
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"server on {port} did not start")


def measure(model, tls, n, cert, key, port, work):
    cfg = os.path.join(work, "weft.toml")
    with open(cfg, "w") as f:
        f.write("[limits]\nmax_connections = 20000\n")
    argv = [WEFT, "serve", "--config", cfg, "--root", os.path.join(ROOT, "www"), "--threads", "1"]
    if tls:
        argv += ["--https", f"127.0.0.1:{port}={model}", "--tls-cert", cert, "--tls-key", key]
    else:
        argv += ["--listen", f"127.0.0.1:{port}={model}"]
    ctx = None
    if tls:
        ctx = ssl.create_default_context(cafile=cert)
    proc = subprocess.Popen(["taskset", "-c", "0"] + argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        # Warm up: lazily built state (date cache, pools, session cache) exists before.
        for _ in range(10):
            open_conn(port, ctx).close()
        time.sleep(0.5)
        before = tree_rss_kib(proc.pid)
        conns = [open_conn(port, ctx) for _ in range(n)]
        time.sleep(2)
        after = tree_rss_kib(proc.pid)
        transport = "tls" if tls else "plain"
        print(f"weft-{model},{transport},{n},{before},{after},{(after - before) * 1024 / n:.0f}", flush=True)
        for s in conns:
            s.close()
    finally:
        proc.terminate()
        proc.wait()


def main():
    counts = [int(a) for a in sys.argv[1:]] or [2000, 5000]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    work = tempfile.mkdtemp()
    cert, key = make_cert(work)
    print("server,transport,connections,rss_before_kib,rss_after_kib,bytes_per_connection")
    port = 18600
    for n in counts:
        for model in MODELS:
            for tls in (False, True):
                port += 1
                measure(model, tls, n, cert, key, port, work)


if __name__ == "__main__":
    main()
