#!/usr/bin/env bash
# The shim's symbol versions: symbol_versions_prog's list of served
# NAME VERSION pairs must be exactly glibc's versions of those names
# (objdump -T libc.so.6) and exactly what the shim exports, and under the
# shim dlsym, dlvsym and compat references all reach it (the program).
#   symbol_versions_test.sh PROGRAM
set -uo pipefail
root="${TEST_SRCDIR:+$TEST_SRCDIR/${TEST_WORKSPACE:-parklot}}"
root="${root:-$PWD}"
prog=$1
[ -x "$prog" ] || prog="$root/$prog"
shim="$root/preload/libparklot_preload.so"
libc=$(ldd "$prog" | awk '$1 == "libc.so.6" {print $3}')
work="${TEST_TMPDIR:-$(mktemp -d)}/symver"
mkdir -p "$work"
status=0

timeout 30 "$prog" --list | sort > "$work/listed" || { echo "FAIL: $prog --list"; exit 1; }
names=$(awk '{print $1}' "$work/listed" | sort -u)
# glibc's definitions of the listed names, "NAME VERSION[ glibc]".
objdump -T "$libc" | awk 'NR == FNR {want[$1] = 1; next}
  NF >= 6 && !/\*UND\*/ && ($NF in want) {v = $(NF-1); gsub(/[()]/, "", v); print $NF, v}' \
  <(echo "$names") - | sort > "$work/libc"
sed 's/ glibc$//' "$work/listed" | sort > "$work/listed_plain"
if diff "$work/listed_plain" "$work/libc" > "$work/d1"; then
  echo "ok: the list is glibc's versions of the $(echo "$names" | wc -l) listed names"
else
  echo "FAIL: the list differs from objdump -T $libc (< list, > glibc):"; cat "$work/d1"; status=1
fi
# Every version the shim serves of a name is one function in glibc (one
# address): the shim resolves one of them for the objects it hands to glibc
# and, under Valgrind, for every call (preload/surface.h).
objdump -T "$libc" | awk 'NR == FNR {served[$1 " " $2] = 1; next}
  NF >= 6 && !/\*UND\*/ {v = $(NF-1); gsub(/[()]/, "", v); if (($NF " " v) in served) print $NF, $1}' \
  <(grep -v ' glibc$' "$work/listed") - | sort -u | awk '{n[$1]++} END {for (k in n) if (n[k] > 1) print k}' > "$work/split"
if [ -s "$work/split" ]; then
  echo "FAIL: served versions of one name at different addresses in glibc:"; cat "$work/split"; status=1
else
  echo "ok: each served name's versions are one function in glibc"
fi
# The shim's exports under GLIBC_* versions: the list less glibc's own.
objdump -T "$shim" | awk 'NF >= 6 && !/\*UND\*/ && $(NF-1) ~ /GLIBC_/ && $NF !~ /^GLIBC_/ {v = $(NF-1); gsub(/[()]/, "", v); print $NF, v}' |
  sort > "$work/shim"
grep -v ' glibc$' "$work/listed" | sort > "$work/served"
if diff "$work/served" "$work/shim" > "$work/d2"; then
  echo "ok: the shim exports exactly the listed versions"
else
  echo "FAIL: the shim's versioned exports differ from the list (< list, > shim):"; cat "$work/d2"; status=1
fi
source "$root/tests/preload/shim_preload.sh" || exit 1
shim_preload "$shim" || exit 1
LD_PRELOAD="$PRELOAD" timeout -k 5 60 "$prog" || { echo "FAIL: $prog under the shim"; status=1; }
exit $status
