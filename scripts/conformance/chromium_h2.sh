#!/usr/bin/env bash
# Headless Chromium loads the sample site from weft over HTTPS, and each model must serve it
# over HTTP/2 (ALPN h2), as the HTTP/2 issue asks.
#
#   scripts/conformance/chromium_h2.sh [MODEL...]   (default: fiber thread process pipeline)
#
# Per model: starts `weft serve --root www --https 127.0.0.1:PORT=MODEL --status
# --access-log FILE` on a free port with a throw-away self-signed certificate (openssl, for
# 127.0.0.1 and localhost), then
#   1. Chromium (--headless=new --ignore-certificate-errors --log-net-log) loads `/` and
#      /haewelmann.html (PAGES="/ /x.html" to change them) with --dump-dom: each DOM must have
#      the page's <title>, and each page's net log must show its TLS sessions with ALPN h2
#      only, the page's GET sent as HTTP/2 HEADERS and a `:status: 200` back on the same
#      stream (the net logs' answered HTTP/2 streams, favicon's included, are counted);
#   2. Chromium loads /_weft/status: its table's HTTP/2 column for the listener must count at
#      least the pages' requests (the status page shows them as HTTP/2);
#   3. curl (HTTP/1.1, so it adds no HTTP/2 request) reads /_weft/status.json: the
#      listener's `http2.requests` must be at least the pages' count and the answered streams
#      of Chromium's net logs, `http2.connections` > 0;
#   4. after the server stops (the access log is buffered; stopping writes it out): the
#      access log must have a `GET PAGE HTTP/2.0` 200 line with Chromium's user agent
#      (HeadlessChrome) for every page, no Chromium line that is not HTTP/2.0, and at least
#      as many Chromium lines as answered streams in its net logs.
# Whether Chromium asks for /favicon.ico before --dump-dom exits varies from run to run, so
# the counts may differ between models; Chromium also opens a second, speculative
# connection per load (ALPN h2 too) that it closes unused, counted in http2.connections.
# Prints a line per model and a summary; the date, Chromium's version, weft's commit and the
# command come first. Details (net logs, DOMs, server and access logs) go to
# $OUT (default results/quick/chromium-h2/).
#
# Needs: chromium ($CHROMIUM, else `chromium`/`chromium-browser` on the PATH; when missing and
# running as root with apt-get, it runs `apt-get update && apt-get install -y chromium`),
# openssl, curl, python3. weft: $WEFT, else target/release/weft, built (release) if missing.
# Exit status: 0 when every check passes on every model, 1 when one fails, 2 when Chromium
# (or another tool) is missing and cannot be installed.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
me=scripts/conformance/chromium_h2.sh
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(fiber thread process pipeline)
read -r -a pages <<<"${PAGES:-/ /haewelmann.html}"
out=${OUT:-$root/results/quick/chromium-h2}

for tool in openssl curl python3; do
    command -v "$tool" >/dev/null || { echo "$me: $tool is missing" >&2; exit 2; }
done
find_chromium() {
    chromium=${CHROMIUM:-}
    [ -n "$chromium" ] || chromium=$(command -v chromium || command -v chromium-browser || true)
}
if [ -n "${CHROMIUM:-}" ] && ! command -v "$CHROMIUM" >/dev/null; then
    echo "$me: chromium is missing: CHROMIUM=$CHROMIUM is not a program" >&2
    exit 2
fi
find_chromium
if [ -z "$chromium" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "$me: chromium is missing; installing it (apt-get install -y chromium)" >&2
        if ! { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; } \
            >"${TMPDIR:-/tmp}/chromium-install.log" 2>&1; then
            echo "$me: chromium is missing and apt-get could not install it" \
                "(see ${TMPDIR:-/tmp}/chromium-install.log)" >&2
            exit 2
        fi
        find_chromium
    fi
    if [ -z "$chromium" ]; then
        echo "$me: chromium is missing (install it: apt-get install chromium, or set CHROMIUM)" >&2
        exit 2
    fi
fi
# Debian's /usr/bin/chromium wrapper prints a shell error of its own on stderr; the version
# is the first line of stdout.
chromium_version=$("$chromium" --version 2>/dev/null | head -1 || true)
if [ -z "$chromium_version" ]; then
    echo "$me: $chromium --version gave nothing: Chromium does not run here" >&2
    exit 2
fi

weft=${WEFT:-$root/target/release/weft}
if [ -z "${WEFT:-}" ] && [ ! -x "$weft" ]; then
    (cd "$root" && cargo build --release -q -p weft)
fi

mkdir -p "$out"
tmp=$(mktemp -d)
server_pid=
cleanup() {
    if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
    rm -rf "$tmp"
}
trap cleanup EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
    -addext basicConstraints=critical,CA:FALSE \
    -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null

# shellcheck source=scripts/lib/wait_listening.sh
. "$root/scripts/lib/wait_listening.sh"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

chromium_flags=(--headless=new --ignore-certificate-errors --disable-gpu --no-first-run
    --no-default-browser-check --disable-extensions --disable-background-networking)
# Chromium refuses to run as root with its sandbox.
[ "$(id -u)" != 0 ] || chromium_flags+=(--no-sandbox)

# chromium_load NAME URL: loads URL in a fresh profile, the DOM to $dir/NAME.html, the net log
# to $dir/NAME.netlog.json, stderr to $dir/NAME.chromium.log. Returns Chromium's status.
chromium_load() {
    timeout -k 5 90 "$chromium" "${chromium_flags[@]}" --user-data-dir="$tmp/profile-$1" \
        --log-net-log="$dir/$1.netlog.json" --dump-dom "$2" \
        >"$dir/$1.html" 2>"$dir/$1.chromium.log"
}

# netlog_check FILE PATH PORT: the net log shows an h2 TLS session to PORT that sent GET PATH
# and got :status 200 back on the same stream. Prints what it found, then on a second line
# how many HTTP/2 streams got an answer in all (the page's and the favicon's); status 1 when
# the page did not come over h2.
netlog_check() {
    python3 - "$@" <<'EOF'
import json, sys
f, path, port = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    d = json.load(open(f))
except Exception as e:  # a net log Chromium did not finish is not closed JSON
    print(f"net log unreadable ({e})"); sys.exit(1)
names = {v: k for k, v in d["constants"]["logEventTypes"].items()}
alpn, sent, status, all_sent = set(), {}, {}, set()
for e in d["events"]:
    n, p, src = names.get(e["type"]), e.get("params", {}), e["source"]["id"]
    if n == "SSL_CONNECT" and "next_proto" in p:
        alpn.add(p["next_proto"])
    elif n == "HTTP2_SESSION_SEND_HEADERS":
        h = p.get("headers", [])
        all_sent.add((src, p.get("stream_id")))
        if f":path: {path}" in h and ":method: GET" in h and f":authority: 127.0.0.1:{port}" in h:
            sent[(src, p.get("stream_id"))] = True
    elif n == "HTTP2_SESSION_RECV_HEADERS":
        for h in p.get("headers", []):
            if h.startswith(":status: "):
                status[(src, p.get("stream_id"))] = h.split()[1]
got = [status.get(k) for k in sent]
print(f"ALPN {'/'.join(sorted(alpn)) or 'none'}, HTTP/2 GET {path}: "
      + (", ".join(s or "no answer" for s in got) if got else "not sent"))
print(sum(1 for k in all_sent if k in status))
sys.exit(0 if alpn == {"h2"} and "200" in got else 1)
EOF
}

# status_column FILE PORT: the HTTP/2 column of the status page's row for the listener.
status_column() {
    python3 - "$@" <<'EOF'
import re, sys
html, port = open(sys.argv[1]).read(), sys.argv[2]
cells = lambda row: [re.sub(r"<[^>]*>", "", c).strip()
                     for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
rows = [cells(r) for r in re.findall(r"<tr[^>]*>(.*?)</tr>", html, re.S)]
head = next((r for r in rows if "HTTP/2" in r and "listener" in r), None)
row = next((r for r in rows if r and r[0] == f"127.0.0.1:{port}"), None)
print(row[head.index("HTTP/2")] if head and row and len(row) > head.index("HTTP/2") else "none")
EOF
}

# status_json_http2 FILE PORT: the listener's http2 requests and connections ("none none").
status_json_http2() {
    python3 - "$@" <<'EOF' 2>/dev/null || echo "none none"
import json, sys
d = json.load(open(sys.argv[1]))
l = next(l for l in d["listeners"] if l["addr"] == f"127.0.0.1:{sys.argv[2]}")
print(l["http2"]["requests"], l["http2"]["connections"])
EOF
}

echo "# headless Chromium over HTTP/2 against weft"
echo "date: $(date -u +%F)"
echo "chromium: $chromium_version ($chromium ${chromium_flags[*]})"
echo "weft: $("$weft" --version 2>/dev/null | head -1 || echo weft), ${weft#"$root"/} built $(date -u -r "$weft" '+%F %H:%M UTC'); tree at $(git -C "$root" log -1 --format=%h 2>/dev/null || echo '?')"
echo "command: $me${*:+ $*}"
echo "pages: ${pages[*]}"
echo

failed_models=()
summary=()
for model in "${models[@]}"; do
    dir=$out/$model
    rm -rf "$dir"
    mkdir -p "$dir"
    fails=()
    port=$(free_port)
    "$weft" serve --root "$root/www" --https "127.0.0.1:$port=$model" \
        --tls-cert "$tmp/cert.pem" --tls-key "$tmp/key.pem" --status \
        --access-log "$dir/access.log" >"$dir/server.log" 2>&1 &
    server_pid=$!
    wait_listening "weft ($model)" "$port" "$dir/server.log"
    base=https://127.0.0.1:$port

    # 1. the pages, with Chromium
    i=0
    net_h2=0
    pages_h2=0
    for page in "${pages[@]}"; do
        i=$((i + 1))
        name=page$i
        rc=0
        chromium_load "$name" "$base$page" || rc=$?
        if [ $rc -ne 0 ]; then
            fails+=("Chromium exited $rc on $page (see $dir/$name.chromium.log)")
            continue
        fi
        want=$(curl -sk --http1.1 "$base$page" | grep -o -i '<title>[^<]*</title>' | head -1 || true)
        if [ -z "$want" ] || ! grep -q -i -F "$want" "$dir/$name.html"; then
            fails+=("$page: Chromium's DOM lacks the page's ${want:-<title>}")
        fi
        ok=0
        found=$(netlog_check "$dir/$name.netlog.json" "$page" "$port") || ok=$?
        answered=$(sed -n 2p <<<"$found")
        found=$(head -1 <<<"$found")
        echo "  $model $page: $found; $answered HTTP/2 streams answered"
        [ $ok -ne 0 ] || pages_h2=$((pages_h2 + 1))
        [ $ok -eq 0 ] || fails+=("$page: the net log does not show it over h2 ($found)")
        net_h2=$((net_h2 + ${answered:-0}))
    done

    # 2. the status page, with Chromium
    status_h2=none
    if chromium_load status "$base/_weft/status"; then
        status_h2=$(status_column "$dir/status.html" "$port")
        answered=$(netlog_check "$dir/status.netlog.json" /_weft/status "$port" | sed -n 2p) || true
        net_h2=$((net_h2 + ${answered:-0}))
    else
        fails+=("Chromium failed on /_weft/status (see $dir/status.chromium.log)")
    fi
    case $status_h2 in
        ''|none|*[!0-9]*) fails+=("/_weft/status in Chromium: no HTTP/2 column for the listener ($dir/status.html)") ;;
        *) [ "$status_h2" -ge ${#pages[@]} ] ||
            fails+=("/_weft/status in Chromium: HTTP/2 column $status_h2 < ${#pages[@]} pages") ;;
    esac

    # 3. the status JSON, with curl over HTTP/1.1
    curl -sk --http1.1 "$base/_weft/status.json" >"$dir/status.json" || true
    read -r json_h2_req json_h2_conn <<<"$(status_json_http2 "$dir/status.json" "$port")"
    if [ "$json_h2_req" = none ]; then
        fails+=("status.json: no http2 block for the listener ($dir/status.json)")
    else
        [ "$json_h2_req" -ge ${#pages[@]} ] ||
            fails+=("status.json: http2.requests $json_h2_req < ${#pages[@]} pages")
        [ "$json_h2_req" -ge "$net_h2" ] ||
            fails+=("status.json: http2.requests $json_h2_req < $net_h2 answered in Chromium's net logs")
        [ "$json_h2_conn" -gt 0 ] || fails+=("status.json: http2.connections is 0")
    fi

    # 4. the access log, once the server has stopped (and written it)
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$server_pid" 2>/dev/null; then
        fails+=("weft ($model) did not stop within 10 s of SIGTERM")
        kill -KILL "$server_pid" 2>/dev/null || true
    fi
    wait "$server_pid" 2>/dev/null || true
    server_pid=
    touch "$dir/access.log"
    chrome_lines=$(grep -c 'HeadlessChrome/' "$dir/access.log" || true)
    chrome_h2=$(grep 'HeadlessChrome/' "$dir/access.log" | grep -c -F ' HTTP/2.0" ' || true)
    for page in "${pages[@]}"; do
        grep -F "\"GET $page HTTP/2.0\" 200 " "$dir/access.log" | grep -q 'HeadlessChrome/' ||
            fails+=("access log: no \"GET $page HTTP/2.0\" 200 line from HeadlessChrome")
    done
    [ "$chrome_h2" = "$chrome_lines" ] ||
        fails+=("access log: $((chrome_lines - chrome_h2)) of Chromium's $chrome_lines lines are not HTTP/2.0")
    [ "$chrome_h2" -ge "$net_h2" ] ||
        fails+=("access log: $chrome_h2 Chromium HTTP/2.0 lines < $net_h2 answered in its net logs")

    line="$model: $pages_h2/${#pages[@]} pages over h2, $net_h2 HTTP/2 answers in Chromium's net logs;"
    line+=" status page HTTP/2 column $status_h2;"
    line+=" status.json http2 requests $json_h2_req, connections $json_h2_conn;"
    line+=" access log $chrome_h2/$chrome_lines Chromium lines HTTP/2.0"
    if [ ${#fails[@]} -eq 0 ]; then
        echo "ok   $line"
        summary+=("| $model | ok | $net_h2 | $status_h2 | $json_h2_req | $json_h2_conn | $chrome_h2/$chrome_lines |")
    else
        echo "FAIL $line"
        for f in "${fails[@]}"; do echo "     - $f"; done
        failed_models+=("$model")
        summary+=("| $model | FAIL | $net_h2 | $status_h2 | $json_h2_req | $json_h2_conn | $chrome_h2/$chrome_lines |")
    fi
done

echo
echo "| model | result | HTTP/2 answers in Chromium's net logs | status page HTTP/2 column | status.json http2.requests | http2.connections | Chromium's access-log lines HTTP/2.0 |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${summary[@]}"
echo
echo "details: ${out#"$root"/}/<model>/"
if [ ${#failed_models[@]} -gt 0 ]; then
    echo "$me: FAILED on ${failed_models[*]}" >&2
    exit 1
fi
echo "all checks passed on ${models[*]}"
