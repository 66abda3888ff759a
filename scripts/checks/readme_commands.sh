#!/usr/bin/env bash
# Runs the commands of the shell blocks of README.md and then of docs/*.md (in name order), in
# order, as a newcomer would on a fresh clone, shortened; each must exit 0 with no failed request
# in its report, and the committed results under results/ must be byte for byte what they were
# before.
#
#   scripts/checks/readme_commands.sh                      # from anywhere in the repository
#   PORT=18080 scripts/checks/readme_commands.sh           # the documents' 127.0.0.1:8080 is taken here
#   EXPERIMENTS=0 scripts/checks/readme_commands.sh        # leave out `weft-bench experiment`
#   TESTS=1 scripts/checks/readme_commands.sh              # also `cargo test --workspace` (long)
#   DRY=1 scripts/checks/readme_commands.sh                # only print the commands it would run
#
# What is shortened or redirected, and why:
# - durations (-d, --duration, --step-duration) become 1s, -n 10000 becomes -n 200 and
#   --connections 50 becomes 5 and --step 1,5,2 (a smaller SPECweb file set): a check, not a
#   measurement;
# - 127.0.0.1:8080, :8081 and :9000 become $PORT, $PORT2 and $BACKEND_PORT (defaults: the
#   documents'), and a `serve` without --listen gets --listen 127.0.0.1:$PORT;
# - `cargo install` installs under a scratch --root (with this checkout's target/, so it
#   reuses the release build), which goes first on the PATH: nothing is written to ~/.cargo;
# - `$(pgrep -nx weft)` becomes the pid of the server this script started (other weft
#   processes may be running on a shared machine);
# - a server (`... serve`, a line ending in `&`) runs in the background until the script ends;
#   the quick start's foreground `serve` is started, checked and stopped;
# - `weft-bench experiment` runs with one server (--servers fiber), and a full run (no --quick) runs as
#   --quick: a full run is a measurement that replaces the committed results by design;
#   --link (root, a network namespace) is left out unless LINK=1; --root /tmp/sw becomes a
#   scratch folder that is removed at the end;
# - `cargo test --workspace` runs only with TESTS=1;
# - a CARGO_TARGET_DIR the caller set is used, and the documents' target/release/ paths point
#   into it;
# - docs/https.md's `weft serve --https 127.0.0.1:8443 --tls-cert cert.pem ...` (a plain
#   block) starts before the first command that needs it, with a certificate made here by
#   that page's openssl recipe; 8443 and 8079 become $TLS_PORT and $SHIM_PORT; testssl.sh
#   is left out where it is not installed; `sudo` is dropped when run as root, and the cluster
#   experiment is left out without haproxy;
# - docs/operations.md's `weft check --config /etc/weft/weft.toml && systemctl reload weft` checks
#   the repository's deploy/weft.toml instead (with the sample site and $PORT: no /etc/weft,
#   no systemd here), and reloads nothing.
set -euo pipefail
cd "$(dirname "$0")/../.."

PORT=${PORT:-8080}
PORT2=${PORT2:-8081}
BACKEND_PORT=${BACKEND_PORT:-9000}
TLS_PORT=${TLS_PORT:-8443}
SHIM_PORT=${SHIM_PORT:-8079}
EXPERIMENTS=${EXPERIMENTS:-1}
TESTS=${TESTS:-0}
LINK=${LINK:-0}
DRY=${DRY:-0}

scratch=$(mktemp -d /tmp/weft-readme.XXXXXX)
pids=()
had_specweb=0
[ -e www/specweb ] && had_specweb=1
# Each background command leads its own process group (setsid), so that stopping it stops
# what it started too (`cargo run` and the server it runs).
stop() {
  kill -- "-$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
cleanup() {
  for p in "${pids[@]}"; do stop "$p"; done
  rm -rf "$scratch"
  [ "$had_specweb" = 1 ] || rm -rf www/specweb
}
trap cleanup EXIT

for p in "$PORT" "$PORT2" "$BACKEND_PORT" "$TLS_PORT" "$SHIM_PORT"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    echo "port $p is in use here: set PORT, PORT2, BACKEND_PORT, TLS_PORT or SHIM_PORT" >&2
    exit 1
  fi
done

# The committed results: their content, and git's view of the folder (untracked files too).
results_state() {
  git status --porcelain --untracked-files=all -- results
  git ls-files -z results | xargs -0 sha256sum
}
before=$(results_state)

# The caller's CARGO_TARGET_DIR where set (made absolute: the commands run from other folders),
# else this checkout's target/; the documents' `target/release/weft` resolve through the PATH.
target_dir=${CARGO_TARGET_DIR:-$PWD/target}
[[ $target_dir == /* ]] || target_dir="$PWD/$target_dir"
export PATH="$scratch/install/bin:$target_dir/release:$PATH"
export CARGO_TARGET_DIR="$target_dir"
server_pid=

# wait_port PORT PID LOG: waits for 127.0.0.1:PORT to accept (10 minutes at most: `cargo run`
# may build first) while PID lives; otherwise prints LOG and fails.
wait_port() {
  for _ in $(seq 6000); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || break
    sleep 0.1
  done
  echo "nothing listens on port $1:" >&2
  cat "$3" >&2
  exit 1
}

# The documents whose commands run, in order: README.md, then the pages of docs/.
docs=(README.md docs/*.md)

# `FILE:LINE<TAB>COMMAND` for every line of the documents' ```sh blocks.
commands() {
  local f
  for f in "${docs[@]}"; do
    awk -v f="$f" '/^```sh$/ { inside = 1; next } /^```/ { inside = 0; next }
         inside && $0 !~ /^[ \t]*(#|$)/ { print f ":" NR "\t" $0 }' "$f"
  done
}

shorten() {
  sed -E \
    -e "s/127\.0\.0\.1:8080/127.0.0.1:$PORT/g" \
    -e "s/127\.0\.0\.1:8081/127.0.0.1:$PORT2/g" \
    -e "s/127\.0\.0\.1:9000/127.0.0.1:$BACKEND_PORT/g" \
    -e "s/127\.0\.0\.1:8443/127.0.0.1:$TLS_PORT/g" \
    -e "s/127\.0\.0\.1:8079/127.0.0.1:$SHIM_PORT/g" \
    -e "s#(^| )(cert|key)\.pem#\\1$scratch/\\2.pem#g" \
    -e 's/(^| )-d[0-9]+s/\1-d1s/g' \
    -e 's/--duration [0-9]+s/--duration 1s/g' \
    -e 's/--step-duration [0-9]+s/--step-duration 1s/g' \
    -e 's/-n 10000/-n 200/g' \
    -e 's/--connections 50/--connections 5/g' \
    -e 's/--step [0-9,]+/--step 1,5,2/g' \
    -e "s/\\\$\\(pgrep -nx weft\\)/$server_pid/g" \
    -e "s# --root /tmp/sw# --root $scratch/sw#g" \
    -e "s#^cargo install (.*)#cargo install \\1 --root $scratch/install#" \
    -e "s#(^|[ =])target/(release|debug)/#\\1$target_dir/\\2/#g" \
    -e "s#^weft check --config /etc/weft/weft.toml && systemctl reload weft\$#weft check --config deploy/weft.toml --root www --listen 127.0.0.1:$PORT#"
}

# doc_line CMD: `FILE:LINE`, the first line of the documents that shows CMD (a code span may
# go on over a line break: `FILE:(over two lines)`); fails, saying so, when none shows it.
doc_line() {
  local f line
  for f in "${docs[@]}"; do
    line=$( (grep -nF -- "$1" "$f" || true) | head -1 | cut -d: -f1)
    if [ -z "$line" ] && tr '\n' ' ' <"$f" | grep -qF -- "$1"; then
      line='(over two lines)'
    fi
    if [ -n "$line" ]; then
      printf '%s:%s' "$f" "$line"
      return 0
    fi
  done
  echo "neither README.md nor docs/ shows \`$1\` any more: update this script" >&2
  return 1
}

# docs/https.md's server (its command is in a plain block), started before the first command
# that needs it, with the certificate that page's openssl recipe makes (run here, in the
# scratch folder: cert.pem, key.pem).
https_server=0
start_https() {
  local cmd='weft serve --https 127.0.0.1:8443 --tls-cert cert.pem --tls-key key.pem' line recipe
  https_server=1
  line=$(doc_line "$cmd")
  # The recipe: from its `openssl req` line to the first line not continued by a backslash.
  recipe=$(awk '/^openssl req -x509 /{p=1} p{print} p && !/\\$/{exit}' docs/https.md)
  if [ -z "$recipe" ]; then
    echo "docs/https.md no longer shows the \`openssl req -x509\` recipe: update this script" >&2
    exit 1
  fi
  if [ "$DRY" != 1 ]; then
    command -v openssl >/dev/null || { echo "openssl is missing (apt-get install openssl)" >&2; exit 1; }
    (cd "$scratch" && bash -c "$recipe") 2>/dev/null
  fi
  run_command "$line" "$cmd" 0
}

# run_command WHERE COMMAND STOP: runs the COMMAND shown at WHERE (FILE:LINE), shortened; a
# server runs in the background, and is stopped once it answered if STOP is 1.
run_command() {
  local line=$1 cmd=$2 stop_after=$3 run background port pid log
  # The documents' trailing comments (no command there has a `#` of its own).
  cmd=$(printf '%s' "$cmd" | sed -E 's/[[:space:]]+#.*$//; s/[[:space:]]+$//')
  run=$(printf '%s' "$cmd" | shorten)
  background=0
  case "$run" in *' &') background=1; run=${run% &} ;; esac
  case "$run" in *" --https "*) ;; *"127.0.0.1:$TLS_PORT"*)
    [ "$https_server" = 1 ] || start_https ;;
  esac
  case "$run" in
    'sudo '*)
      # The cluster experiment: root (network namespaces) and haproxy.
      if ! command -v haproxy >/dev/null; then
        echo "$line: skipped (haproxy is not installed: apt-get install haproxy): $cmd"
        return
      fi
      if [ "$(id -u)" = 0 ]; then
        run=${run#sudo }
      elif ! command -v sudo >/dev/null; then
        echo "$line: skipped (needs root, and sudo is not installed): $cmd"
        return
      fi ;;
  esac
  case "$run" in
    'scripts/conformance/testssl.sh'*)
      if ! command -v testssl >/dev/null && ! command -v testssl.sh >/dev/null; then
        echo "$line: skipped (testssl.sh is not installed: apt-get install testssl.sh): $cmd"
        return
      fi ;;
    'cargo test'*)
      if [ "$TESTS" != 1 ]; then echo "$line: skipped (TESTS=1 runs it): $cmd"; return; fi ;;
    *'weft-bench experiment'*)
      if [ "$EXPERIMENTS" != 1 ]; then echo "$line: skipped (EXPERIMENTS=0): $cmd"; return; fi
      case "$run" in *--link*)
        if [ "$LINK" != 1 ]; then echo "$line: skipped (LINK=1 runs it, as root): $cmd"; return; fi ;;
      esac
      case "$run" in *--quick*) ;; *) run="$run --quick" ;; esac
      case "$run" in
        *threads-cache*) run="$run --servers fiber-cache-on" ;;
        *) run="$run --servers fiber" ;;
      esac ;;
  esac
  case "$run" in
    *' serve --https '*)
      port=$TLS_PORT
      background=1 ;;
    *' serve'*)
      case "$run" in *--listen*) ;; *) run="$run --listen 127.0.0.1:$PORT" ;; esac
      port=$(printf '%s' "$run" | sed -E 's/.*--listen 127\.0\.0\.1:([0-9]+).*/\1/')
      background=1 ;;
    *'weft-bench tls-shim'*) port=$SHIM_PORT ;;
    *'weft-bench backend'*) port=$BACKEND_PORT ;;
    *'--example hello'*)
      # The example listens on 127.0.0.1:8080 itself.
      if [ "$PORT" != 8080 ]; then echo "$line: skipped (it binds port 8080; PORT is $PORT): $cmd"; return; fi
      port=8080
      background=1 ;;
    *) port= ;;
  esac
  n=$((n + 1))
  echo "$line: $run$([ "$background" = 1 ] && echo ' (in the background)')"
  [ "$DRY" = 1 ] && return
  if [ "$background" = 1 ]; then
    # exec: the pid is the server's own (for --server-pid and for stopping it).
    log="$scratch/bg-${line//[\/:]/_}.log"
    setsid bash -c "exec $run" </dev/null >"$log" 2>&1 &
    pid=$!
    pids+=("$pid")
    if [ -n "$port" ]; then
      wait_port "$port" "$pid" "$log"
      if [ "$port" = "$TLS_PORT" ]; then
        if ! curl -s --cacert "$scratch/cert.pem" -o /dev/null "https://127.0.0.1:$port/"; then
          echo "$line: no HTTPS answer on port $port" >&2; exit 1
        fi
      elif (exec 3<>"/dev/tcp/127.0.0.1/$port"; printf 'GET / HTTP/1.0\r\n\r\n' >&3; head -c 12 <&3) |
        grep -q 'HTTP/1.1 [0-9]'; then :; else
        echo "$line: no HTTP answer on port $port" >&2; exit 1
      fi
    fi
    case "$run" in
      cargo\ run*)
        # The quick start's server runs in the foreground until stopped: stop it here.
        stop "$pid" ;;
      *' serve'*)
        if [ "$stop_after" = 1 ]; then
          stop "$pid"
        elif [ -z "$server_pid" ]; then
          server_pid=$pid
        fi ;;
    esac
  elif ! timeout 900 bash -c "$run" </dev/null >"$scratch/out" 2>&1; then
    cat "$scratch/out" >&2
    echo "$line: failed: $run" >&2
    exit 1
  elif grep -Eq '(^|[[:space:]])errors[[:space:]]+[1-9]|"(connect|read|write|timeout|status)": [1-9]' \
      "$scratch/out"; then
    # weft-bench, like wrk, exits 0 whatever the answers were: its report says.
    cat "$scratch/out" >&2
    echo "$line: requests failed: $run" >&2
    exit 1
  fi
}

n=0
while IFS=$'\t' read -r line cmd; do
  run_command "$line" "$cmd" 0
done < <(commands)

# The first command of each section without a shell block, as the prose writes it (DIR: a
# scratch folder). Left out: `weft calibrate` (a saturating load for minutes), the Benchmarks
# section's scripts/peers/compare.sh (a measurement; needs wrk and nginx), and fuzzing (nightly).
mkdir -p "$scratch/dir"
# The blocks' servers stop first: with SO_REUSEPORT a new server on their port would share it.
for p in "${pids[@]}"; do stop "$p"; done
pids=()
for cmd in \
  'weft serve --listen 127.0.0.1:8080=fiber --listen 127.0.0.1:8081=thread' \
  'weft fileset DIR' \
  'weft serve --cgi DIR' \
  'cargo run --release -p weft --example hello'; do
  line=$(doc_line "$cmd")
  run_command "$line" "${cmd//DIR/$scratch/dir}" 1
done

[ "$DRY" = 1 ] && exit 0
after=$(results_state)
if [ "$before" != "$after" ]; then
  echo "results/ changed:" >&2
  diff <(echo "$before") <(echo "$after") >&2 || true
  exit 1
fi
echo "ok: $n commands of README.md and docs/ ran; results/ is unchanged"
