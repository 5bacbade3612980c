#!/usr/bin/env bash
# A user's build against the installed headers: with -std=c++17 each public
# header (and <parklot/parklot.h>) fails with exactly one error, the #error
# that names C++20, and no error from any other parklot header; with
# -std=c++20 <parklot/parklot.h>, which includes every one, compiles. The
# headers come from the install tree.
#
#   cxx_standard_test.sh TREE.tar
set -uo pipefail
tree=$1
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/cxx_standard.XXXXXX")
trap 'rm -rf "$work"' EXIT
status=0
fail() { echo "FAIL: $*"; status=1; }
tar -xf "$tree" -C "$work" || { echo "FAIL: cannot unpack $tree"; exit 1; }
cxx=${CXX:-g++}
checked=0
for h in "$work"/include/parklot/*.h; do
  name=parklot/$(basename "$h")
  printf '#include <%s>\n' "$name" >"$work/user.cc"
  if "$cxx" -std=c++17 -fsyntax-only -I"$work/include" "$work/user.cc" >"$work/out" 2>&1; then
    fail "$name compiles with -std=c++17"
  fi
  errors=$(grep -c 'error:' "$work/out")
  if [ "$errors" -ne 1 ] || ! grep -q 'error: #error "parklot needs C++20' "$work/out"; then
    fail "$name with -std=c++17: $errors errors, want the one naming C++20:"
    head -20 "$work/out"
  fi
  checked=$((checked + 1))
done
printf '#include <parklot/parklot.h>\n' >"$work/user.cc"
"$cxx" -std=c++20 -fsyntax-only -I"$work/include" "$work/user.cc" >"$work/out" 2>&1 ||
  { fail "parklot/parklot.h does not compile with -std=c++20:"; head -20 "$work/out"; }
[ "$checked" -ge 8 ] || fail "only $checked public headers in the tree"
echo "$checked public headers checked with $("$cxx" --version | head -1)"
[ "$status" -eq 0 ] && echo PASS
exit "$status"
