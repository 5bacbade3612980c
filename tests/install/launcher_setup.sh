# shellcheck shell=bash
# Sourced by the tests that run a program under the installed launcher
# (launcher_exit_test.sh, launcher_silence_test.sh).
#
# launcher_setup NAME TREE_TAR PROG_C: a fresh folder $work
# (TEST_TMPDIR/NAME) with the install tree unpacked in $work/tree,
# $launcher its parklot, $prog_c PROG_C and $prog that program built;
# exits with a FAIL line if a step fails.
# shellcheck disable=SC2034  # the variables are the sourcing test's
launcher_setup() {
  work="${TEST_TMPDIR:-$(mktemp -d)}/$1"
  prog_c=$3
  rm -rf "$work" && mkdir -p "$work/tree"
  tar -xf "$2" -C "$work/tree" || { echo "FAIL: unpack $2"; exit 1; }
  launcher="$work/tree/bin/parklot"
  prog="$work/prog"
  gcc -O1 -pthread "$prog_c" -o "$prog" || { echo "FAIL: gcc"; exit 1; }
}
