#!/usr/bin/env bash
# Builds lwan (https://github.com/lpereira/lwan), the peer of issues 57 and 59, Release, from
# source at a pinned commit, into target/peers/lwan (the binary) for the scripts that compare
# with it (scripts/peers/busy_sweep.sh: LWAN=target/peers/lwan).
#
#   scripts/peers/build_lwan.sh          LWAN_GIT=URL-or-path LWAN_REV=f0423921
#
# Needs git, cmake, a C compiler, zlib and pkg-config (`apt-get install cmake zlib1g-dev
# pkg-config`: installed here when missing and run as root). Built without TLS
# (-DENABLE_TLS=OFF: the comparisons are plain HTTP). lwan's sandbox (`straitjacket`) is left
# out of scripts/peers/peer-lwan.conf: the comparison is of serving, and the other servers run
# without one. One patch: lwan's file serving adds a Landlock rule for its root directory and
# refuses to start when the kernel will not take it ("Could not add Landlock rule", as on this
# VM); patched to log that and serve on (the rule only matters once `straitjacket` enforces
# the ruleset, which this configuration never does).
set -euo pipefail
cd "$(dirname "$0")/../.."
rev=${LWAN_REV:-f0423921}
src=${LWAN_GIT:-https://github.com/lpereira/lwan}
need=()
for tool in git cmake cc pkg-config; do command -v "$tool" >/dev/null || need+=("$tool"); done
if ((${#need[@]})); then
  if command -v apt-get >/dev/null && ((EUID == 0)); then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq git cmake gcc zlib1g-dev pkg-config >/dev/null
  else
    echo "build_lwan: missing ${need[*]} (apt-get install cmake zlib1g-dev pkg-config)" >&2
    exit 2
  fi
fi
work=target/peers/lwan-src
rm -rf "$work"
mkdir -p target/peers
git clone -q "$src" "$work"
git -C "$work" checkout -q "$rev"
files="$work/src/lib/lwan-mod-serve-files.c"
perl -0pi -e 's/(lwan_log_error\("Could not add Landlock rule"\);\n\s*)goto out_landlock;/${1}\/\* served without the rule (build_lwan.sh) \*\//' "$files"
grep -q 'served without the rule' "$files" ||
  { echo "build_lwan: the Landlock patch did not apply to $rev" >&2; exit 1; }
cmake -S "$work" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DENABLE_TLS=OFF >/dev/null
cmake --build "$work/build" --target lwan -j "$(nproc)" >/dev/null
cp "$work/build/src/bin/lwan/lwan" target/peers/lwan
echo "target/peers/lwan (lwan $(git -C "$work" log -1 --format=%h))"
