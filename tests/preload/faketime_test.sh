#!/usr/bin/env bash
# faketime_prog (timed waits) under libfaketime: against glibc, then with
# LD_PRELOAD=libfaketime:shim and shim:libfaketime, each with the clock
# moved ahead (+2y), back (-1d) and to a fixed date.
#   faketime_test.sh PROGRAM
set -uo pipefail
root="${TEST_SRCDIR:+$TEST_SRCDIR/${TEST_WORKSPACE:-parklot}}"
root="${root:-$PWD}"
prog=$1
[ -x "$prog" ] || prog="$root/$prog"
prog=$(readlink -f "$prog")
shim="$root/preload/libparklot_preload.so"
ft=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1
[ -f "$ft" ] || { echo "FAIL: $ft not found (tools/setup installs libfaketime)"; exit 1; }
source "$root/tests/preload/shim_preload.sh" || exit 1
status=0
run() {  # label, LD_PRELOAD, FAKETIME, extra env...
  local label=$1 preload=$2 fake=$3
  shift 3
  env LD_PRELOAD="$preload" FAKETIME="$fake" "$@" timeout -k 5 30 "$prog" > /dev/null 2> "$label.err"
  local rc=$?
  if [ "$rc" -eq 0 ]; then echo "ok: $label"; else echo "FAIL: $label: rc $rc"; cat "$label.err"; status=1; fi
}
cd "${TEST_TMPDIR:-/tmp}" || exit 1
for fake in "+2y" "-1d" "@2020-01-01 00:00:00"; do
  run "glibc, FAKETIME=$fake" "$ft" "$fake" PARKLOT_TEST_GLIBC=1
  shim_preload "$ft" "$shim" || exit 1
  run "libfaketime first, FAKETIME=$fake" "$PRELOAD" "$fake"
  shim_preload "$shim" "$ft" || exit 1
  run "shim first, FAKETIME=$fake" "$PRELOAD" "$fake"
done
exit $status
