#!/usr/bin/env bash
# What the installed launcher costs a start: `parklot run -- /bin/true` (and
# `run --stats`, where the launcher stays the parent) against a plain
# `LD_PRELOAD=libparklot_preload.so /bin/true`, each started N times in a
# loop, in interleaved rounds; prints the median time per start of each and
# the ratio to the plain preload (the --stats cases: compare them with the
# plain preload's PARKLOT_STATS=1 row). A figure, not a test.
#
#   bench/launcher_cost.sh [--runs N] [--rounds R] [TREE.tar ...]
#
# TREE.tar: install trees (//dist:tree) to measure, e.g. one of an older
# commit beside today's; default: today's, built with Bazel.
set -euo pipefail
runs=200 rounds=5 trees=()
while (($#)); do
  case "$1" in
    --runs) runs=$2; shift ;;
    --runs=*) runs=${1#*=} ;;
    --rounds) rounds=$2; shift ;;
    --rounds=*) rounds=${1#*=} ;;
    -*) echo "usage: bench/launcher_cost.sh [--runs N] [--rounds R] [TREE.tar ...]" >&2; exit 2 ;;
    *) trees+=("$1") ;;
  esac
  shift
done
if ((${#trees[@]} == 0)); then
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  (cd "$root" && bazel build --noshow_progress //dist:tree >/dev/null 2>&1) ||
    { echo "launcher_cost: bazel build //dist:tree failed" >&2; exit 1; }
  trees=("$(cd "$root" && bazel info bazel-bin 2>/dev/null)/dist/tree.tar")
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# ms per start of "$@", over $runs starts.
per_start() {
  local t0 t1 i
  t0=$(date +%s%N)
  for ((i = 0; i < runs; i++)); do "$@"; done
  t1=$(date +%s%N)
  awk -v ns=$((t1 - t0)) -v n="$runs" 'BEGIN { printf "%.3f", ns / n / 1e6 }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# Cases: a label, then the command.
labels=("/bin/true alone" "LD_PRELOAD=shim /bin/true" "PARKLOT_STATS=1 LD_PRELOAD=shim /bin/true")
declare -A cmds
cmds[0]="/bin/true"
k=0
for t in "${trees[@]}"; do
  d="$work/tree$k"
  mkdir -p "$d" && tar -xf "$t" -C "$d"
  if [ $k -eq 0 ]; then
    cmds[1]="env LD_PRELOAD=$d/lib/libparklot_preload.so /bin/true"
    # --stats loads the diagnostics object (Abseil, libstdc++) into the
    # program: this is what run --stats compares with.
    cmds[2]="env PARKLOT_STATS=1 LD_PRELOAD=$d/lib/libparklot_preload.so /bin/true"
  fi
  name=$( ((${#trees[@]} > 1)) && echo " [$t]" || true)
  labels+=("parklot run -- /bin/true$name" "parklot run --stats -- /bin/true$name")
  cmds[$((${#labels[@]} - 2))]="$d/bin/parklot run -- /bin/true"
  cmds[$((${#labels[@]} - 1))]="$d/bin/parklot run --stats -- /bin/true"
  k=$((k + 1))
done
# The plain preload through env(1), as the launcher's own #! line costs an
# env: the same number of execs on both sides but the launcher's.
for ((r = 0; r < rounds; r++)); do
  for ((c = 0; c < ${#labels[@]}; c++)); do
    # shellcheck disable=SC2086
    per_start ${cmds[$c]} 2>/dev/null >>"$work/case$c"
    echo >>"$work/case$c"
  done
done
echo "launcher start-up, $runs starts x $rounds rounds (median ms per start; $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg))"
base=$(median <"$work/case1")
for ((c = 0; c < ${#labels[@]}; c++)); do
  m=$(median <"$work/case$c")
  printf '%-60s %8.3f ms  %6.2fx the plain preload\n' "${labels[$c]}" "$m" "$(awk -v a="$m" -v b="$base" 'BEGIN { print a / b }')"
done
