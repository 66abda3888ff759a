#!/usr/bin/env python3
"""Stress for the fiber model's linger timers: CONNS keep-alive connections, each sending
requests (one, or 2 or 4 pipelined) after gaps drawn around the linger period (none, inside
it, at its edge, past it), so that lingering fibers are re-armed, expire, give up their
stacks and are woken again, over and over, while about 2% of requests end their connection.
Every response must come within 2 s, complete and with status 200. Prints the counts; exits
1 on any timeout or bad response.

    target/release/weft serve --root www --threads 2 --config l5.toml \\
        --listen 127.0.0.1:18600=fiber &          # l5.toml: [fiber] linger = "5ms"
    scripts/robustness/linger_stress.py 18600 400 40 5        # PORT CONNS SECONDS LINGER_MS

Compare the server's open descriptors (ls /proc/PID/fd) before and after: the same number.
"""
import asyncio
import random
import sys
import time

REQUESTS = [b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"]


async def read_response(r):
    head = await r.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise ValueError(head[:40])
    n = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            n = int(line.split(b":")[1])
    await r.readexactly(n)


async def client(i, port, end, linger_ms, stats):
    rnd = random.Random(i)
    r = w = None
    while time.monotonic() < end:
        if w is None:
            r, w = await asyncio.open_connection("127.0.0.1", port)
        gap = rnd.choice([
            0,
            0,
            rnd.uniform(0, linger_ms * 0.5),
            rnd.uniform(linger_ms * 0.8, linger_ms * 1.2),
            rnd.uniform(linger_ms, linger_ms * 3),
        ])
        await asyncio.sleep(gap / 1000)
        depth = rnd.choice([1, 1, 1, 2, 4])
        t0 = time.monotonic()
        try:
            w.write(b"".join(rnd.choice(REQUESTS) for _ in range(depth)))
            for _ in range(depth):
                await asyncio.wait_for(read_response(r), 2.0)
            stats["ok"] += depth
            stats["max_latency_s"] = max(stats["max_latency_s"], time.monotonic() - t0)
        except asyncio.TimeoutError:
            stats["timeout"] += 1
            w.close()
            w = None
        except Exception as e:  # a bad status, a short body, a reset
            stats["bad"] += 1
            print(f"connection {i}: {e!r}"[:160])
            w.close()
            w = None
        if w is not None and rnd.random() < 0.02:
            w.close()
            w = None
            stats["reconnect"] += 1
    if w is not None:
        w.close()


async def main():
    port, conns = int(sys.argv[1]), int(sys.argv[2])
    secs, linger_ms = float(sys.argv[3]), float(sys.argv[4])
    stats = {"ok": 0, "timeout": 0, "bad": 0, "reconnect": 0, "max_latency_s": 0.0}
    end = time.monotonic() + secs
    await asyncio.gather(*(client(i, port, end, linger_ms, stats) for i in range(conns)))
    print(stats)
    return 1 if stats["timeout"] or stats["bad"] else 0


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit("usage: linger_stress.py PORT CONNS SECONDS LINGER_MS")
    sys.exit(asyncio.run(main()))
