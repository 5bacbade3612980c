#!/usr/bin/env bash
# PARKLOT_DEADLOCK on locks in recycled memory (docs/design.md §5.11):
# deadlock_churn_prog makes, locks in a consistent order and frees objects
# with std::mutex members (never a pthread_mutex_init or _destroy), pthread
# mutexes and rwlocks in malloc'd memory and on the stack, each new pair at
# the old pair's addresses swapped: no cycle report, while real inversions
# in the same program (of objects at those addresses, and of globals) are
# still reported, once each; a held lock's stale entry (the lock unlocked by
# another thread, then freed) leaves the reused memory alone.
#
#   deadlock_churn_test.sh DEADLOCK_CHURN_PROG
set -uo pipefail

root="${TEST_SRCDIR:+$TEST_SRCDIR/${TEST_WORKSPACE:-parklot}}"
root="${root:-$PWD}"
shim="${PARKLOT_TEST_SHIM:-$root/preload/libparklot_preload.so}"
# shellcheck source=tests/preload/shim_preload.sh
source "$root/tests/preload/shim_preload.sh" || exit 1
shim_test_begin "$shim" "$1" deadlock_churn

# run MODE: the program under PARKLOT_DEADLOCK=report, stderr in $work/err.
run() {
  timeout -k 5 60 env PARKLOT_DEADLOCK=report LD_PRELOAD="$PRELOAD" "$prog" "$1" \
    >"$work/out" 2>"$work/err" || fail "$1: exit status $?: $(head -c 300 "$work/err")"
  grep -qx done "$work/out" || fail "$1: did not finish"
}
cycles() { grep -c '^parklot: lock-order cycle' "$work/err"; }

run churn
[ "$(cycles)" -eq 0 ] || { fail "churn: $(cycles) cycle reports for locks in recycled memory"; head -20 "$work/err"; }
grep -q 'detection off' "$work/err" && fail "churn: detection was off: $(cat "$work/err")"

run invert
if [ "$(cycles)" -ne 2 ]; then
  fail "invert: $(cycles) cycle reports, want 2"; head -40 "$work/err"
else
  # The call sites may be std::mutex::lock's (not inlined): the edges'
  # stacks name the functions.
  for fn in heap_forward heap_backward invert_ab invert_ba; do
    grep -qE "^    #[0-9]+ .*${fn}\(" "$work/err" ||
      { fail "invert: the report does not name $fn"; cat "$work/err"; }
  done
fi

# A held lock's entry outlives the lock (unlocked by another thread, then
# freed): the detector never touches the memory it named.
run stale
grep -q 'lock-order cycle' "$work/err" && fail "stale: a cycle report: $(head -c 300 "$work/err")"

[ "$status" -eq 0 ] && echo PASS
exit "$status"
