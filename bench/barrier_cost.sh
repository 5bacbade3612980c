#!/usr/bin/env bash
# Barrier rounds side by side: glibc and each shim given (e.g. an older
# build as a second one), every configuration once per repetition,
# repetitions interleaved; medians [min - max] of wall and CPU ns per
# round, and the ratio to glibc, and context switches per round (median).
#
#   bench/barrier_cost.sh [--reps=N] [--pin] BARRIER_ROUNDS NAME=SHIM...
# (--pin: every thread on one CPU, round-robin)
#   bazel build //bench:barrier_rounds //preload:libparklot_preload.so &&
#   bench/barrier_cost.sh bazel-bin/bench/barrier_rounds \
#       parklot=bazel-bin/preload/libparklot_preload.so
set -euo pipefail
# shellcheck source=bench/shim_configs.sh
source "$(dirname "${BASH_SOURCE[0]}")/shim_configs.sh"
reps=5
pin=""
while :; do
  case "${1:-}" in
    --reps=*) reps=${1#--reps=}; shift ;;
    --pin) pin=pin; shift ;;
    *) break ;;
  esac
done
shim_configs "$@"
for ((r = 0; r < reps; r++)); do
  for shape in "8 2000" "64 250" "1024 20"; do
    mapfile -t order < <(configs_from "$r")
    for c in "${order[@]}"; do
      set -- $shape
      run_config "$c" "${c%%=*}.$1" "$1" "$2" $pin
    done
  done
done
label=unpinned; [ -n "$pin" ] && label=pinned
python3 - "$out" "$label" "${configs[@]%%=*}" <<'PY'
import os, statistics, sys
d, pin, names = sys.argv[1], sys.argv[2], sys.argv[3:]
for t in (8, 64, 1024):
    print(f"barrier, {t} threads, {pin}: ns per round, median [min - max]")
    base = None
    for n in names:
        rows = [l.split() for l in open(os.path.join(d, f"{n}.{t}"))]
        wall = [float(r[1]) for r in rows]
        cpu = [float(r[3]) for r in rows]
        csw = [float(r[5]) for r in rows]
        m, mc = statistics.median(wall), statistics.median(cpu)
        if base is None: base = (m, mc)
        print(f"  {n:10s} wall {m:10.0f} [{min(wall):.0f} - {max(wall):.0f}]  {m / base[0]:.2f}x"
              f"   cpu {mc:10.0f} [{min(cpu):.0f} - {max(cpu):.0f}]  {mc / base[1]:.2f}x"
              f"   csw {statistics.median(csw):.2f}")
PY
