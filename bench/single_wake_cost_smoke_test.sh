#!/usr/bin/env bash
# bench/single_wake_cost.sh in one small round (8 threads, pinned): a row
# with figures for the kernel, the word-per-thread kernel and the shim
# under every figure.
set -euo pipefail
script=$1 prog=$2 shim=$3
out=$("$script" --reps=1 --threads=8 --rounds=1 --pin "$prog" parklot="$shim")
echo "$out"
for figure in wall_ns call_median_ns waker_cpu_ns waiter_cpu_ns process_cpu_ns \
  to_join_cpu_ns waker_ivcsw empty_wakes; do
  for config in kernel kernel-own parklot; do
    rows=$(awk -v f="$figure" -v c="$config" '
      $1 == f { in_f = 1; next }
      /^  [a-z_]+$/ { in_f = 0 }
      in_f && $1 == c && $2 ~ /^[0-9.]+$/ { n++ }
      END { print n + 0 }' <<<"$out")
    [ "$rows" = 1 ] || { echo "FAIL: no $config row under $figure" >&2; exit 1; }
  done
done
echo PASS
