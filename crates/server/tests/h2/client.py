#!/usr/bin/env python3
"""HTTP/2 clients for crates/server/tests/h2.rs.

Usage: client.py MODE --port PORT [--tls --ca FILE] [--alpn h2,http/1.1]

Every mode prints one JSON object on standard output (bytes as hex), and the Rust test
asserts on it. Modes:

  requests      the requests of a JSON list on standard input, all opened at once on one
                connection with the `h2` library (flow control as the library keeps it; the
                client's windows are the default 65,535 bytes, so a large response needs the
                server to wait for WINDOW_UPDATE frames); `ended_order`: the stream ids in
                the order their responses ended; with --await-goaway, reads on after the
                last response until GOAWAY or the close. A request with `"hold": true` sends its
                body's bytes without END_STREAM and nothing more
  slow-head     raw frames: a HEADERS frame without END_HEADERS and no CONTINUATION; what
                the server sends (GOAWAY?) before it closes, and when
  refuse        raw frames: 129 POST streams left open; the extra one is refused, then the
                128 bodies are ended and each answered
  rapid-reset   raw frames: 1000 GETs, each reset at once (CVE-2023-44487)
  settings-flood, ping-flood
                raw frames: 2500 empty SETTINGS or PING frames at once (more than
                twice the server's 1000 a second: a fixed one-second window lets a
                burst across its edge pass at up to twice the rate)
  big-headers   raw frames: a request whose field section is 40,000 bytes (HEADERS and
                CONTINUATION frames), then an ordinary GET on the same connection
  stall         `GET PATH` with the client's windows left closed once the first 65,535
                bytes came: prints `stalled`, waits for a line on standard input (the test
                sends SIGTERM to the server meanwhile), notes what the server sends while
                the client says nothing, then opens the windows and reads to the end
  idle          one GET answered, then `idle` printed; after a line on standard input, what
                the server sends (GOAWAY?) before it closes
"""

import argparse
import gzip
import json
import select
import socket
import ssl
import sys
import threading
import time

try:
    import h2.config
    import h2.connection
    import h2.events
    import h2.exceptions
    import h2.settings
    import hpack
    from hyperframe.frame import (
        ContinuationFrame,
        DataFrame,
        Frame,
        GoAwayFrame,
        HeadersFrame,
        PingFrame,
        RstStreamFrame,
        SettingsFrame,
        WindowUpdateFrame,
    )
except ImportError as e:  # the Rust test checks for the library first
    print(json.dumps({"error": "import: %s" % e}))
    sys.exit(3)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
ENHANCE_YOUR_CALM = 0xB
REFUSED_STREAM = 0x7


def connect(args):
    sock = socket.create_connection(("127.0.0.1", args.port), timeout=args.timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    alpn = None
    if args.tls:
        ctx = ssl.create_default_context(cafile=args.ca)
        ctx.set_alpn_protocols(args.alpn.split(","))
        sock = ctx.wrap_socket(sock, server_hostname="localhost")
        alpn = sock.selected_alpn_protocol()
    return sock, alpn


def scheme(args):
    return "https" if args.tls else "http"


def text(b):
    return b.decode("latin-1") if isinstance(b, (bytes, bytearray)) else b


def recv(sock, n=65536):
    """Bytes from the socket; b"" at its end (a reset or a TLS close counts as the end)."""
    try:
        return sock.recv(n)
    except (ConnectionResetError, ssl.SSLError, BrokenPipeError):
        return b""


# ---- requests: the h2 library ------------------------------------------------------------


class Reply:
    def __init__(self, sid, spec):
        self.sid = sid
        self.spec = spec
        self.status = None
        self.headers = []
        self.body = bytearray()
        self.data_frames = 0
        self.ended = False
        self.reset = None
        self.trailers = None

    def done(self):
        return self.ended or self.reset is not None

    def json(self):
        out = {
            "id": self.sid,
            "status": self.status,
            "headers": self.headers,
            "body_hex": bytes(self.body).hex(),
            "data_frames": self.data_frames,
            "ended": self.ended,
            "reset": self.reset,
        }
        enc = dict(self.headers).get("content-encoding")
        if enc == "gzip" and self.ended:
            try:
                out["decoded_hex"] = gzip.decompress(bytes(self.body)).hex()
            except Exception as e:  # noqa: BLE001 - reported to the test
                out["decoded_error"] = str(e)
        return out


def mode_requests(args):
    specs = json.load(sys.stdin)
    sock, alpn = connect(args)
    result = {
        "alpn": alpn,
        "settings": {},
        "goaway": None,
        "responses": [],
        "ended_order": [],
        "error": None,
    }
    if args.tls and alpn != "h2":
        result["error"] = "ALPN chose %r" % alpn
        print(json.dumps(result))
        return
    cfg = h2.config.H2Configuration(
        client_side=True, header_encoding=None, validate_inbound_headers=False
    )
    conn = h2.connection.H2Connection(config=cfg)
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    replies = {}
    bodies = {}  # stream id -> bytes still to send
    for spec in specs:
        sid = conn.get_next_available_stream_id()
        headers = [
            (":method", spec.get("method", "GET")),
            (":scheme", scheme(args)),
            (":authority", "localhost"),
            (":path", spec["path"]),
        ] + [tuple(h) for h in spec.get("headers", [])]
        body = bytes.fromhex(spec["body_hex"]) if "body_hex" in spec else None
        conn.send_headers(sid, headers, end_stream=body is None)
        replies[sid] = Reply(sid, spec)
        if body is not None and spec.get("hold"):
            # Its body's bytes, and then nothing: the rest never comes.
            conn.send_data(sid, body, end_stream=False)
        elif body is not None:
            bodies[sid] = body

    def push_bodies():
        for sid in list(bodies):
            rest = bodies[sid]
            try:
                while rest:
                    window = conn.local_flow_control_window(sid)
                    n = min(window, conn.max_outbound_frame_size, len(rest))
                    if n <= 0:
                        break
                    conn.send_data(sid, rest[:n], end_stream=n == len(rest))
                    rest = rest[n:]
                if not rest:
                    del bodies[sid]
                else:
                    bodies[sid] = rest
            except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
                # Answered (413) or reset before the whole body went.
                del bodies[sid]

    push_bodies()
    sock.sendall(conn.data_to_send())
    deadline = time.monotonic() + args.timeout
    while not all(r.done() for r in replies.values()) and time.monotonic() < deadline:
        data = recv(sock)
        if not data:
            result["error"] = "connection closed before every response ended"
            break
        try:
            events = conn.receive_data(data)
        except h2.exceptions.ProtocolError as e:
            result["error"] = "protocol error: %r" % e
            break
        for ev in events:
            if isinstance(ev, h2.events.RemoteSettingsChanged):
                for k, v in ev.changed_settings.items():
                    result["settings"][str(int(k))] = v.new_value
            elif isinstance(ev, h2.events.ResponseReceived):
                r = replies[ev.stream_id]
                hs = [[text(n), text(v)] for n, v in ev.headers]
                r.status = int(dict(hs)[":status"])
                r.headers = [h for h in hs if not h[0].startswith(":")]
            elif isinstance(ev, h2.events.TrailersReceived):
                replies[ev.stream_id].trailers = True
            elif isinstance(ev, h2.events.DataReceived):
                r = replies[ev.stream_id]
                r.body += ev.data
                r.data_frames += 1
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                replies[ev.stream_id].ended = True
                result["ended_order"].append(ev.stream_id)
            elif isinstance(ev, h2.events.StreamReset):
                if ev.stream_id in replies and replies[ev.stream_id].reset is None:
                    replies[ev.stream_id].reset = int(ev.error_code)
                bodies.pop(ev.stream_id, None)
            elif isinstance(ev, h2.events.ConnectionTerminated):
                result["goaway"] = {
                    "code": int(ev.error_code),
                    "last_stream_id": ev.last_stream_id,
                }
        push_bodies()
        out = conn.data_to_send()
        if out:
            sock.sendall(out)
    else:
        if not all(r.done() for r in replies.values()):
            result["error"] = "timed out"
    # With --await-goaway: the frames after the last response, until GOAWAY or the close.
    while args.await_goaway and result["goaway"] is None and time.monotonic() < deadline:
        data = recv(sock)
        if not data:
            break
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.ConnectionTerminated):
                result["goaway"] = {
                    "code": int(ev.error_code),
                    "last_stream_id": ev.last_stream_id,
                }
    result["responses"] = [replies[s].json() for s in sorted(replies)]
    try:
        conn.close_connection()
        sock.sendall(conn.data_to_send())
    except Exception:  # noqa: BLE001 - the server may have gone
        pass
    sock.close()
    print(json.dumps(result))


# ---- raw frames: hyperframe and hpack ------------------------------------------------------


class Raw:
    """A connection spoken frame by frame, with no checks of the client's own."""

    def __init__(self, args):
        self.sock, self.alpn = connect(args)
        self.args = args
        self.buf = b""
        self.enc = hpack.Encoder()
        self.dec = hpack.Decoder()
        self.dec.max_allowed_table_size = 65536
        self.settings = {}
        self.eof = False
        self.lock = threading.Lock()

    def send(self, frames):
        data = b"".join(f.serialize() for f in frames)
        with self.lock:
            self.sock.sendall(data)

    def send_bytes(self, data):
        with self.lock:
            self.sock.sendall(data)

    def start(self):
        """Preface and an empty SETTINGS; then the server's SETTINGS (acknowledged)."""
        self.send_bytes(PREFACE + SettingsFrame(0).serialize())
        f = self.frame()
        if not isinstance(f, SettingsFrame):
            raise SystemExit(json.dumps({"error": "first frame %r" % (f,)}))
        self.settings = {str(k): v for k, v in f.settings.items()}
        self.send([SettingsFrame(0, flags=["ACK"])])

    def take_frame(self):
        """A whole frame from what was read, if there is one."""
        if len(self.buf) >= 9:
            f, length = Frame.parse_frame_header(memoryview(self.buf[:9]))
            if len(self.buf) >= 9 + length:
                f.parse_body(memoryview(self.buf[9 : 9 + length]))
                self.buf = self.buf[9 + length :]
                return f
        return None

    def frame(self, timeout=None):
        """The next frame; None at the connection's end (`self.eof` set) or after `timeout`
        seconds."""
        end = time.monotonic() + (timeout if timeout is not None else self.args.timeout)
        while True:
            f = self.take_frame()
            if f is not None:
                return f
            left = end - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                data = recv(self.sock)
            except (socket.timeout, TimeoutError):
                return None
            if not data:
                self.eof = True
                return None
            self.buf += data

    def headers(self, sid, fields, end_stream):
        block = self.enc.encode(fields)
        flags = ["END_HEADERS"] + (["END_STREAM"] if end_stream else [])
        f = HeadersFrame(sid, flags=flags)
        f.data = block
        return f

    def request(self, sid, method, path, end_stream=True, extra=()):
        fields = [
            (":method", method),
            (":scheme", scheme(self.args)),
            (":authority", "localhost"),
            (":path", path),
        ] + list(extra)
        return self.headers(sid, fields, end_stream)

    def status(self, f):
        """`:status` of a HEADERS frame (decoded in order, so every HEADERS must pass here)."""
        for n, v in self.dec.decode(f.data, raw=True):
            if n == b":status":
                return int(v)
        return None


def goaway_json(f):
    return {"code": f.error_code, "last_stream_id": f.last_stream_id}


def flood(args, make, count):
    """Sends `count` frames from `make(i)` while reading: GOAWAY seen?

    One thread, the socket non-blocking: writing and reading alternate as each side has
    room (a TLS socket must not be read and written from two threads at once, and neither
    side may wait on a write while the other waits on its own)."""
    c = Raw(args)
    c.start()
    data = b"".join(make(i).serialize() for i in range(count))
    sent = 0
    c.sock.setblocking(False)
    out = {"settings": c.settings, "goaway": None, "frames": {}, "write_error": None}
    statuses = 0
    end = time.monotonic() + args.timeout
    while time.monotonic() < end and out["goaway"] is None:
        writing = sent < len(data)
        pending = isinstance(c.sock, ssl.SSLSocket) and c.sock.pending() > 0
        if not pending:
            select.select([c.sock], [c.sock] if writing else [], [], 0.05)
        if writing:
            try:
                sent += c.sock.send(data[sent : sent + 16384])
            except (ssl.SSLWantWriteError, ssl.SSLWantReadError, BlockingIOError):
                pass
            except OSError as e:
                out["write_error"] = str(e)
                sent = len(data)
        try:
            chunk = c.sock.recv(65536)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
            chunk = None
        except (ConnectionResetError, ssl.SSLError, BrokenPipeError):
            chunk = b""
        if chunk == b"":
            c.eof = True
        elif chunk:
            c.buf += chunk
        while True:
            f = c.take_frame()
            if f is None:
                break
            name = type(f).__name__
            out["frames"][name] = out["frames"].get(name, 0) + 1
            if isinstance(f, HeadersFrame):
                c.status(f)
                statuses += 1
            if isinstance(f, GoAwayFrame):
                out["goaway"] = goaway_json(f)
                break
        if c.eof:
            break
    out["responses"] = statuses
    print(json.dumps(out))


def mode_rapid_reset(args):
    # The HEADERS are encoded in the order they are sent, by one encoder.
    enc = hpack.Encoder()
    fields = [
        (":method", "GET"),
        (":scheme", scheme(args)),
        (":authority", "localhost"),
        (":path", "/"),
    ]

    def make(i):
        sid = 2 * (i // 2) + 1
        if i % 2 == 0:
            f = HeadersFrame(sid, flags=["END_HEADERS", "END_STREAM"])
            f.data = enc.encode(fields)
            return f
        return RstStreamFrame(sid, error_code=0x8)  # CANCEL

    flood(args, make, 2000)


def mode_settings_flood(args):
    flood(args, lambda i: SettingsFrame(0), 2500)


def mode_ping_flood(args):
    flood(args, lambda i: PingFrame(0, opaque_data=i.to_bytes(8, "big")), 2500)


def mode_refuse(args):
    c = Raw(args)
    c.start()
    out = {"settings": c.settings, "refused": [], "resets": {}, "statuses": {}, "bodies": {}}
    frames = [
        c.request(2 * i + 1, "POST", "/echo", end_stream=False, extra=[("content-length", "1")])
        for i in range(129)
    ]
    c.send(frames)
    # The extra stream's RST_STREAM, before anything else can come (nothing else is due).
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        f = c.frame(timeout=2)
        if f is None:
            break
        if isinstance(f, RstStreamFrame):
            out["resets"][str(f.stream_id)] = f.error_code
            if f.error_code == REFUSED_STREAM:
                out["refused"].append(f.stream_id)
                break
        if isinstance(f, GoAwayFrame):
            out["goaway"] = goaway_json(f)
            print(json.dumps(out))
            return
    # The 128 bodies, each one byte: every stream answered with it.
    ids = [2 * i + 1 for i in range(128)]
    frames = []
    for sid in ids:
        d = DataFrame(sid, flags=["END_STREAM"])
        d.data = bytes([0x41 + sid % 26])
        frames.append(d)
    c.send(frames)
    open_ids = set(ids)
    while open_ids and time.monotonic() < deadline:
        f = c.frame(timeout=max(0.1, deadline - time.monotonic()))
        if f is None:
            break
        if isinstance(f, HeadersFrame):
            out["statuses"][str(f.stream_id)] = c.status(f)
        elif isinstance(f, DataFrame):
            key = str(f.stream_id)
            out["bodies"][key] = out["bodies"].get(key, "") + bytes(f.data).hex()
        elif isinstance(f, RstStreamFrame):
            out["resets"][str(f.stream_id)] = f.error_code
            open_ids.discard(f.stream_id)
        elif isinstance(f, GoAwayFrame):
            out["goaway"] = goaway_json(f)
            break
        if "END_STREAM" in f.flags:
            open_ids.discard(f.stream_id)
    out["unanswered"] = sorted(open_ids)
    print(json.dumps(out))


def mode_big_headers(args):
    c = Raw(args)
    c.start()
    block = c.enc.encode(
        [
            (":method", "GET"),
            (":scheme", scheme(args)),
            (":authority", "localhost"),
            (":path", "/"),
            ("x-big", "a" * 40000),
        ],
        huffman=False,
    )
    frames = []
    size = 16384
    for i in range(0, len(block), size):
        piece = block[i : i + size]
        last = i + size >= len(block)
        if i == 0:
            f = HeadersFrame(1, flags=["END_STREAM"] + (["END_HEADERS"] if last else []))
        else:
            f = ContinuationFrame(1, flags=["END_HEADERS"] if last else [])
        f.data = piece
        frames.append(f)
    c.send(frames)
    out = {"status": None, "reset": None, "goaway": None, "after": None}
    end = time.monotonic() + args.timeout
    while time.monotonic() < end:
        f = c.frame(timeout=args.timeout)
        if f is None:
            break
        if isinstance(f, HeadersFrame) and f.stream_id == 1:
            out["status"] = c.status(f)
            if "END_STREAM" in f.flags:
                break
        elif isinstance(f, DataFrame) and f.stream_id == 1 and "END_STREAM" in f.flags:
            break
        elif isinstance(f, RstStreamFrame) and f.stream_id == 1:
            out["reset"] = f.error_code
            break
        elif isinstance(f, GoAwayFrame):
            out["goaway"] = goaway_json(f)
            break
    if out["goaway"] is None:
        # The connection still serves.
        c.send([c.request(3, "GET", "/")])
        while time.monotonic() < end:
            f = c.frame(timeout=args.timeout)
            if f is None:
                break
            if isinstance(f, HeadersFrame) and f.stream_id == 3:
                out["after"] = c.status(f)
                break
            if isinstance(f, GoAwayFrame):
                out["goaway"] = goaway_json(f)
                break
    print(json.dumps(out))


def mode_stall(args):
    """A response held by the client's flow control while the server shuts down."""
    c = Raw(args)
    c.start()
    c.send([c.request(1, "GET", args.path)])
    out = {
        "status": None,
        "received": 0,
        "goaway_while_silent": None,
        "goaway": None,
        "ended": False,
        "reset": None,
        "closed": False,
        "body_hex": None,
    }
    body = bytearray()

    def take(f):
        if isinstance(f, HeadersFrame) and f.stream_id == 1:
            out["status"] = c.status(f)
        elif isinstance(f, DataFrame) and f.stream_id == 1:
            body.extend(f.data)
        elif isinstance(f, RstStreamFrame) and f.stream_id == 1:
            out["reset"] = f.error_code
        elif isinstance(f, GoAwayFrame):
            out["goaway"] = goaway_json(f)
        if f.stream_id == 1 and "END_STREAM" in f.flags:
            out["ended"] = True

    # The first 65,535 bytes (the client's windows), then nothing more can come.
    end = time.monotonic() + args.timeout
    while len(body) < 65535 and time.monotonic() < end:
        f = c.frame(timeout=args.timeout)
        if f is None:
            break
        take(f)
    out["received"] = len(body)
    print("stalled", flush=True)
    sys.stdin.readline()
    # The server is shutting down: what comes while the client says nothing.
    silent_end = time.monotonic() + args.silent
    while time.monotonic() < silent_end:
        f = c.frame(timeout=max(0.05, silent_end - time.monotonic()))
        if f is None:
            break
        take(f)
        if out["goaway"] is not None:
            out["goaway_while_silent"] = out["goaway"]
    # Open the windows wide; read to the end of the stream and of the connection (which
    # the server may have closed already: its send timeout).
    try:
        c.send([WindowUpdateFrame(0, window_increment=1 << 30), WindowUpdateFrame(1, window_increment=1 << 30)])
    except OSError:
        pass
    end = time.monotonic() + args.timeout
    while time.monotonic() < end:
        f = c.frame(timeout=max(0.05, end - time.monotonic()))
        if f is None:
            break
        take(f)
    out["closed"] = c.eof
    out["body_hex"] = bytes(body).hex()
    print(json.dumps(out))


def mode_slow_head(args):
    """A request head that never ends: HEADERS without END_HEADERS, then nothing."""
    c = Raw(args)
    c.start()
    block = c.enc.encode(
        [(":method", "GET"), (":scheme", scheme(args)), (":authority", "localhost")],
        huffman=False,
    )
    f = HeadersFrame(1, flags=["END_STREAM"])
    f.data = block
    start = time.monotonic()
    c.send([f])
    out = {"goaway": None, "closed": False, "elapsed": None}
    while True:
        f = c.frame(timeout=args.timeout)
        if f is None:
            out["closed"] = c.eof
            break
        if isinstance(f, GoAwayFrame):
            out["goaway"] = goaway_json(f)
    out["elapsed"] = time.monotonic() - start
    print(json.dumps(out))


def mode_idle(args):
    """An idle connection (one request answered) when the server shuts down."""
    c = Raw(args)
    c.start()
    c.send([c.request(1, "GET", "/")])
    out = {"status": None, "goaway": None, "closed": False, "elapsed": None}
    while True:
        f = c.frame(timeout=args.timeout)
        if f is None:
            break
        if isinstance(f, HeadersFrame) and f.stream_id == 1:
            out["status"] = c.status(f)
        if f.stream_id == 1 and "END_STREAM" in f.flags:
            break
    print("idle", flush=True)
    sys.stdin.readline()
    start = time.monotonic()
    while True:
        f = c.frame(timeout=args.timeout)
        if f is None:
            out["closed"] = c.eof
            break
        if isinstance(f, GoAwayFrame):
            out["goaway"] = goaway_json(f)
    out["elapsed"] = time.monotonic() - start
    print(json.dumps(out))


MODES = {
    "requests": mode_requests,
    "slow-head": mode_slow_head,
    "refuse": mode_refuse,
    "rapid-reset": mode_rapid_reset,
    "settings-flood": mode_settings_flood,
    "ping-flood": mode_ping_flood,
    "big-headers": mode_big_headers,
    "stall": mode_stall,
    "idle": mode_idle,
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=sorted(MODES))
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--tls", action="store_true")
    p.add_argument("--ca")
    p.add_argument("--alpn", default="h2")
    p.add_argument("--path", default="/")
    p.add_argument("--timeout", type=float, default=10.0)
    p.add_argument("--silent", type=float, default=2.0)
    p.add_argument("--await-goaway", action="store_true")
    args = p.parse_args()
    MODES[args.mode](args)


if __name__ == "__main__":
    main()
