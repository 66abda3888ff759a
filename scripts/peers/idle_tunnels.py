#!/usr/bin/env python3
"""Memory per idle tunnel (an upgraded connection relayed to its upstream, as a quiet
WebSocket is): weft's fiber model (and others asked for) against nginx's `proxy_pass` with
the Upgrade headers set. For each server: start it with one worker in front of the same
echo upstream, open N tunnels (upgrade request, `101`, then silence), wait, and read the
server's resident memory (VmRSS of its processes); the figure is (RSS with N tunnels - RSS
before them) / N. One byte then goes through a sample of the tunnels and must come back.

    python3 scripts/peers/idle_tunnels.py [--tunnels 9000] [--servers fiber,thread,nginx]

Each tunnel holds two descriptors in the proxy (client and upstream): with this machine's
open-file limit of 20,000 per process, 9,000 tunnels is what fits (10,000 would need 20,000
plus the listeners). The server runs on core 0, the client and the upstream on core 1.
Needs nginx (`apt-get install nginx-light`) and a release build of weft.
"""

import argparse
import asyncio
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time

UPSTREAM = r'''
import asyncio, sys
async def conn(r, w):
    try:
        await r.readuntil(b"\r\n\r\n")
        w.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: upgrade\r\n\r\n")
        while True:
            b = await r.read(4096)
            if not b:
                break
            w.write(b)
            await w.drain()
    except Exception:
        pass
    w.close()
async def main():
    s = await asyncio.start_server(conn, "127.0.0.1", int(sys.argv[1]), backlog=4096)
    async with s:
        await s.serve_forever()
asyncio.run(main())
'''

NGINX = """
{user}
worker_processes 1;
worker_rlimit_nofile 20000;
daemon off;
pid nginx.pid;
error_log stderr error;
events {{ worker_connections 19900; }}
http {{
    access_log off;
    upstream echo {{ server 127.0.0.1:{up}; keepalive 32; }}
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location / {{
            proxy_pass http://echo;
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection "upgrade";
            proxy_read_timeout 3600s;
        }}
    }}
}}
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid):
    """VmRSS of `pid` and its children (nginx's master and worker), in KiB."""
    total = 0
    pids = [pid]
    try:
        kids = open(f"/proc/{pid}/task/{pid}/children").read().split()
        pids += [int(k) for k in kids]
    except OSError:
        pass
    for p in pids:
        try:
            for line in open(f"/proc/{p}/status"):
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def wait_port(port):
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def start(kind, weft, port, up, work):
    root = ["--allow-root"] if os.geteuid() == 0 else []
    if kind == "nginx":
        user = "user root;" if os.geteuid() == 0 else ""
        conf = os.path.join(work, "nginx.conf")
        with open(conf, "w") as f:
            f.write(NGINX.format(user=user, up=up, port=port))
        args = ["nginx", "-p", work, "-c", conf]
    else:
        args = [weft, "serve", *root, "--root", work, "--threads", "1", "--access-log", "off",
                "--listen", f"127.0.0.1:{port}={kind}", "--proxy", f"/=http://127.0.0.1:{up}"]
    p = subprocess.Popen(["taskset", "-c", "0", *args], stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(work, f"{kind}.log"), "w"))
    wait_port(port)
    return p


async def open_tunnels(port, n):
    conns = []
    req = b"GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n"

    async def one():
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(req)
        head = await r.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 101"):
            raise RuntimeError(head[:60])
        return r, w

    for start in range(0, n, 500):
        conns += await asyncio.gather(*(one() for _ in range(min(500, n - start))))
    return conns


async def probe(conns, k=200):
    for r, w in random.sample(conns, min(k, len(conns))):
        w.write(b"x")
        got = await asyncio.wait_for(r.readexactly(1), 10)
        assert got == b"x"


async def measure(kind, weft, n, up, work):
    port = free_port()
    p = start(kind, weft, port, up, work)
    try:
        # One tunnel first, so what every server sets up at its first one is in the base.
        first = await open_tunnels(port, 1)
        await asyncio.sleep(1)
        base = rss_kib(p.pid)
        conns = await open_tunnels(port, n)
        await asyncio.sleep(2)
        full = rss_kib(p.pid)
        await probe(conns)
        for _, w in conns + first:
            w.close()
        per = (full - base) * 1024 / n
        return base, full, per
    finally:
        p.terminate()
        p.wait(10)


async def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tunnels", type=int, default=9000)
    ap.add_argument("--servers", default="fiber,nginx")
    ap.add_argument("--weft", default="target/release/weft")
    a = ap.parse_args()
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    if "nginx" in a.servers and not shutil.which("nginx"):
        sys.exit("idle_tunnels: nginx is missing (apt-get install nginx-light)")
    if not os.access(a.weft, os.X_OK):
        sys.exit(f"idle_tunnels: {a.weft} not built (cargo build --release -p weft)")
    os.sched_setaffinity(0, {1})
    up = free_port()
    upstream = subprocess.Popen(["taskset", "-c", "1", sys.executable, "-c", UPSTREAM, str(up)])
    wait_port(up)
    print("server,tunnels,rss_before_kib,rss_after_kib,bytes_per_tunnel")
    try:
        for kind in a.servers.split(","):
            with tempfile.TemporaryDirectory() as work:
                base, full, per = await measure(kind, a.weft, a.tunnels, up, work)
                print(f"{kind},{a.tunnels},{base},{full},{per:.0f}", flush=True)
    finally:
        upstream.terminate()


if __name__ == "__main__":
    asyncio.run(main())
