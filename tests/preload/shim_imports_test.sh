#!/usr/bin/env bash
# The shim's dynamic imports are exactly those preload/shim_imports.txt
# allows, each with its reason: every other libc function the shim calls
# is glibc's own definition (preload/own_libc.c), which no program or other
# preload can interpose (docs/design.md section 5.19, invariant 11).
#   shim_imports_test.sh SHIM ALLOWLIST
set -uo pipefail
shim=$1 allow=$2
command -v nm >/dev/null || { echo "FAIL: nm (binutils) missing"; exit 1; }
imports=$(nm -D --undefined-only "$shim" | awk '{print $2}' | sed 's/@.*//' | sort -u)
allowed=$(grep -v '^#' "$allow" | awk 'NF {print $1}' | sort -u)
[ -n "$imports" ] || { echo "FAIL: no imports read from $shim"; exit 1; }
status=0
extra=$(comm -23 <(echo "$imports") <(echo "$allowed"))
if [ -n "$extra" ]; then
  echo "FAIL: imports not in $(basename "$allow") (call glibc's own: add them to preload/own_libc_functions.h):"
  echo "$extra" | sed 's/^/  /'
  status=1
fi
# Every allowed name without a reason is a mistake in the list.
if grep -v '^#' "$allow" | awk 'NF == 1' | grep -q .; then
  echo "FAIL: entries without a reason:"; grep -v '^#' "$allow" | awk 'NF == 1'; status=1
fi
echo "imports: $(echo "$imports" | wc -l) ($(echo "$imports" | tr '\n' ' '))"
# The list stays a list of what is needed: a name no longer imported is
# taken out, so the reasons stay true.
stale=$(comm -13 <(echo "$imports") <(echo "$allowed"))
if [ -n "$stale" ]; then
  echo "note: allowed but not imported (fine for weak references the toolchain may drop): $(echo "$stale" | tr '\n' ' ')"
fi
[ $status -eq 0 ] && echo PASS
exit $status
