#!/usr/bin/env bash
# startup_cost, one small round: all four tables (CPU and page faults, of
# start-up and of the thread burst) have a plain and a parklot row, and the
# page faults are counted (not 0); with perf installed, the same with the
# start-up CPU figure from perf stat.
set -uo pipefail
rows() {  # a plain and a parklot row in all four tables; faults counted
  [ "$(grep -c '^  plain ' <<<"$1")" -eq 4 ] && [ "$(grep -c '^  parklot ' <<<"$1")" -eq 4 ] &&
    [ "$(grep -c '(page faults per run' <<<"$1")" -eq 2 ] &&
    ! grep -A1 '(page faults per run' <<<"$1" | grep -q '^  plain  *0\.000 '
}
out=$("$1" --rounds=1 --spawns=3 --threads=16 /bin/true parklot="$PWD/$2") || {
  echo "FAIL: startup_cost exited $?"; echo "$out"; exit 1; }
echo "$out"
rows "$out" || { echo "FAIL: missing rows"; exit 1; }
if command -v perf >/dev/null && perf stat -x, -e task-clock true 2>/dev/null; then
  out=$("$1" --rounds=1 --perf=3 --threads=16 /bin/true parklot="$PWD/$2") || {
    echo "FAIL: startup_cost --perf exited $?"; echo "$out"; exit 1; }
  echo "$out"
  rows "$out" && grep -q 'perf stat -r 3 task-clock' <<<"$out" ||
    { echo "FAIL: missing rows with --perf"; exit 1; }
else
  echo "(perf cannot count here: --perf not tried)"
fi
echo PASS
