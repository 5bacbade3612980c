#!/usr/bin/env bash
# Bad PARKLOT_* values and exhausted memory under the shim, end to end
# (docs/design.md section 6, invariant 7): the program runs to the end, each bad
# variable gets exactly one line on stderr naming it, its value and the default
# used, and PARKLOT_STATS=1 reports the table allocations that failed.
#
#   config_env_test.sh OOM_PROG
# OOM_PROG is tests/preload/oom_prog: it exhausts its address space before
# its first lock and then runs 24 threads on a mutex, a condvar and a
# semaphore (so the table's growth fails).
set -uo pipefail

root="${TEST_SRCDIR:+$TEST_SRCDIR/${TEST_WORKSPACE:-parklot}}"
root="${root:-$PWD}"
shim="$root/preload/libparklot_preload.so"
[ -f "$shim" ] || shim="$PWD/preload/libparklot_preload.so"
# shellcheck source=tests/preload/shim_preload.sh
source "$root/tests/preload/shim_preload.sh" || exit 1
shim_test_begin "$shim" "$1" config_env

# Runs the program under the shim with the given environment assignments
# (only the program is preloaded: `timeout` and `env` are not). Output in
# $work/out and $work/err; returns the exit status.
under_shim() {
  timeout -k 5 60 env "$@" LD_PRELOAD="$PRELOAD" "$prog" ${PROG_ARGS:-} \
    >"$work/out" 2>"$work/err"
}

# expect_one_warning VAR VALUE DEFAULT: exactly one parklot line on stderr,
# naming VAR=VALUE and the default.
expect_one_warning() {
  local var=$1 value=$2 default=$3
  local lines
  lines=$(grep -c 'parklot:' "$work/err")
  if [ "$lines" -ne 1 ]; then
    fail "$var=$value: $lines parklot lines on stderr, want 1"; cat "$work/err"
  elif ! grep -qF "$var=$value " "$work/err" ||
       ! grep -q "using the default $default\$" "$work/err"; then
    fail "$var=$value: the warning does not name the variable, value and default $default"
    cat "$work/err"
  else
    echo "ok: $var=$value: one line: $(grep 'parklot:' "$work/err")"
  fi
}

# 2^64 - 1 once made RoundUpPow2 loop forever before main.
for var in PARKLOT_MAX_BUCKETS PARKLOT_BUCKETS; do
  default=524288
  [ "$var" = PARKLOT_BUCKETS ] && default=16
  for value in 18446744073709551615 99999999999999999999 -1 0 lots; do
    if under_shim "$var=$value"; then
      expect_one_warning "$var" "$value" "$default"
    else
      fail "$var=$value: exit status $?"; cat "$work/out" "$work/err"
    fi
  done
done
for value in nan inf -2 0; do
  if under_shim "PARKLOT_LOAD_FACTOR=$value"; then
    expect_one_warning PARKLOT_LOAD_FACTOR "$value" 4
  else
    fail "PARKLOT_LOAD_FACTOR=$value: exit status $?"
  fi
done
if under_shim PARKLOT_POLICY=fixed:18446744073709551615; then
  expect_one_warning PARKLOT_POLICY fixed:18446744073709551615 adaptive
else
  fail "PARKLOT_POLICY=fixed:18446744073709551615: exit status $?"
fi

# Every knob bad at once: one line each, and the program runs.
if under_shim PARKLOT_POLICY=fixed:0 PARKLOT_BUCKETS=-1 PARKLOT_MAX_BUCKETS=0 \
     PARKLOT_LOAD_FACTOR=nan PARKLOT_SPIN=fast PARKLOT_FAIR_NS=-1 \
     PARKLOT_STATS=banana PARKLOT_SYSCALL_FUTEX=maybe; then
  n=0
  for var in PARKLOT_POLICY PARKLOT_BUCKETS PARKLOT_MAX_BUCKETS \
             PARKLOT_LOAD_FACTOR PARKLOT_SPIN PARKLOT_FAIR_NS PARKLOT_STATS \
             PARKLOT_SYSCALL_FUTEX; do
    c=$(grep -c "parklot: ignoring $var=" "$work/err")
    [ "$c" -eq 1 ] || fail "all bad: $c lines for $var, want 1"
    n=$((n + c))
  done
  total=$(grep -c 'parklot:' "$work/err")
  [ "$total" -eq 8 ] || { fail "all bad: $total parklot lines, want 8"; cat "$work/err"; }
  [ "$n" -eq 8 ] && echo "ok: eight bad variables, eight lines"
else
  fail "all bad: exit status $?"; cat "$work/err"
fi

# Good values: not a word.
if under_shim PARKLOT_BUCKETS=64 PARKLOT_MAX_BUCKETS=1073741824 PARKLOT_SPIN=off; then
  if grep -q 'parklot:' "$work/err"; then fail "good values warned"; cat "$work/err"
  else echo "ok: good values, no warning"; fi
else
  fail "good values: exit status $?"
fi

# The table cannot grow into the exhausted address space: the report at
# exit counts the failures, the table stayed at 16 buckets.
report_line() { grep '^table: ' "$work/err" | tail -1; }
if under_shim PARKLOT_STATS=1; then
  line=$(report_line)
  failures=$(echo "$line" | sed -n 's/.* \([0-9][0-9]*\) growth failures$/\1/p')
  if [ -z "$failures" ] || [ "$failures" -lt 1 ] || ! echo "$line" | grep -q '^table: 16 buckets, 0 growths'; then
    fail "stats after failed growth: '$line'"; cat "$work/err"
  else
    echo "ok: exhausted memory: $line"
  fi
else
  fail "PARKLOT_STATS=1: exit status $?"; cat "$work/err"
fi

# The same, with memory still exhausted when the report is written.
if PROG_ARGS=--keep-exhausted under_shim PARKLOT_STATS=1; then
  line=$(report_line)
  if echo "$line" | grep -q 'growth failures$'; then
    echo "ok: report without memory: $line"
  else
    fail "no report without memory"; cat "$work/err"
  fi
else
  fail "report without memory: exit status $?"; cat "$work/err"
fi

# A configured initial table too large for the address space (1 GiB here):
# the lot starts on a smaller one, counted once, and everything runs.
for policy in adaptive threads fixed:1073741824; do
  if (ulimit -v 1048576 && under_shim PARKLOT_POLICY="$policy" \
        PARKLOT_BUCKETS=1073741824 PARKLOT_MAX_BUCKETS=1073741824 \
        PARKLOT_STATS=1); then
    line=$(report_line)
    buckets=$(echo "$line" | sed -n 's/^table: \([0-9]*\) buckets.*/\1/p')
    if [ -z "$buckets" ] || [ "$buckets" -ge 1073741824 ] ||
       ! echo "$line" | grep -q ' [1-9][0-9]* growth failures$'; then
      fail "initial table under ulimit -v ($policy): '$line'"; cat "$work/err"
    else
      echo "ok: initial table of 2^30 buckets under ulimit -v 1 GiB ($policy): $line"
    fi
  else
    fail "initial table under ulimit -v ($policy): exit status $?"; cat "$work/err"
  fi
done

[ "$status" -eq 0 ] && echo "config_env_test: all checks passed"
exit "$status"
