#!/usr/bin/env python3
"""Resident memory per idle HTTP/2 connection (target: <= 8 KiB on the fiber model, over TLS).

Each connection does what a browser's does before its first request: TLS with ALPN h2 (or,
with --h2c, plain TCP and prior knowledge), the client preface and an empty SETTINGS frame,
then the server's SETTINGS read and acknowledged and the server's acknowledgement of ours
read; then it is held, sending nothing. The server's resident set (VmRSS of its process tree,
as in tls_idle_rss.py) is read before the K connections open and 2 s after, and the script
prints (after - before) / K, and how many of the K were still open at the second reading (a
server that closed some would look cheaper than it is).

    scripts/idle/h2_idle_rss.py [K ...]                       (default: 2000)
    MODELS="fiber thread" WEFT=target/release/weft scripts/idle/h2_idle_rss.py 2000 5000
    scripts/idle/h2_idle_rss.py --attach PID PORT NAME [--h2c] [K]

Without --attach it starts weft itself for each of MODELS (default fiber), pinned to core 0
with one worker, an https listener and a P-256 certificate made here by `openssl req` (with
--h2c: a plain listener with --h2c). With --attach it measures a server already listening on
127.0.0.1:PORT whose process (and children) is PID, e.g. nginx or h2o started by
scripts/peers/h2_vs_peers.sh; NAME is the first CSV column. The server should be fresh:
memory freed by earlier load is reused by the new connections and hides their cost.

Needs python3's ssl module (ALPN) and, without --attach, openssl and a release build of weft.
Shares its set-up and measurement with tls_idle_rss.py (idle_common.py).
CSV on stdout: server,transport,connections,rss_before_kib,rss_after_kib,bytes_per_connection,open_after
"""
import os, select, socket, ssl, struct, sys, tempfile

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from idle_common import idle_rss, make_cert, models, per_conn, raise_nofile, weft  # noqa: E402

MODELS = models("fiber")

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS, GOAWAY = 0x4, 0x7
ACK = 0x1


def frame(ftype, flags=0, stream=0, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def client_context():
    # A self-signed certificate on loopback: what is measured is the server's memory, so the
    # client does not verify it.
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    return ctx


def recv_exact(s, n, buf):
    while len(buf) < n:
        data = s.recv(65536)
        if not data:
            raise ConnectionError("closed by the server during the SETTINGS exchange")
        buf += data
    return buf


def open_h2(port, ctx):
    """One HTTP/2 connection past the SETTINGS exchange, sending nothing after it."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    if ctx is not None:
        s = ctx.wrap_socket(s, server_hostname="localhost")
        if s.selected_alpn_protocol() != "h2":
            raise SystemExit(f"port {port}: ALPN chose {s.selected_alpn_protocol()!r}, not h2")
    s.sendall(PREFACE + frame(SETTINGS))
    buf = b""
    got_settings = got_ack = False
    while not (got_settings and got_ack):
        buf = recv_exact(s, 9, buf)
        length = int.from_bytes(buf[:3], "big")
        ftype, flags = buf[3], buf[4]
        buf = recv_exact(s, 9 + length, buf)
        payload, buf = buf[9:9 + length], buf[9 + length:]
        if ftype == SETTINGS and flags & ACK:
            got_ack = True
        elif ftype == SETTINGS:
            s.sendall(frame(SETTINGS, ACK))
            got_settings = True
        elif ftype == GOAWAY:
            raise SystemExit(f"port {port}: GOAWAY {payload[:8].hex()} during the SETTINGS exchange")
        # WINDOW_UPDATE and anything else the server sends first: read and ignored.
    return s


def still_open(s):
    """False when the server closed the connection or sent GOAWAY since the exchange."""
    readable = select.poll()
    readable.register(s, select.POLLIN)
    if not readable.poll(0) and not (isinstance(s, ssl.SSLSocket) and s.pending()):
        return True
    s.setblocking(False)
    try:
        data = s.recv(65536)
    except (ssl.SSLWantReadError, BlockingIOError):
        return True
    except OSError:
        return False
    finally:
        s.setblocking(True)
    return bool(data) and not (len(data) >= 9 and data[3] == GOAWAY)


def measure(name, pid, port, n, h2c):
    ctx = None if h2c else client_context()
    before, after, conns = idle_rss(pid, n, lambda: open_h2(port, ctx))
    alive = sum(still_open(s) for s in conns)
    transport = "h2c" if h2c else "tls"
    print(f"{name},{transport},{n},{before},{after},{per_conn(before, after, n)},{alive}", flush=True)
    for s in conns:
        s.close()


def run_weft(model, n, h2c, cert, key, port, work):
    extra = ["--access-log", "off"]
    if os.geteuid() == 0:
        extra.append("--allow-root")
    if h2c:
        listeners = ["--listen", f"127.0.0.1:{port}={model}", "--h2c"]
    else:
        listeners = ["--https", f"127.0.0.1:{port}={model}", "--tls-cert", cert, "--tls-key", key]
    with weft(port, listeners, work, extra) as proc:
        measure(f"weft-{model}", proc.pid, port, n, h2c)


def main():
    args = sys.argv[1:]
    h2c = "--h2c" in args
    args = [a for a in args if a != "--h2c"]
    attach = None
    if args[:1] == ["--attach"]:
        if len(args) < 4:
            raise SystemExit("usage: h2_idle_rss.py --attach PID PORT NAME [--h2c] [K ...]")
        attach = (int(args[1]), int(args[2]), args[3])
        args = args[4:]
    counts = [int(a) for a in args] or [2000]
    raise_nofile()
    print("server,transport,connections,rss_before_kib,rss_after_kib,bytes_per_connection,open_after")
    if attach:
        pid, port, name = attach
        for n in counts:
            measure(name, pid, port, n, h2c)
        return
    work = tempfile.mkdtemp()
    cert, key = make_cert(work)
    port = 18650
    for n in counts:
        for model in MODELS:
            port += 1
            run_weft(model, n, h2c, cert, key, port, work)


if __name__ == "__main__":
    main()
