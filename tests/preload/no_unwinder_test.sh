#!/usr/bin/env bash
# Without libgcc_s the shim still loads and runs a C program (/bin/true,
# which needs libc alone; a program Bazel links needs libgcc_s), and
# PARKLOT_PROFILE says it is off instead of ending the process: the
# profile's stack walk is libgcc_s's _Unwind_Backtrace, which the shim
# finds when the profile is switched on (preload/own_unwinder.c). Before,
# that lookup ended every process started with PARKLOT_PROFILE where
# libgcc_s was missing.
#
# The machine stays untouched: libgcc_s is hidden by an empty file
# bind-mounted over it in a private mount namespace (unshare -m). Needs
# root; as another user the test says so and passes without running.
#
#   no_unwinder_test.sh SHIM
set -uo pipefail

if [ "${1:-}" != --inside ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: needs root (a mount namespace)"
    exit 0
  fi
  shim=$(readlink -f "$1")
  exec unshare --mount --propagation private bash "$0" --inside "$shim"
fi
shim=$2 prog=/bin/true
status=0
fail() { echo "FAIL: $*"; status=1; }

lib=$(ldconfig -p | awk '/libgcc_s\.so\.1 .*x86-64/ {print $NF; exit}')
[ -n "$lib" ] || { echo "FAIL: libgcc_s.so.1 not in the loader's cache"; exit 1; }
empty=$(mktemp)
trap 'umount -l "$lib" 2>/dev/null; rm -f "$empty"' EXIT
mount --bind "$empty" "$(readlink -f "$lib")" || { echo "FAIL: bind mount"; exit 1; }
[ ! -s "$(readlink -f "$lib")" ] || fail "libgcc_s still readable at $lib"

prof=$(mktemp -d)
out=$(LD_PRELOAD="$shim" PARKLOT_PROFILE="$prof/p-%p.prof" "$prog" 2>&1)
rc=$?
[ $rc -eq 0 ] || fail "with PARKLOT_PROFILE: exit status $rc: $out"
grep -q 'libgcc_s.so.1 (the unwinder) not found; PARKLOT_PROFILE is off' <<<"$out" ||
  fail "no line saying the profile is off: $out"
[ -z "$(ls -A "$prof")" ] || fail "a profile was written: $(ls "$prof")"
rm -rf "$prof"

out=$(LD_PRELOAD="$shim" "$prog" 2>&1)
rc=$?
[ $rc -eq 0 ] || fail "without knobs: exit status $rc: $out"

[ $status -eq 0 ] && echo PASS
exit $status
