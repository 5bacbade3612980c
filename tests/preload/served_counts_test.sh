#!/usr/bin/env bash
# The statistics report's "served by parklot" line counts every primitive
# the shim serves (preload/lock_stats.cc, Op): served_counts_prog makes an
# exact number of each, and the line must say so.
#
#   served_counts_test.sh SHIM PROG
set -uo pipefail
root=$PWD
source "$root/tests/preload/shim_preload.sh"
shim_test_begin "$1" "$2" served_counts
PARKLOT_STATS=1 LD_PRELOAD="$PRELOAD" timeout 60 "$prog" 2>"$work/err"
rc=$?
[ "$rc" -eq 0 ] || fail "exit $rc: $(head -c 300 "$work/err")"
line=$(grep '^served by parklot:' "$work/err")
want="served by parklot: 3 mutex acquisitions, 0 cond waits, 1 signals, 2 broadcasts, 5 rwlock acquisitions, 7 sem waits, 7 sem posts, 4 barrier waits, 2 once calls"
[ "$line" = "$want" ] || fail "got  '$line'
want '$want'"
[ "$status" -eq 0 ] && echo PASS
exit "$status"
