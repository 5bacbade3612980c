#!/usr/bin/env bash
# Single wakes side by side: the kernel's FUTEX_WAKE on one shared word,
# the same with every thread on a word of its own (the lot's way of
# sleeping, without the lot: single_wake's "own"), and each shim given
# serving the shared-word program (PARKLOT_SYSCALL_FUTEX=1), every
# configuration once per repetition, repetitions interleaved; medians
# [min - max] over all rounds of the per-wake figures single_wake prints,
# and the ratio to the kernel's shared word.
#
#   bench/single_wake_cost.sh [--reps=N] [--threads=N] [--rounds=N] [--pin] \
#       [--stay] SINGLE_WAKE NAME=SHIM...
# (--pin: workers bound round-robin to the CPUs, as perf binds them;
# --stay: woken threads block until the round ends instead of exiting)
#   bazel build //bench:single_wake //preload:libparklot_preload.so &&
#   bench/single_wake_cost.sh bazel-bin/bench/single_wake \
#       parklot=bazel-bin/preload/libparklot_preload.so
set -euo pipefail
reps=7
threads=512
rounds=3
pin=""
stay=""
while :; do
  case "${1:-}" in
    --reps=*) reps=${1#--reps=}; shift ;;
    --threads=*) threads=${1#--threads=}; shift ;;
    --rounds=*) rounds=${1#--rounds=}; shift ;;
    --pin) pin=pin; shift ;;
    --stay) stay=stay; shift ;;
    *) break ;;
  esac
done
prog=$1
shift
configs=(kernel kernel-own "$@")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((r = 0; r < reps; r++)); do
  for c in "${configs[@]}"; do
    name=${c%%=*}
    if [ "$name" = kernel ]; then
      timeout 120 "$prog" "$threads" "$rounds" $pin $stay >>"$out/$name"
    elif [ "$name" = kernel-own ]; then
      timeout 120 "$prog" "$threads" "$rounds" $pin $stay own >>"$out/$name"
    else
      LD_PRELOAD=$(readlink -f "${c#*=}") PARKLOT_SYSCALL_FUTEX=1 \
        timeout 120 "$prog" "$threads" "$rounds" $pin $stay >>"$out/$name"
    fi
  done
done
python3 - "$out" "$threads" "${pin:-unpinned}${stay:+, staying}" "${configs[@]%%=*}" <<'PY'
import os, statistics, sys
d, threads, pin, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
rows = {}
for n in names:
    rows[n] = []
    for line in open(os.path.join(d, n)):
        f = line.split()
        rows[n].append({f[i]: float(f[i + 1]) for i in range(0, len(f), 2)})
print(f"single wakes, {threads} threads ({pin}), one per FUTEX_WAKE: per wake, "
      f"median [min - max] of {len(rows[names[0]])} rounds, x kernel")
for key, unit in (("wall_ns", "ns"), ("call_median_ns", "ns"), ("waker_cpu_ns", "ns"),
                  ("waiter_cpu_ns", "ns"),
                  ("process_cpu_ns", "ns"), ("to_join_cpu_ns", "ns"),
                  ("waker_ivcsw", ""), ("empty_wakes", "")):
    print(f"  {key}")
    base = None
    for n in names:
        v = [r[key] for r in rows[n]]
        m = statistics.median(v)
        if base is None: base = m
        ratio = f"{m / base:.2f}x" if base else "-"
        d = 0 if unit == "ns" else 3
        print(f"    {n:10s} {m:10.{d}f} [{min(v):.{d}f} - {max(v):.{d}f}]  {ratio}")
PY
