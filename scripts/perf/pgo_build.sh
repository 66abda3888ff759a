#!/usr/bin/env bash
# A profile-guided (PGO) release build of weft, for a deployment that wants the last few
# percent: rustc builds weft with instrumentation, that build serves a training load on the
# sample site, and rustc builds weft again using the profile it wrote (hot paths inlined and
# laid out together, cold ones moved away). The plain `cargo build --release` is what the
# project tests and what BENCHMARKS.md measures unless a figure says PGO.
#
#   scripts/perf/pgo_build.sh [OUT]      OUT: where the binary goes (default target/pgo/weft)
#   DURATION=3: seconds per training load
#
# Training (each model on its own port, one worker, for DURATION seconds each): /echo and the
# 10,541 B page at 50 connections, and /echo with 16 requests per write (scripts/clients/pipeline.lua),
# on the fiber, thread and pipeline models. On 2026-11-27 (2-core VM) the result ran /echo
# with 2,487 instructions per request instead of 3,380 and over 194 code lines instead of 359
# (BENCHMARKS.md, "Where the user time goes"). Needs wrk and the toolchain's llvm-profdata
# (rustup component add llvm-tools). Builds in target/pgo-gen and target/pgo-use.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-target/pgo/weft}; dur=${DURATION:-3}
command -v wrk >/dev/null || { echo "pgo_build: wrk is missing (apt-get install wrk)" >&2; exit 2; }
host=$(rustc -vV | sed -n 's/^host: //p')
profdata="$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"
[[ -x $profdata ]] || {
  echo "pgo_build: $profdata is missing (rustup component add llvm-tools)" >&2
  exit 2
}
raw=$(mktemp -d)
trap 'kill "${pid:-}" 2>/dev/null; rm -rf "$raw"' EXIT
echo "pgo_build: 1/3 instrumented build (target/pgo-gen)" >&2
RUSTFLAGS="-Cprofile-generate=$raw" CARGO_TARGET_DIR=target/pgo-gen \
  cargo build --release -q -p weft
echo "pgo_build: 2/3 training load, ${dur}s per test" >&2
root_flag=(); if ((EUID == 0)); then root_flag=(--allow-root); fi
LLVM_PROFILE_FILE="$raw/weft-%p-%m.profraw" target/pgo-gen/release/weft serve "${root_flag[@]}" --root www \
  --threads 1 --listen 127.0.0.1:18911=fiber --listen 127.0.0.1:18912=thread \
  --listen 127.0.0.1:18913=pipeline >"$raw/serve.log" 2>&1 &
pid=$!
source scripts/lib/wait_listening.sh
for port in 18911 18912 18913; do
  wait_listening weft "$port" "$raw/serve.log"
  for path in /echo /haewelmann.html; do
    wrk -t1 -c50 -d"${dur}s" "http://127.0.0.1:$port$path" >/dev/null
  done
  wrk -t1 -c50 -d"${dur}s" -s scripts/clients/pipeline.lua "http://127.0.0.1:$port/echo" -- 16 >/dev/null
done
# A clean stop: the profile is written as the process exits.
kill -INT "$pid"
wait "$pid" || true
pid=
"$profdata" merge -o "$raw/weft.profdata" "$raw"/*.profraw
echo "pgo_build: 3/3 build with the profile (target/pgo-use)" >&2
# Functions the training never ran have no profile; that is expected, not worth a warning each.
RUSTFLAGS="-Cprofile-use=$raw/weft.profdata -Cllvm-args=-pgo-warn-missing-function=false" \
  CARGO_TARGET_DIR=target/pgo-use cargo build --release -q -p weft
mkdir -p "$(dirname "$out")"
cp target/pgo-use/release/weft "$out"
echo "pgo_build: $out" >&2
