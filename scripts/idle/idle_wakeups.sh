#!/usr/bin/env bash
# How often an idle server wakes: for each model, starts BIN serve on the sample site with two
# workers, sends one request (and lets its connection close), then counts the context switches
# of every thread of the server and of the processes it started (the process model's master
# and children) over SECONDS with no client. Prints wake-ups per second per model and build;
# an idle server should make none (nginx makes none: its workers sleep in epoll_wait with no
# timer). With strace installed, STRACE=1 then lists the system calls of SECONDS more (of the
# server process's threads; the process model's master and children are not traced).
#
#   scripts/idle/idle_wakeups.sh SECONDS BIN...
#   e.g. scripts/idle/idle_wakeups.sh 5 /tmp/weft-before target/release/weft
# MODELS="fiber thread" limits the models (default: fiber thread process pipeline).
# KEEPALIVE=N: instead, N keep-alive connections each send one request and stay open, idle,
# through the count (the process model's children then linger for their next request).
set -u
secs=$1; shift
cd "$(dirname "$0")/../.."
source scripts/lib/wait_listening.sh
root_flag=()
if ((EUID == 0)); then root_flag=(--allow-root); fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Context switches so far of every thread of PID and its descendant processes.
switches() {
  local pids=("$1") all=() p
  while ((${#pids[@]})); do
    p=${pids[0]}; pids=("${pids[@]:1}"); all+=("$p")
    for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do pids+=("$c"); done
  done
  for p in "${all[@]}"; do cat /proc/"$p"/task/*/status 2>/dev/null; done |
    awk '/ctxt_switches/ {s += $2} END {print s + 0}'
}

# measure MODEL NAME PORT PID: one request to the server PID on PORT, then its count (and trace).
measure() {
  local model=$1 name=$2 port=$3 pid=$4 a b fd fds=()
  if ((${KEEPALIVE:-0} > 0)); then
    for ((i = 0; i < KEEPALIVE; i++)); do
      exec {fd}<>"/dev/tcp/127.0.0.1/$port"
      printf 'GET / HTTP/1.1\r\nHost: x\r\n\r\n' >&"$fd"
      timeout 0.3 cat <&"$fd" >/dev/null # the response; the connection stays open
      fds+=("$fd")
    done
  else
    exec 3<>"/dev/tcp/127.0.0.1/$port"
    printf 'GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' >&3
    cat <&3 >/dev/null
    exec 3<&-
  fi
  sleep 1.5
  a=$(switches "$pid")
  sleep "$secs"
  b=$(switches "$pid")
  printf '%-10s %-40s %s\n' "$model" "$name" "$(awk -v d=$((b - a)) -v s="$secs" 'BEGIN {printf "%.1f", d / s}')"
  # Traced after the count: tracing stops the threads and adds switches of its own.
  if [[ ${STRACE:-} == 1 ]] && command -v strace >/dev/null; then
    timeout "$secs" strace -f -c -p "$pid" -o "$work/strace" >/dev/null 2>&1
    sed 's/^/    /' "$work/strace"
  fi
  for fd in "${fds[@]}"; do exec {fd}<&-; done
}

printf '%-10s %-40s %s\n' model build "wake-ups/s"
port=18600
for model in ${MODELS:-fiber thread process pipeline}; do
  for bin in "$@"; do
    port=$((port + 1))
    "$bin" serve "${root_flag[@]}" --root www --threads 2 --listen "127.0.0.1:$port=$model" \
      >"$work/log" 2>&1 &
    pid=$!
    wait_listening "$bin" "$port" "$work/log"
    measure "$model" "$bin" "$port" "$pid"
    kill -TERM "$pid"; wait "$pid" 2>/dev/null
  done
done
# The peer: nginx with two workers (scripts/peers/peer-nginx.conf), where installed.
if command -v nginx >/dev/null; then
  port=$((port + 1)); nginx_user=""
  if ((EUID == 0)); then nginx_user="user root;"; fi
  sed -e "s|PORT|$port|; s|WWW_ROOT|$PWD/www|; s|^worker_processes 1;|$nginx_user worker_processes 2;|" \
    scripts/peers/peer-nginx.conf >"$work/nginx.conf"
  nginx -p "$work" -c "$work/nginx.conf" >"$work/log" 2>&1 &
  pid=$!
  wait_listening nginx "$port" "$work/log"
  measure nginx nginx "$port" "$pid"
  kill -TERM "$pid"; wait "$pid" 2>/dev/null
else
  echo "nginx not installed: no peer row"
fi
