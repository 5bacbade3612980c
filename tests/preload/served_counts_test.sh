#!/usr/bin/env bash
# PARKLOT_STATS in practice (preload/diag/lock_stats.cc):
#   - the report's "served by parklot" line counts every primitive the shim
#     serves: served_counts_prog makes an exact number of each, and the line
#     must say so;
#   - a process the shim served nothing in (and, with PARKLOT_SYSCALL_FUTEX=1,
#     took no futex call in) prints no report: /bin/true (to a file, as it
#     closes its stderr), a shell pipeline (with the futex path on), and
#     served_counts_prog's two fork children that serve nothing, one leaving
#     by _exit(), one by exit() (to files named by pid: one file, the
#     parent's);
#   - the most contended locks are the program's: report_prog (one contended
#     mutex, whose address it prints) under PARKLOT_STATS=1 with
#     PARKLOT_DEADLOCK=report and PARKLOT_SYSCALL_FUTEX=1, so that the
#     detector's and the served futex path's own locks run too, lists that
#     mutex and no other lock.
#
#   served_counts_test.sh SHIM PROG REPORT_PROG
set -uo pipefail
root=$PWD
source "$root/tests/preload/shim_preload.sh"
shim_test_begin "$1" "$2" served_counts
report_prog="$3"
[ -x "$report_prog" ] || report_prog="$root/$report_prog"
want="served by parklot: 3 mutex acquisitions, 0 cond waits, 1 signals, 2 broadcasts, 5 rwlock acquisitions, 7 sem waits, 7 sem posts, 4 barrier waits, 2 once calls"

PARKLOT_STATS=1 LD_PRELOAD="$PRELOAD" timeout 60 "$prog" 2>"$work/err"
rc=$?
[ "$rc" -eq 0 ] || fail "exit $rc: $(head -c 300 "$work/err")"
line=$(grep '^served by parklot:' "$work/err")
if [ "$line" = "$want" ]; then
  echo "ok: the served line counts each primitive"
else
  fail "got  '$line'
want '$want'"
fi

# Processes that serve nothing.
mkdir "$work/true"
PARKLOT_STATS="$work/true/s.%p" LD_PRELOAD="$PRELOAD" timeout 60 /bin/true ||
  fail "/bin/true: exit $?"
n=$(find "$work/true" -type f | wc -l)
if [ "$n" -eq 0 ]; then echo "ok: /bin/true writes no report"; else
  fail "/bin/true: $n report files"; cat "$work/true"/*; fi

PARKLOT_STATS=1 PARKLOT_SYSCALL_FUTEX=1 LD_PRELOAD="$PRELOAD" timeout 60 sh -c 'echo x | cat | wc -l' \
  >"$work/pipe.out" 2>"$work/pipe.err" || fail "the pipeline: exit $?"
[ "$(cat "$work/pipe.out")" = 1 ] || fail "the pipeline printed '$(cat "$work/pipe.out")'"
if grep -q 'parklot statistics' "$work/pipe.err"; then
  fail "a shell pipeline printed $(grep -c 'parklot statistics' "$work/pipe.err") reports"
  head -3 "$work/pipe.err"
else
  echo "ok: a shell pipeline prints no report"
fi

mkdir "$work/fork"
PARKLOT_STATS="$work/fork/s.%p" LD_PRELOAD="$PRELOAD" timeout 60 "$prog" fork \
  2>"$work/fork.err" || fail "served_counts_prog fork: exit $?"
files=$(find "$work/fork" -type f)
n=$(echo "$files" | grep -c .)
if [ "$n" -eq 1 ] && [ "$(grep '^served by parklot:' "$files")" = "$want" ]; then
  echo "ok: the fork children that served nothing write no report; the parent's counts"
else
  fail "served_counts_prog fork: $n report files, want 1 (the parent's)"
  for f in $files; do echo "$f:"; grep '^served by' "$f"; done
fi

# The most contended locks are the program's own.
PARKLOT_STATS=1 PARKLOT_DEADLOCK=report PARKLOT_SYSCALL_FUTEX=1 \
  LD_PRELOAD="$PRELOAD" timeout 60 "$report_prog" >"$work/hot.out" 2>"$work/hot.err" ||
  fail "report_prog: exit $?"
mu=$(sed -n 's/^report_prog done, mutex at \(0x[0-9a-f]*\)$/\1/p' "$work/hot.out")
# The rows of every report's lock table (the parent's and the exit()
# child's): the first column of the lines after "most contended locks:"
# (its column header and notes left out). The program's mutex is static,
# g_mu: the table names it by its symbol.
locks=$(awk '/^most contended locks:$/ {t = 1; next} t && /^  [^ (]/ && $1 != "lock" {print $1; next} {t = t && /^  /}' \
  "$work/hot.err" | sort -u)
if [ -n "$mu" ] && [ "$locks" = g_mu ]; then
  echo "ok: the only contended lock listed is the program's mutex g_mu ($mu)"
else
  fail "contended locks listed: '$(echo $locks)', want only the program's mutex g_mu ('$mu')"
  cat "$work/hot.err"
fi
[ "$status" -eq 0 ] && echo PASS
exit "$status"
