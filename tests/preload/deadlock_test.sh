#!/usr/bin/env bash
# PARKLOT_DEADLOCK (preload/diag/deadlock.h) end to end with deadlock_prog's
# scenarios: which lock-order reports each must produce (exactly one, naming
# the call sites of every edge) and which none; an actual deadlock reported
# (report mode: the program stays stuck until `timeout` ends it) and aborted
# (abort mode: SIGABRT); PARKLOT_REPORT=FILE takes the reports off stderr.
# Each scenario first runs with PARKLOT_DEADLOCK unset: no report then.
#
#   deadlock_test.sh DEADLOCK_PROG
set -uo pipefail

root="${TEST_SRCDIR:+$TEST_SRCDIR/${TEST_WORKSPACE:-parklot}}"
root="${root:-$PWD}"
shim="$root/preload/libparklot_preload.so"
# shellcheck source=tests/preload/shim_preload.sh
source "$root/tests/preload/shim_preload.sh" || exit 1
shim_test_begin "$shim" "$1" deadlock

# run LIMIT SCENARIO [NAME=VALUE...]: stderr in $work/err; returns the
# exit status.
run() {
  local limit=$1 scenario=$2
  shift 2
  timeout -k 5 "$limit" env "$@" LD_PRELOAD="$PRELOAD" "$prog" "$scenario" \
    >"$work/out" 2>"$work/err"
}
cycles() { grep -c '^parklot: lock-order cycle' "$work/err"; }

# expect SCENARIO N_LOCKS FUNCTION...: exactly one cycle report among
# N_LOCKS locks (0: no report) whose lines name every FUNCTION (FUNCTION+0x,
# or FILE:LINE FUNCTION where the program has line information).
expect() {
  local scenario=$1 locks=$2
  shift 2
  run 60 "$scenario" || fail "$scenario without PARKLOT_DEADLOCK: exit status $?"
  grep -q parklot: "$work/err" && { fail "$scenario: a report with detection off"; cat "$work/err"; }
  run 60 "$scenario" PARKLOT_DEADLOCK=report || { fail "$scenario: exit status $?"; cat "$work/err"; return; }
  local n
  n=$(cycles)
  if [ "$locks" -eq 0 ]; then
    if [ "$n" -eq 0 ] && ! grep -q parklot: "$work/err"; then
      echo "ok: $scenario: no report"
    else
      fail "$scenario: a report where none is due"; cat "$work/err"
    fi
    return
  fi
  if [ "$n" -ne 1 ]; then fail "$scenario: $n cycle reports, want 1"; cat "$work/err"; return; fi
  grep -q "^parklot: lock-order cycle (a potential deadlock) among $locks locks" "$work/err" ||
    { fail "$scenario: not a cycle of $locks locks"; cat "$work/err"; }
  local missing=0
  for fn in "$@"; do
    grep -qE "holds lock .* taken at ($fn\+0x|[^ ]+:[0-9]+ $fn \()" "$work/err" &&
      grep -qE "takes lock .* at ($fn\+0x|[^ ]+:[0-9]+ $fn \()" "$work/err" ||
      { fail "$scenario: the report does not name the call sites in $fn"; missing=1; }
  done
  if [ "$missing" -eq 0 ]; then echo "ok: $scenario: one report, $locks locks, call sites in $*"; else cat "$work/err"; fi
}

expect abba 2 take_ab take_ba
expect cycle3 3 ab bc ca
expect condvar 2 cond_wait_holding_a
expect recursive 2 r_r_a a_r
expect read_bad 2 l_write_m m_l_read
expect consistent 0
expect trylock 0
expect reuse 0
expect read_ok 0

# Contended rwlock waits under detection: the first attempt must not park
# (it did, with a deadline in the past: a timed-out park a wait), and waits
# that end within the check slice time out nowhere.
if run 60 rwlock_waits PARKLOT_DEADLOCK=report PARKLOT_STATS=1; then
  parks=$(grep -m1 '^parks: ' "$work/err")
  if grep -q '^parks: [1-9][0-9]* (timed out 0,' <<<"$parks"; then
    echo "ok: rwlock_waits: $parks"
  else
    fail "rwlock_waits: want parks and none timed out: '$parks'"; cat "$work/err"
  fi
else
  fail "rwlock_waits: exit status $?"; cat "$work/err"
fi

# The actual deadlock. Report mode: the report comes (the threads check
# after a second of waiting) and the program stays stuck.
run 10 deadlock PARKLOT_DEADLOCK=report
rc=$?
[ "$rc" -eq 124 ] || fail "deadlock, report mode: exit status $rc, want 124 (stuck until timeout)"
n=$(grep -c '^parklot: deadlock: 2 threads wait for each other' "$work/err")
if [ "$n" -eq 1 ] && [ "$(grep -cE 'waits for lock .* at (deadlock_thread\+0x|[^ ]+:[0-9]+ deadlock_thread \()' "$work/err")" -eq 2 ] &&
   [ "$(grep -cE 'held by thread .* taken at (deadlock_thread\+0x|[^ ]+:[0-9]+ deadlock_thread \()' "$work/err")" -eq 2 ]; then
  echo "ok: deadlock, report mode: reported once, both threads' locks and call sites"
else
  fail "deadlock, report mode: $n deadlock reports, want 1 naming both threads"; cat "$work/err"
fi

# Abort mode, the report to a file: SIGABRT (134 from the shell's view of
# the signal, through timeout), stderr free of reports.
start=$(date +%s%N)
run 60 deadlock PARKLOT_DEADLOCK=abort PARKLOT_REPORT="$work/report"
rc=$?
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$rc" -eq 134 ] || fail "deadlock, abort mode: exit status $rc, want 134 (SIGABRT)"
grep -q parklot: "$work/err" && { fail "deadlock, abort mode: a report on stderr despite PARKLOT_REPORT"; cat "$work/err"; }
if grep -q '^parklot: deadlock: 2 threads wait for each other' "$work/report" &&
   grep -q 'PARKLOT_DEADLOCK=abort: aborting' "$work/report"; then
  echo "ok: deadlock, abort mode: reported to PARKLOT_REPORT and aborted after ${elapsed_ms} ms"
else
  fail "deadlock, abort mode: no deadlock report in PARKLOT_REPORT's file"; cat "$work/report" "$work/err"
fi
exit "$status"
