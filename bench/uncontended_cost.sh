#!/usr/bin/env bash
# Uncontended lock+unlock side by side: glibc and each shim given (e.g. an
# older build as a second one), every configuration once per repetition,
# repetitions interleaved; medians [min - max] of CPU ns per pair, and the
# ratio to the first shim given.
#
#   bench/uncontended_cost.sh [--reps=N] UNCONTENDED_OPS NAME=SHIM...
#   bazel build //bench:uncontended_ops //preload:libparklot_preload.so &&
#   bench/uncontended_cost.sh bazel-bin/bench/uncontended_ops \
#       parklot=bazel-bin/preload/libparklot_preload.so
set -euo pipefail
# shellcheck source=bench/shim_configs.sh
source "$(dirname "${BASH_SOURCE[0]}")/shim_configs.sh"
reps=7
while :; do
  case "${1:-}" in
    --reps=*) reps=${1#--reps=}; shift ;;
    *) break ;;
  esac
done
shim_configs "$@"
for ((r = 0; r < reps; r++)); do
  mapfile -t order < <(configs_from "$r")
  for c in "${order[@]}"; do
    run_config "$c" "${c%%=*}"
  done
done
python3 - "$out" "${configs[@]%%=*}" <<'PY'
import collections, os, statistics, sys
d, names = sys.argv[1], sys.argv[2:]
cells = {n: collections.defaultdict(list) for n in names}
for n in names:
    for line in open(os.path.join(d, n)):
        op, ns = line.split()
        cells[n][op].append(float(ns))
ref = names[1] if len(names) > 1 else names[0]
for op in cells[names[0]]:
    print(f"{op}: CPU ns per lock+unlock, median [min - max], ratio to {ref}")
    base = statistics.median(cells[ref][op])
    for n in names:
        v = cells[n][op]
        m = statistics.median(v)
        print(f"  {n:10s} {m:7.2f} [{min(v):.2f} - {max(v):.2f}]  {m / base:.3f}x")
PY
