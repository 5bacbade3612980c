#!/usr/bin/env bash
# One bench/many_locks workload side by side: glibc and each shim given
# (e.g. an older build as the first), every configuration once per round,
# rounds interleaved; medians [min - max] of ns per operation and the ratio
# to the first shim given. With --chrt=PRIO every run is also made under
# `chrt -f PRIO` (SCHED_FIFO, its threads inheriting it: the real-time
# queue order's path, docs/design.md section 3.15), in the same rounds.
#
#   bench/many_locks_cost.sh [--rounds=N] [--chrt=PRIO] MANY_LOCKS \
#       NAME=SHIM... -- WORKLOAD...
#   bazel build //bench:many_locks //preload:libparklot_preload.so &&
#   bench/many_locks_cost.sh --chrt=10 bazel-bin/bench/many_locks \
#       before=OLD_SHIM after=bazel-bin/preload/libparklot_preload.so \
#       -- contended 8 50000
set -euo pipefail
rounds=11
chrt_prio=""
while :; do
  case "${1:-}" in
    --rounds=*) rounds=${1#--rounds=}; shift ;;
    --chrt=*) chrt_prio=${1#--chrt=}; shift ;;
    *) break ;;
  esac
done
prog=$1
shift
configs=(glibc)
while [ $# -gt 0 ] && [ "$1" != -- ]; do configs+=("$1"); shift; done
[ "${1:-}" = -- ] || { echo "usage: many_locks_cost.sh [options] MANY_LOCKS NAME=SHIM... -- WORKLOAD..." >&2; exit 2; }
shift
scheds=(other)
[ -z "$chrt_prio" ] || scheds+=(fifo)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((r = 0; r < rounds; r++)); do
  for s in "${scheds[@]}"; do
    run=()
    [ "$s" = other ] || run=(chrt -f "$chrt_prio")
    for c in "${configs[@]}"; do
      name=${c%%=*}
      pre=""
      [ "$name" = glibc ] || pre=$(readlink -f "${c#*=}")
      "${run[@]}" env LD_PRELOAD="$pre" timeout 120 "$prog" "$@" |
        awk '{print $2}' >>"$out/$s.$name"
    done
  done
done
python3 - "$out" "${configs[@]%%=*}" <<'PY'
import os, statistics, sys
d, names = sys.argv[1], sys.argv[2:]
ref = names[1] if len(names) > 1 else names[0]
for sched in ("other", "fifo"):
    if not os.path.exists(os.path.join(d, f"{sched}.{ref}")):
        continue
    print(f"{'SCHED_OTHER' if sched == 'other' else 'SCHED_FIFO'}: ns per op, median [min - max], ratio to {ref}")
    base = statistics.median(float(x) for x in open(os.path.join(d, f"{sched}.{ref}")))
    for n in names:
        v = [float(x) for x in open(os.path.join(d, f"{sched}.{n}"))]
        m = statistics.median(v)
        print(f"  {n:10} {m:9.1f} [{min(v):.1f} - {max(v):.1f}]  {m / base:.3f}x")
PY
