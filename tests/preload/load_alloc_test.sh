#!/usr/bin/env bash
# Loading the shim keeps no allocation: load_alloc_prog counts, with its
# own malloc, the blocks allocated before main and still live at main, once
# under plain glibc and once under the shim; the two must be the same (the
# program's own C++ runtime, linked by the toolchain, may allocate in both).
#
#   load_alloc_test.sh SHIM PROG
set -uo pipefail
root=$PWD
source "$root/tests/preload/shim_preload.sh"
shim_test_begin "$1" "$2" load_alloc

live_at_main() {  # environment assignments: the program's "live at main" line
  env "$@" timeout 60 "$prog" >"$work/out" 2>&1 || { cat "$work/out"; return 1; }
  grep '^allocations before main:' "$work/out" >&2
  grep '^live at main:' "$work/out"
}
glibc=$(live_at_main PARKLOT_TEST_GLIBC=1) || fail "the plain glibc run failed"
shim=$(live_at_main LD_PRELOAD="$PRELOAD") || fail "the run under the shim failed"
echo "plain glibc: ${glibc#live at main: }"
echo "the shim:    ${shim#live at main: }"
[ -n "$glibc" ] && [ "$glibc" = "$shim" ] ||
  fail "the shim allocates at load (glibc alone: '$glibc'; under the shim: '$shim')"
[ "$status" -eq 0 ] && echo PASS
exit "$status"
