#!/usr/bin/env bash
# startup_cost, one small round: both tables have a plain and a parklot row.
set -uo pipefail
out=$("$1" --rounds=1 --spawns=3 --threads=16 /bin/true parklot="$PWD/$2") || {
  echo "FAIL: startup_cost exited $?"; echo "$out"; exit 1; }
echo "$out"
[ "$(grep -c '^  plain ' <<<"$out")" -eq 2 ] && [ "$(grep -c '^  parklot ' <<<"$out")" -eq 2 ] ||
  { echo "FAIL: missing rows"; exit 1; }
echo PASS
