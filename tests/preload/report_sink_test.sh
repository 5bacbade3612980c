#!/usr/bin/env bash
# Where PARKLOT_STATS sends the statistics (preload/diag/report.h), end to end
# with report_prog (a contended mutex in contend(), a fork child leaving by
# _exit(), one by exit()):
#   PARKLOT_STATS=1         stderr: the parent's and the exit() child's
#                           reports; the _exit() child prints nothing
#   PARKLOT_STATS=DIR/s.%p  nothing on stderr; one file per process, the
#                           _exit() child's included
#   PARKLOT_STATS=DIR/s     nothing on stderr; one file, no _exit() child
# and the first contended caller reads "report_prog.c:LINE contend
# (MODULE+0xADDR)" (the program has line information; "contend+0xOFF
# (MODULE+0xADDR)" without), where `addr2line -f -e MODULE ADDR` names
# contend too, on the line of the mutex, named by its symbol g_mu (static
# storage; report_prog prints its address).
#
#   report_sink_test.sh REPORT_PROG
set -uo pipefail

root="${TEST_SRCDIR:+$TEST_SRCDIR/${TEST_WORKSPACE:-parklot}}"
root="${root:-$PWD}"
shim="$root/preload/libparklot_preload.so"
# shellcheck source=tests/preload/shim_preload.sh
source "$root/tests/preload/shim_preload.sh" || exit 1
shim_test_begin "$shim" "$1" report_sink

run() {  # PARKLOT_STATS value; output in $work/out, $work/err
  timeout -k 5 60 env PARKLOT_STATS="$1" LD_PRELOAD="$PRELOAD" "$prog" \
    >"$work/out" 2>"$work/err" || fail "PARKLOT_STATS=$1: exit status $?"
  grep -q 'report_prog done' "$work/out" || fail "PARKLOT_STATS=$1: no output"
  if grep -q 'parklot statistics' "$work/out"; then fail "PARKLOT_STATS=$1: a report on stdout"; fi
}
reports() { grep -c '^parklot statistics (pid' "$@" | awk -F: '{ n += $NF } END { print n + 0 }'; }

run 1
n=$(reports "$work/err")
[ "$n" -eq 2 ] || { fail "PARKLOT_STATS=1: $n reports on stderr, want 2 (parent, exit() child)"; cat "$work/err"; }
[ "$n" -eq 2 ] && echo "ok: PARKLOT_STATS=1: the parent and the exit() child report on stderr"

mkdir "$work/p"
run "$work/p/s.%p"
[ -s "$work/err" ] && { fail "PARKLOT_STATS=DIR/s.%p: stderr not empty"; cat "$work/err"; }
files=$(find "$work/p" -name 's.*' | wc -l)
n=$(reports "$work"/p/s.*)
if [ "$files" -eq 3 ] && [ "$n" -eq 3 ]; then
  echo "ok: PARKLOT_STATS=DIR/s.%p: three files, one report each, nothing on stderr"
else
  fail "PARKLOT_STATS=DIR/s.%p: $files files with $n reports, want 3 and 3"
fi
for f in "$work"/p/s.*; do
  pid=${f##*.}
  grep -q "^parklot statistics (pid $pid)" "$f" || fail "$f is not pid $pid's report"
done

mkdir "$work/one"
run "$work/one/s"
[ -s "$work/err" ] && { fail "PARKLOT_STATS=DIR/s: stderr not empty"; cat "$work/err"; }
n=$(reports "$work/one/s")
[ "$n" -eq 2 ] || fail "PARKLOT_STATS=DIR/s: $n reports, want 2 (parent, exit() child)"
[ "$n" -eq 2 ] && echo "ok: PARKLOT_STATS=DIR/s: the two reports in the file, nothing on stderr"

# The first caller of the contended mutex, in the parent's report.
line=$(grep -h -m1 -E 'contend\+0x|report_prog\.c:[0-9]+ contend \(' "$work/one/s")
if [ -z "$line" ]; then
  fail "no call site reads report_prog.c:LINE contend or contend+0x..."; cat "$work/one/s"
else
  echo "ok: symbolized: $line"
  mu=$(sed -n 's/^report_prog done, mutex at \(0x[0-9a-f]*\)$/\1/p' "$work/out")
  read -r col _ <<<"$line"
  [ -n "$mu" ] && [ "$col" = g_mu ] || fail "the lock column reads '$col', want g_mu, the symbol at $mu"
  [ -n "$mu" ] && [ "$col" = g_mu ] && echo "ok: the lock column names the mutex at $mu: g_mu"
  site=$(sed -n 's/.* (\([^ ]*\)+\(0x[0-9a-f]*\))$/\1 \2/p' <<<"$line")
  read -r module addr <<<"$site"
  fn=$(addr2line -f -e "$module" "$addr" | head -1)
  [ "$fn" = contend ] || fail "addr2line -f -e $module $addr says '$fn', want contend"
  [ "$fn" = contend ] && echo "ok: addr2line -f -e MODULE $addr: contend"
fi
exit "$status"
