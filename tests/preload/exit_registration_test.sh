#!/usr/bin/env bash
# Each thread is registered with the lot exactly once, even when code that
# runs after parklot's exit hook (liburcu-bp's own, under the shim) locks
# mutexes: runs exited_owner_prog with PARKLOT_STATS=1 and compares the
# report's "N registered" with the threads the program says it ran.
set -uo pipefail
root="${TEST_SRCDIR:+$TEST_SRCDIR/${TEST_WORKSPACE:-parklot}}"
root="${root:-$PWD}"
# shellcheck source=tests/preload/shim_preload.sh
source "$root/tests/preload/shim_preload.sh" || exit 1
shim_preload "$root/preload/libparklot_preload.so" || exit 1
out="$(timeout 60 env PARKLOT_STATS=1 \
  LD_PRELOAD="$PRELOAD" \
  "$root/tests/preload/exited_owner_prog" 2>&1)"
rc=$?
echo "$out"
[ "$rc" -eq 0 ] || { echo "FAIL: exit status $rc"; exit 1; }
ran="$(sed -n 's/^exited_owner: \([0-9]*\) threads used the lot$/\1/p' <<<"$out")"
registered="$(sed -n 's/^threads: .* \([0-9]*\) registered$/\1/p' <<<"$out")"
if [ -z "$ran" ] || [ "$ran" != "$registered" ]; then
  echo "FAIL: the program ran ${ran:-?} threads, the report registered ${registered:-?}"
  exit 1
fi
echo "ok: $ran threads, $registered registered"
