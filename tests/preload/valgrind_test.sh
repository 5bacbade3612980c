#!/usr/bin/env bash
# Valgrind's thread checkers with the shim preloaded (preload/surface.h: the
# shim steps aside under Valgrind, every served name runs glibc's own
# function). valgrind_prog (four threads on mutex, cond, rwlock, semaphore,
# barrier, once, C11 mtx/cnd/call_once, raw futex calls), under helgrind and
# under DRD:
#   without the shim              0 errors (the program is race-free)
#   LD_PRELOAD=shim               0 errors, the shim's one step-aside line
#   the same with PARKLOT_STATS=1, PARKLOT_SYSCALL_FUTEX=1 and
#   PARKLOT_DEADLOCK=report       0 errors, no statistics report (nothing
#                                 served), the futex calls glibc's too
#   parklot run -- valgrind ...   (an installed launcher) 0 errors
# and `valgrind_prog racy` under helgrind with the shim still gives
# helgrind's race report on the racy counter. Each run is bounded by
# `timeout`.
#
#   valgrind_test.sh SHIM PROG LAUNCHER RUN_HELPER
set -uo pipefail
root=$PWD
source "$root/tests/preload/shim_preload.sh"
shim_test_begin "$1" "$2" valgrind
launcher="$root/$3"
run_helper="$root/$4"  # what an installed `parklot run` hands the command to
# Counted, so that each check says "ok" only when it found nothing wrong.
fails=0
fail() { echo "FAIL: $*"; status=1; fails=$((fails + 1)); }
command -v valgrind >/dev/null || { echo "FAIL: valgrind not installed (tools/setup installs it)"; exit 1; }
limit=120

# run LABEL WANT_RC [ENV...] -- COMMAND...: output in $work/LABEL.out
run() {
  local label=$1 want=$2
  shift 2
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  timeout -k 5 "$limit" env "${envs[@]}" "$@" >"$work/$label.out" 2>&1
  local rc=$?
  out="$work/$label.out"
  if [ "$rc" -ne "$want" ]; then
    fail "$label: exit status $rc, want $want"
    grep -v '^==[0-9]*==    ' "$out" | head -20
    return 1
  fi
  return 0
}
clean() {  # LABEL STEP_ASIDE_LINES_WANTED
  local label=$1 want=$2 before=$fails n
  grep -q '^valgrind_prog: ok$' "$out" || fail "$label: the program did not finish well"
  grep -q '^==[0-9]*== ERROR SUMMARY: 0 errors from 0 contexts' "$out" ||
    fail "$label: $(grep -o 'ERROR SUMMARY: [0-9]* errors' "$out" || echo 'no ERROR SUMMARY line')"
  n=$(grep -c "^parklot: under Valgrind: stepping aside; valgrind_prog (pid [0-9]*) runs on glibc's locks$" "$out")
  [ "$n" -eq "$want" ] || fail "$label: $n step-aside lines, want $want"
  if grep -q '^parklot statistics' "$out"; then fail "$label: a statistics report"; fi
  if [ "$fails" -eq "$before" ]; then echo "ok: $label: 0 errors"; fi
}

vg=(valgrind --error-exitcode=99)
for tool in helgrind drd; do
  run "$tool-glibc" 0 -- "${vg[@]}" --tool=$tool "$prog" && clean "$tool-glibc" 0
  run "$tool-shim" 0 LD_PRELOAD="$PRELOAD" -- "${vg[@]}" --tool=$tool "$prog" &&
    clean "$tool-shim" 1
  run "$tool-shim-knobs" 0 LD_PRELOAD="$PRELOAD" PARKLOT_STATS=1 PARKLOT_SYSCALL_FUTEX=1 \
    PARKLOT_DEADLOCK=report -- "${vg[@]}" --tool=$tool "$prog" && clean "$tool-shim-knobs" 1
done

# The launcher as installed (PREFIX/bin/parklot beside PREFIX/lib, with
# PREFIX/lib/parklot/parklot-run): no Bazel. Debian's valgrind is a shell
# script: the shim is preloaded into it and into valgrind.bin, natively,
# and steps aside in the program only.
mkdir -p "$work/prefix/bin" "$work/prefix/lib/parklot"
cp "$launcher" "$work/prefix/bin/parklot"
cp "$run_helper" "$work/prefix/lib/parklot/parklot-run"
ln -s "$(readlink -f "$1")" "$work/prefix/lib/libparklot_preload.so"
run launcher-helgrind 0 -- "$work/prefix/bin/parklot" run -- "${vg[@]}" --tool=helgrind "$prog" &&
  clean launcher-helgrind 1

# A race is still found.
if run helgrind-shim-racy 99 LD_PRELOAD="$PRELOAD" -- "${vg[@]}" --tool=helgrind "$prog" racy; then
  before=$fails
  grep -q '^==[0-9]*== Possible data race during .* at 0x' "$out" || fail "helgrind-shim-racy: no race report"
  grep -A3 'Possible data race' "$out" | grep -q '^==[0-9]*==    at 0x[0-9A-F]*: Worker ' ||
    fail "helgrind-shim-racy: the race is not reported in Worker"
  grep -q "^parklot: under Valgrind: stepping aside;" "$out" || fail "helgrind-shim-racy: no step-aside line"
  [ "$fails" -eq "$before" ] && echo "ok: helgrind-shim-racy: the race is reported in Worker"
fi
[ "$status" -eq 0 ] && echo PASS
exit "$status"
