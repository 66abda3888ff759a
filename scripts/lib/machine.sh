#!/usr/bin/env bash
# Sourced by the benchmark scripts (run alone, it prints the line). `machine` prints the CPU
# model, the cores this process may use and the kernel; `stamp` a `# DATE, MACHINE` line for a
# script's output: the line that says where a figure was measured (the same loads move by 2-4x
# and their ratios by up to 0.2 between two hosts of the same VM size: BENCHMARKS.md, "Kept
# linger timers").
machine() {
  local cpu
  cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
  echo "${cpu:-unknown CPU}, $(nproc) cores, Linux $(uname -r)"
}
stamp() {
  echo "# $(date -u +%FT%H:%MZ), $(machine)"
}
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then machine; fi
