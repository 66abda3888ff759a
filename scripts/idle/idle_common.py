"""What tls_idle_rss.py and h2_idle_rss.py share (a module they import, not a script).

weft started for them (pinned to core 0, one worker, room for 20,000 connections, the
repository's www/ as its root), the P-256 certificate made by `openssl req`, the resident set
of a process tree, and the measurement itself: a warm-up, the server's RSS, N connections
opened and held, 2 s, its RSS again.

WEFT (default target/release/weft) is the weft binary; MODELS (each script has its default)
the models they start.
"""
import contextlib, os, resource, socket, subprocess, time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WEFT = os.environ.get("WEFT", os.path.join(ROOT, "target/release/weft"))


def models(default):
    """The models to start: MODELS, else `default` (space-separated)."""
    return os.environ.get("MODELS", default).split()


def raise_nofile():
    """The open-file limit raised to its hard limit (the N connections need a descriptor each)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def tree_rss_kib(pid):
    """VmRSS of `pid` and its children, KiB (a child that exited meanwhile counts nothing)."""
    pids = [pid]
    try:
        pids += [int(p) for p in subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()]
    except ValueError:
        pass
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass
    return total


def make_cert(work):
    """A self-signed P-256 certificate for localhost and its key, as PEM files in `work`."""
    cert, key = os.path.join(work, "cert.pem"), os.path.join(work, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost"], check=True, capture_output=True)
    return cert, key


def wait_port(port):
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"server on {port} did not start")


@contextlib.contextmanager
def weft(port, listeners, work, extra=()):
    """weft serving with `extra` arguments and `listeners` (its --listen or --https arguments,
    on 127.0.0.1:`port`), pinned to core 0, once it accepts on `port`; stopped afterwards.
    Yields its process."""
    cfg = os.path.join(work, "weft.toml")
    with open(cfg, "w") as f:
        f.write("[limits]\nmax_connections = 20000\n")
    argv = [WEFT, "serve", "--config", cfg, "--root", os.path.join(ROOT, "www"), "--threads", "1",
            *extra, *listeners]
    proc = subprocess.Popen(["taskset", "-c", "0"] + argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        yield proc
    finally:
        proc.terminate()
        proc.wait()


def idle_rss(pid, n, open_conn):
    """The server `pid`'s RSS (KiB) before and 2 s after `n` connections from `open_conn()`
    opened, and the connections, still open: (before, after, conns). Ten connections opened and
    closed first build what the server builds lazily (date cache, pools, session cache, HPACK
    tables)."""
    for _ in range(10):
        open_conn().close()
    time.sleep(0.5)
    before = tree_rss_kib(pid)
    conns = [open_conn() for _ in range(n)]
    time.sleep(2)
    return before, tree_rss_kib(pid), conns


def per_conn(before, after, n):
    """Bytes per connection, as the CSVs print it."""
    return f"{(after - before) * 1024 / n:.0f}"
