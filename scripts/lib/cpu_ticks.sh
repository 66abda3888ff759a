# Sourced by the benchmark scripts.
# utime and stime of a process and its children (nginx's worker is a child of its master),
# as "user sys" ticks; the command name may contain spaces, so fields are counted after the
# last ')'.
cpu_ticks() {
  local u=0 s=0 p a b
  for p in $1 $(pgrep -P "$1" || true); do
    read -r a b < <(awk '{ s = $0; sub(/^.*\) /, "", s); split(s, f, " "); print f[12], f[13] }' "/proc/$p/stat")
    u=$((u + a)); s=$((s + b))
  done
  echo "$u $s"
}
