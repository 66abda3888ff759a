#!/usr/bin/env python3
"""WebSockets through weft's reverse proxy, with Python's `websockets` (PyPI) as client and
echo server: per model (and over HTTPS with --tls), text and binary messages of 0 B to
16 MiB, a fragmented message, ping/pong, the close handshake with a code, a client that
half-closes its side, and 100 concurrent connections. Prints one line per check and model;
exits 1 if any failed.

    pip install websockets            # 17.x was used
    cargo build --release -p weft
    python3 scripts/checks/websocket.py [--models fiber,thread,process,pipeline] [--tls]

weft runs with `--proxy /=http://127.0.0.1:ECHO` on a free port per model. --tls serves an
HTTPS listener with a throwaway self-signed certificate (made with `openssl`), so the client
speaks wss://.
"""

import argparse
import asyncio
import logging
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import time

try:
    import websockets
    from websockets.asyncio.client import connect
    from websockets.asyncio.server import serve
except ImportError:
    sys.exit("websocket.py: needs the `websockets` package (pip install websockets)")

SIZES = [0, 1, 125, 126, 127, 65535, 65536, 1 << 20, 16 << 20]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def echo(ws):
    try:
        async for msg in ws:
            await ws.send(msg)
    except websockets.ConnectionClosed:
        pass


def start_weft(weft, model, port, echo_port, tls_files, log):
    args = [weft, "serve", "--root", "www", "--threads", "1", "--access-log", "off"]
    if os.geteuid() == 0:
        args.append("--allow-root")
    if tls_files:
        cert, key = tls_files
        args += ["--https", f"127.0.0.1:{port}={model}", "--tls-cert", cert, "--tls-key", key]
    else:
        args += ["--listen", f"127.0.0.1:{port}={model}"]
    args += ["--proxy", f"/=http://127.0.0.1:{echo_port}"]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return p
        except OSError:
            time.sleep(0.05)
    p.kill()
    log.seek(0)
    raise RuntimeError(f"weft ({model}) did not start: {log.read().decode()}")


async def check_messages(url, ctx):
    async with connect(url, ssl=ctx, max_size=None) as ws:
        for size in SIZES:
            data = os.urandom(size)
            await ws.send(data)
            assert await ws.recv() == data, f"binary {size} B"
            text = "é" * (size // 2)
            await ws.send(text)
            assert await ws.recv() == text, f"text {size // 2} chars"
    return f"text and binary, {SIZES[0]} B to {SIZES[-1] >> 20} MiB"


async def check_fragments(url, ctx):
    parts = [os.urandom(n) for n in (1, 1000, 70000, 3)]
    async with connect(url, ssl=ctx, max_size=None) as ws:
        await ws.send(parts)  # one message in four frames
        assert await ws.recv() == b"".join(parts)
        await ws.send(["frag", "mented"])
        assert await ws.recv() == "fragmented"
    return "fragmented binary and text"


async def check_ping_close(url, ctx):
    async with connect(url, ssl=ctx) as ws:
        t = time.perf_counter()
        pong = await ws.ping(b"are you there")
        await asyncio.wait_for(pong, 5)
        rtt = (time.perf_counter() - t) * 1000
        await ws.close(code=4001, reason="bye")
        assert ws.close_code == 4001, ws.close_code
        assert ws.close_reason == "bye", ws.close_reason
    return f"ping/pong ({rtt:.2f} ms), close handshake 4001 echoed"


async def check_half_close(port, tls):
    """A client that sends its handshake, one frame, then shuts its write side: the echo
    comes back, then the server ends its side (the half-close passed through)."""
    loop = asyncio.get_running_loop()

    def run():
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        if tls:
            c = ssl.create_default_context()
            c.check_hostname = False
            c.verify_mode = ssl.CERT_NONE
            s = c.wrap_socket(s)
        s.sendall(
            b"GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        got = b""
        while b"\r\n\r\n" not in got:
            got += s.recv(4096)
        assert got.startswith(b"HTTP/1.1 101"), got[:100]
        got = got.split(b"\r\n\r\n", 1)[1]
        # A masked text frame "hi".
        mask = b"\x01\x02\x03\x04"
        s.sendall(b"\x81\x82" + mask + bytes(a ^ b for a, b in zip(b"hi", mask)))
        t = time.time()
        if tls:
            # Python's ssl cannot read after its own close_notify: the echo first, then
            # close_notify, which unwrap() answers only once weft sent its own (the upstream's
            # end passed back).
            while len(got) < 4:
                got += s.recv(4096)
            t = time.time()
            s = s.unwrap()
        s.shutdown(socket.SHUT_WR)
        while True:
            b = s.recv(4096)
            if not b:
                break
            got += b
        assert got.startswith(b"\x81\x02hi"), got[:20]
        return time.time() - t

    took = await loop.run_in_executor(None, run)
    return f"half-closed client: echo, then the end ({took * 1000:.0f} ms)"


async def check_many(url, ctx, n=100):
    async def one(i):
        async with connect(url, ssl=ctx) as ws:
            for k in range(5):
                msg = f"{i}:{k}"
                await ws.send(msg)
                assert await ws.recv() == msg
    await asyncio.gather(*(one(i) for i in range(n)))
    return f"{n} connections at once, 5 messages each"


async def run_model(weft, model, echo_port, tls_files):
    port = free_port()
    log = tempfile.TemporaryFile()
    p = start_weft(weft, model, port, echo_port, tls_files, log)
    ctx = None
    scheme = "ws"
    if tls_files:
        scheme = "wss"
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    url = f"{scheme}://127.0.0.1:{port}/chat"
    failed = 0
    try:
        for name, check in [
            ("messages", lambda: check_messages(url, ctx)),
            ("fragments", lambda: check_fragments(url, ctx)),
            ("ping-close", lambda: check_ping_close(url, ctx)),
            ("half-close", lambda: check_half_close(port, bool(tls_files))),
            ("concurrent", lambda: check_many(url, ctx)),
        ]:
            try:
                what = await asyncio.wait_for(check(), 60)
                print(f"ok    {model:8} {scheme:3} {name:11} {what}")
            except Exception as e:  # noqa: BLE001 - every failure is reported
                failed += 1
                print(f"FAIL  {model:8} {scheme:3} {name:11} {type(e).__name__}: {e}")
    finally:
        p.terminate()
        p.wait(10)
    return failed


async def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--weft", default="target/release/weft")
    ap.add_argument("--models", default="fiber,thread,process,pipeline")
    ap.add_argument("--tls", action="store_true", help="also over HTTPS (wss://)")
    a = ap.parse_args()
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    if not os.access(a.weft, os.X_OK):
        sys.exit(f"websocket.py: {a.weft} not built (cargo build --release -p weft)")
    # The echo server's own log of clients that left without a close frame (the half-close
    # check does on purpose) is not a result.
    logging.getLogger("websockets").setLevel(logging.CRITICAL)
    echo_port = free_port()
    server = await serve(echo, "127.0.0.1", echo_port, max_size=None)
    print(f"websockets {websockets.__version__}, echo server on {echo_port}")
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        tls_sets = [None]
        if a.tls:
            cert, key = os.path.join(tmp, "c.pem"), os.path.join(tmp, "k.pem")
            subprocess.run(
                ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                 "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert,
                 "-days", "1", "-subj", "/CN=localhost",
                 "-addext", "subjectAltName=DNS:localhost"],
                check=True, capture_output=True)
            tls_sets.append((cert, key))
        for tls_files in tls_sets:
            for model in a.models.split(","):
                failed += await run_model(a.weft, model, echo_port, tls_files)
    server.close()
    print("all passed" if failed == 0 else f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
