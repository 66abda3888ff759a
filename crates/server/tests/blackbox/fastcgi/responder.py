"""A FastCGI responder for weft's tests (python3, standard library only).

    python3 responder.py SOCKET_PATH

Listens on a Unix socket and answers each request by its PATH_INFO: `/env` prints the
variables it got, `/redirect` answers with a local redirect, `/stderr` writes to STDERR,
`/bad` sends a record of another protocol version, `/overloaded` ends with FCGI_OVERLOADED,
`/cut` closes the connection in the middle of a long answer, `/bighead` sends a header section
larger than weft's limit, `/slowbody` sends its body in pieces with pauses. A connection is kept
when FCGI_KEEP_CONN asks for it. Each accepted connection is counted in SOCKET_PATH.count.
"""
import os
import socket
import struct
import sys
import threading
import time

BEGIN, ABORT, END, PARAMS, STDIN, STDOUT, STDERR = 1, 2, 3, 4, 5, 6, 7


def recv_exact(c, n):
    out = b""
    while len(out) < n:
        b = c.recv(n - len(out))
        if not b:
            return None
        out += b
    return out


def record(c):
    h = recv_exact(c, 8)
    if h is None:
        return None
    _ver, kind, rid, clen, plen, _ = struct.unpack(">BBHHBB", h)
    content = recv_exact(c, clen) if clen else b""
    if plen:
        recv_exact(c, plen)
    return kind, rid, content


def send(c, kind, rid, data, version=1):
    pad = (8 - len(data) % 8) % 8
    c.sendall(struct.pack(">BBHHBB", version, kind, rid, len(data), pad, 0) + data + b"\0" * pad)


def stream(c, kind, rid, data):
    for i in range(0, len(data), 65528):
        send(c, kind, rid, data[i:i + 65528])


def end(c, rid, protocol_status=0):
    send(c, END, rid, struct.pack(">IB3x", 0, protocol_status))


def pairs(b):
    out, i = {}, 0

    def length():
        nonlocal i
        if b[i] < 128:
            i += 1
            return b[i - 1]
        n = struct.unpack(">I", b[i:i + 4])[0] & 0x7FFFFFFF
        i += 4
        return n

    while i < len(b):
        n, v = length(), length()
        out[b[i:i + n].decode()] = b[i + n:i + n + v]
        i += n + v
    return out


def answer(c, rid, env, body):
    path = env.get("PATH_INFO", b"").decode()
    if path == "/env":
        text = b"".join(b"%s=%s\n" % (k.encode(), v) for k, v in sorted(env.items()))
        stream(c, STDOUT, rid, b"Content-Type: text/plain\r\n\r\n" + text + b"BODY=" + body)
    elif path == "/redirect":
        stream(c, STDOUT, rid, b"Location: /index.html\r\n\r\n")
    elif path == "/stderr":
        stream(c, STDERR, rid, b"first line from the app\nsecond ")
        stream(c, STDERR, rid, b"line from the app\n")
        stream(c, STDOUT, rid, b"Status: 201 Created\r\nContent-Type: text/plain\r\n\r\nok")
    elif path == "/bad":
        send(c, STDOUT, rid, b"Content-Type: text/plain\r\n\r\nx", version=7)
        return False
    elif path == "/overloaded":
        end(c, rid, protocol_status=2)
        return True
    elif path == "/cut":
        stream(c, STDOUT, rid, b"Content-Type: text/plain\r\n\r\n" + b"x" * 300000)
        c.close()
        return False
    elif path == "/bighead":
        stream(c, STDOUT, rid, b"X-Big: " + b"y" * 40000 + b"\r\n\r\nbody")
    elif path == "/slowbody":
        stream(c, STDOUT, rid, b"Content-Type: text/plain\r\n\r\n")
        for i in range(3):
            time.sleep(0.2)
            stream(c, STDOUT, rid, b"piece %d\n" % i)
    else:
        stream(c, STDOUT, rid, b"Status: 404 Not Found\r\nContent-Type: text/plain\r\n\r\nno " + path.encode())
    send(c, STDOUT, rid, b"")
    end(c, rid)
    return True


def serve(c, count):
    with c:
        while True:
            r = record(c)
            if r is None:
                return
            kind, rid, content = r
            if kind != BEGIN:
                continue
            keep = content[2] & 1
            params, body = b"", b""
            while True:
                r = record(c)
                if r is None:
                    return
                kind, _, content = r
                if kind == PARAMS and content:
                    params += content
                elif kind == STDIN and content:
                    body += content
                elif kind == STDIN:
                    break
            if not answer(c, rid, pairs(params), body) or not keep:
                return


def main():
    path = sys.argv[1]
    if os.path.exists(path):
        os.unlink(path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(64)
    count = [0]
    while True:
        c, _ = s.accept()
        count[0] += 1
        with open(path + ".count", "w") as f:
            f.write(str(count[0]))
        threading.Thread(target=serve, args=(c, count), daemon=True).start()


main()
