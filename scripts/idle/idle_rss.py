#!/usr/bin/env python3
"""Resident memory per idle keep-alive connection: weft models and nginx.

For each server: start it (pinned to core 0), measure the resident set of its process tree,
open N connections that each send one request and read the response (so every connection is
an idle keep-alive connection that has served a request), wait, measure again, and print
(RSS after - RSS before) / N.

    scripts/idle/idle_rss.py [N ...]        (default: 5000 10000)

Needs a release build of weft (target/release/weft) and, for the peer, nginx. CSV on stdout:
server,connections,rss_before_kib,rss_after_kib,bytes_per_connection
"""
import os, resource, socket, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WEFT = os.environ.get("WEFT", os.path.join(ROOT, "target/release/weft"))
REQ = b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n"


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


def wait_port(port):
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"server on {port} did not start")


def measure(name, argv, port, n, env=None):
    proc = subprocess.Popen(["taskset", "-c", "0"] + argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        wait_port(port)
        # Warm up: a few requests so lazily built state (date cache, pools) exists before.
        for _ in range(10):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(REQ)
            s.recv(4096)
            s.close()
        time.sleep(0.5)
        before = tree_rss_kib(proc.pid)
        conns = []
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(REQ)
            data = s.recv(4096)
            if not data.startswith(b"HTTP/1.1 200"):
                raise SystemExit(f"{name}: connection {i} got {data[:40]!r}")
            conns.append(s)
        time.sleep(2)
        after = tree_rss_kib(proc.pid)
        print(f"{name},{n},{before},{after},{(after - before) * 1024 / n:.0f}", flush=True)
        for s in conns:
            s.close()
    finally:
        proc.terminate()
        proc.wait()


def main():
    counts = [int(a) for a in sys.argv[1:]] or [5000, 10000]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    print("server,connections,rss_before_kib,rss_after_kib,bytes_per_connection")
    www = os.path.join(ROOT, "www")
    for n in counts:
        for model in ("fiber", "thread"):
            port = 18500 + (model == "thread")
            cfg = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
            cfg.write("[limits]\nmax_connections = 20000\n")
            cfg.close()
            measure(f"weft-{model}", [WEFT, "serve", "--config", cfg.name, "--root", www, "--threads", "1",
                                      "--listen", f"127.0.0.1:{port}={model}"], port, n)
            os.unlink(cfg.name)
        if subprocess.run(["which", "nginx"], capture_output=True).returncode == 0:
            work = tempfile.mkdtemp()
            port = 18502
            conf = open(os.path.join(ROOT, "scripts/peers/peer-nginx.conf")).read()
            conf = conf.replace("PORT", str(port)).replace("WWW_ROOT", www)
            with open(os.path.join(work, "nginx.conf"), "w") as f:
                f.write(conf)
            measure("nginx", ["nginx", "-p", work, "-c", os.path.join(work, "nginx.conf")], port, n)
        else:
            print("# nginx not installed", file=sys.stderr)


if __name__ == "__main__":
    main()
