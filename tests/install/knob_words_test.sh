#!/usr/bin/env bash
# The switch knobs take the words runtime/config.cc's ParseBool takes (1,
# true, yes, t, y and 0, false, no, f, n, in any case), and the installed
# man page, whose ENVIRONMENT list is the README's knobs table, says so for
# PARKLOT_STATS and PARKLOT_SYSCALL_FUTEX.
# A bad knob is warned of once per process, also in a program that links
# libparklot.so and runs under the shim (two copies of the lot).
#   knob_words_test.sh TREE_TAR PROG_C LIB_PROG_CC
set -uo pipefail
tree_tar=$1 prog_c=$2 lib_prog_cc=$3
work="${TEST_TMPDIR:-$(mktemp -d)}/knob_words"
rm -rf "$work" && mkdir -p "$work/tree"
tar -xf "$tree_tar" -C "$work/tree" || { echo "FAIL: unpack $tree_tar"; exit 1; }
shim="$work/tree/lib/libparklot_preload.so"
man="$work/tree/share/man/man1/parklot.1"
gcc -O1 -pthread "$prog_c" -o "$work/prog" || { echo "FAIL: gcc"; exit 1; }

status=0
for word in 1 true yes TRUE Yes t y 0 false no NO f n; do
  PARKLOT_STATS=$word LD_PRELOAD="$shim" timeout 60 "$work/prog" lock 2>"$work/err"
  rc=$?
  case $word in [1tTyY]*) want=1 ;; *) want=0 ;; esac
  got=$(grep -c '^parklot statistics (pid' "$work/err")
  if [ "$rc" -ne 0 ] || [ "$got" -ne "$want" ] || grep -q 'ignoring PARKLOT_STATS' "$work/err"; then
    echo "FAIL: PARKLOT_STATS=$word: status $rc, $got reports (want $want), stderr:"
    cat "$work/err"; status=1
  fi
done
[ "$status" -eq 0 ] && echo "ok: PARKLOT_STATS takes 1/0, true/false, yes/no, t/f, y/n in any case"

# The man page's entry for each knob: the line after its name.
for knob in PARKLOT_STATS PARKLOT_SYSCALL_FUTEX; do
  entry=$(grep -A1 -x "\\\\fB$knob\\\\fR" "$man" | tail -1)
  missing=""
  for word in 1 true yes 0 false no; do
    grep -qF "\\fB$word\\fR" <<<"$entry" || missing="$missing $word"
  done
  if [ -z "$entry" ] || [ -n "$missing" ]; then
    echo "FAIL: man page, $knob: does not name$missing: '$entry'"; status=1
  else
    echo "ok: man page, $knob names 1/0, true/false, yes/no"
  fi
done
# One warning of a bad knob per process: the library alone, the shim
# alone, and the library under the shim.
lib="$work/tree/lib"
if g++ -std=c++20 -pthread -I"$work/tree/include" "$lib_prog_cc" -L"$lib" -lparklot \
     -Wl,-rpath,"$lib" -o "$work/lib_prog"; then
  for run in "library alone:" "shim alone:$shim:/bin/true" "library under the shim:$shim"; do
    what=${run%%:*} rest=${run#*:}
    pre=${rest%%:*} cmd=${rest#*:}
    [ "$cmd" = "$rest" ] && cmd=""
    [ -n "$cmd" ] || cmd="$work/lib_prog"
    n=$(timeout 60 env PARKLOT_BUCKETS=lots LD_PRELOAD="$pre" "$cmd" 2>&1 | grep -c 'ignoring PARKLOT_BUCKETS=lots')
    if [ "$n" -ne 1 ]; then echo "FAIL: $what PARKLOT_BUCKETS=lots warned $n times (want 1)"; status=1
    else echo "ok: $what one warning"; fi
  done
else
  echo "FAIL: g++ of $lib_prog_cc against the tree"; status=1
fi
exit $status
