# Sourced by the soak scripts.
# rss_tree PID: resident KiB of a process and its children (the process model's connection
# processes). fds PID: descriptors the process itself holds.
rss_tree() {
  local total=0 p
  for p in $1 $(pgrep -P "$1" || true); do
    total=$((total + $(awk '/^VmRSS/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)))
  done
  echo "$total"
}
fds() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 | wc -l; }
