#!/usr/bin/env bash
# The chaos torture (chaos_prog.c): against plain glibc first (its checks
# are glibc's results), then under the shim with PARKLOT_STATS=1 and any
# extra NAME=VALUE arguments (after the options); --no-fork-or-exhaustion
# is passed on to the program; with --growth-must-fail the parent's
# statistics report must count failed table growths (the bursts released
# while the address space was exhausted).
set -uo pipefail
root="${TEST_SRCDIR:+$TEST_SRCDIR/${TEST_WORKSPACE:-parklot}}"
root="${root:-$PWD}"
prog="$root/tests/preload/chaos_prog"
shim="$root/preload/libparklot_preload.so"
# shellcheck source=tests/preload/shim_preload.sh
source "$root/tests/preload/shim_preload.sh" || exit 1
shim_preload "$shim" || exit 1
must_fail=0
calm=()
if [ "${1:-}" = "--growth-must-fail" ]; then must_fail=1; shift; fi
if [ "${1:-}" = "--no-fork-or-exhaustion" ]; then calm=("$1"); shift; fi

echo "=== plain glibc"
timeout 120 env PARKLOT_TEST_GLIBC=1 "$prog" 3 "${calm[@]}" || { echo "FAIL: glibc run"; exit 1; }

echo "=== shim $*"
out="$(timeout 150 env PARKLOT_STATS=1 "$@" LD_PRELOAD="$PRELOAD" "$prog" 4 "${calm[@]}" 2>&1)"
rc=$?
# Forked children print reports of their own; the parent's comes last.
grep -v '^\(config\|table\|threads\|parks\|unparks\|spins\|handoffs\|served\|most\|  \)' <<<"$out" | tail -20
report="$(grep '^table:' <<<"$out" | tail -1)"
echo "parent's report: $report"
[ "$rc" -eq 0 ] || { echo "FAIL: exit status $rc"; exit 1; }
if [ "$must_fail" -eq 1 ]; then
  failures="$(sed -n 's/.*, \([0-9]*\) growth failures$/\1/p' <<<"$report")"
  [ "${failures:-0}" -gt 0 ] || { echo "FAIL: no table growth failed"; exit 1; }
fi
echo "ok"
