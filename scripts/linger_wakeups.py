#!/usr/bin/env python3
"""Wake-ups of the process model while its children linger: starts `BIN serve --listen
127.0.0.1:18777=process --allow-root`, makes three keep-alive connections with one request
each (each child then lingers for its connection's next request), and prints the context
switches per second of the server and its child processes over 3 s.

    python3 scripts/linger_wakeups.py BIN [BIN...]   (the builds in turn)
"""
import os
import socket
import subprocess
import sys
import time


def run(binp):
    p = subprocess.Popen([binp, "serve", "--listen", "127.0.0.1:18777=process", "--allow-root"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.8)
    conns = []
    for _ in range(3):
        s = socket.create_connection(("127.0.0.1", 18777)); s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n"); s.recv(65536); conns.append(s)
    time.sleep(0.5)
    def tree(pid):
        out = [pid]
        for t in os.listdir(f"/proc/{pid}/task"):
            try:
                for c in open(f"/proc/{pid}/task/{t}/children").read().split(): out += tree(int(c))
            except OSError: pass
        return out
    def sw():
        n = 0
        for pid in tree(p.pid):
            for t in os.listdir(f"/proc/{pid}/task"):
                try:
                    for l in open(f"/proc/{pid}/task/{t}/status"):
                        if "ctxt_switches" in l: n += int(l.split()[1])
                except OSError: pass
        return n
    a = sw(); time.sleep(3); b = sw()
    print(f"{binp}: {len(tree(p.pid))} processes, {(b-a)/3:.1f} context switches/s with 3 idle keep-alive connections")
    p.terminate(); p.wait()


for b in sys.argv[1:]:
    run(b)
