#!/usr/bin/env bash
# Runs engine_pipeline binaries one after the other in rounds and prints each one's CPU
# per governed run (user + system time over the concurrent runs) and its median: how two
# builds are compared on one machine (bench/RESULTS.md, "CPU per run against before
# issue 15"). Each binary must stop after its concurrent runs when
# DOCKET_BENCH_ONLY_CONCURRENT=1 (an older build needs the few lines RESULTS.md names).
#
#   bench/engine/alternate.sh ROUNDS BIN...      (DOCKET_BENCH_CONCURRENT=1000 by default)
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 ROUNDS BIN..." >&2
  exit 2
fi
rounds=$1
shift
declare -A all
for round in $(seq "$rounds"); do
  for bin in "$@"; do
    out=$(DOCKET_BENCH_ONLY_CONCURRENT=1 DOCKET_BENCH_CONCURRENT=${DOCKET_BENCH_CONCURRENT:-1000} "$bin" --bench 2>&1)
    cpu=$(grep -oP '[0-9]+(?= µs per run$)' <<<"$out" | head -1)
    split=$(grep -oP 'of which \K.*' <<<"$out" || true)
    echo "round $round $(basename "$bin"): $cpu µs per run ($split)"
    all[$bin]="${all[$bin]:-} $cpu"
  done
done
for bin in "$@"; do
  median=$(tr ' ' '\n' <<<"${all[$bin]}" | grep . | sort -n |
    awk '{a[NR]=$1} END {print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2)}')
  echo "median $(basename "$bin"): $median µs per run [${all[$bin]} ]"
done
