# Sourced by the scripts that start servers.
# free_ports N: prints N distinct ports of 127.0.0.1, one per line, that no socket held when
# asked. The sockets are held together until all N are known, so two of them are never the
# same port (two separate bind-to-0 calls may return the same one).
free_ports() {
  python3 - "$1" <<'PY'
import socket, sys
held = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    held.append(s)
print("\n".join(str(s.getsockname()[1]) for s in held))
PY
}
