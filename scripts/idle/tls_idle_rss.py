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

Needs a release build of weft (target/release/weft), python3's ssl module and openssl; shares
its set-up and measurement with h2_idle_rss.py (idle_common.py).
CSV on stdout: server,transport,connections,rss_before_kib,rss_after_kib,bytes_per_connection
"""
import os, socket, ssl, sys, tempfile

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from idle_common import idle_rss, make_cert, models, per_conn, raise_nofile, weft  # noqa: E402

MODELS = models("fiber thread")
REQ = b"GET /echo HTTP/1.1\r\nHost: localhost\r\n\r\n"


def open_conn(port, ctx):
    s = socket.create_connection(("127.0.0.1", port))
    if ctx is not None:
        s = ctx.wrap_socket(s, server_hostname="localhost")
    s.sendall(REQ)
    data = s.recv(4096)
    if not data.startswith(b"HTTP/1.1 200"):
        raise SystemExit(f"port {port}: got {data[:40]!r}")
    return s


def measure(model, tls, n, cert, key, port, work):
    if tls:
        listeners = ["--https", f"127.0.0.1:{port}={model}", "--tls-cert", cert, "--tls-key", key]
    else:
        listeners = ["--listen", f"127.0.0.1:{port}={model}"]
    ctx = None
    if tls:
        ctx = ssl.create_default_context(cafile=cert)
    with weft(port, listeners, work) as proc:
        before, after, conns = idle_rss(proc.pid, n, lambda: open_conn(port, ctx))
        transport = "tls" if tls else "plain"
        print(f"weft-{model},{transport},{n},{before},{after},{per_conn(before, after, n)}", flush=True)
        for s in conns:
            s.close()


def main():
    counts = [int(a) for a in sys.argv[1:]] or [2000, 5000]
    raise_nofile()
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
