#!/usr/bin/env bash
# Packs what a benchmark needs onto a bare machine with no network (the lent 16-core machine):
# weft and weft-bench (stripped release builds, run as they are: glibc is the machine's), and
# peer programs from this machine's PATH with every shared library `ldd` names and the dynamic
# loader, each started through a wrapper that runs it under the carried loader and libraries.
#
#   scripts/multicore/carry_bundle.sh DIR [PROGRAM...]      (default: haproxy ip sysctl taskset wrk nginx)
#
# Then, on the other machine: PATH="$PWD/DIR/bin:$PATH" scripts/... (weft and weft-bench are
# DIR/bin/weft and DIR/bin/weft-bench; `weft-bench experiment cluster` finds weft next to
# itself). A program that is missing here is named and left out.
set -eu
out=$(realpath -m -- "${1:?usage: scripts/multicore/carry_bundle.sh DIR [PROGRAM...]}")
shift
cd "$(dirname "$0")/../.."
case $out in
  / | "$PWD" | "$PWD/target" | "$PWD/target/"*) echo "carry_bundle: $out would remove what it packs; name a folder of its own" >&2; exit 2 ;;
esac
progs=("$@")
((${#progs[@]})) || progs=(haproxy ip sysctl taskset wrk nginx)
for b in weft weft-bench; do
  [[ -x target/release/$b ]] || { echo "carry_bundle: target/release/$b is not built (cargo build --release -p weft -p weft-bench)" >&2; exit 2; }
done
rm -rf "$out"
mkdir -p "$out/bin" "$out/real" "$out/lib"
for b in weft weft-bench; do
  strip -o "$out/bin/$b" "target/release/$b"
done
loader=""
for p in "${progs[@]}"; do
  path=$(command -v "$p" || true)
  [[ -z $path ]] && for d in /usr/sbin /sbin; do [[ -x $d/$p ]] && path=$d/$p; done
  if [[ -z $path ]]; then echo "carry_bundle: $p is not installed here; left out" >&2; continue; fi
  if ldd "$path" | grep -q 'not found'; then
    echo "carry_bundle: $p needs a library this machine lacks:" >&2
    ldd "$path" | grep 'not found' >&2
    exit 2
  fi
  cp -L "$path" "$out/real/$p"
  while read -r lib; do
    [[ -n $lib ]] || continue
    [[ -e $out/lib/$(basename "$lib") ]] || cp -L "$lib" "$out/lib/"
    [[ $lib == */ld-linux* ]] && loader=$(basename "$lib")
  done < <(ldd "$path" | awk '/=>/ && $3 ~ /^\// {print $3} !/=>/ && $1 ~ /^\// {print $1}')
  cat >"$out/bin/$p" <<EOF
#!/bin/sh
d=\$(dirname "\$(readlink -f "\$0")")/..
exec "\$d/lib/${loader:-ld-linux-x86-64.so.2}" --library-path "\$d/lib" "\$d/real/$p" "\$@"
EOF
  chmod +x "$out/bin/$p"
done
du -sh "$out" >&2
