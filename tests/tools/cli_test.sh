#!/usr/bin/env bash
# The installed launcher's command line, and tools/install --uninstall
# (tests/tools/BUILD).
#   cli_test.sh TREE_TAR tools/install VERSION
set -uo pipefail
tree_tar=$1 install=$2 version_file=$3
work="${TEST_TMPDIR:-$(mktemp -d)}/cli"
rm -rf "$work" && mkdir -p "$work"
prefix="$work/prefix"
"$install" --tree "$tree_tar" --prefix "$prefix" 2>"$work/log" || { echo "FAIL: tools/install"; cat "$work/log"; exit 1; }
launcher="$prefix/bin/parklot"
status=0
fail() { echo "FAIL: $*"; status=1; }

echo "== --version"
want="parklot $(cat "$version_file")"
out=$("$launcher" --version 2>&1)
[ $? -eq 0 ] && [ "$out" = "$want" ] && echo "ok: $out" || fail "--version: '$out' (want '$want')"
[[ "$want" == "parklot 0.3.0-dev" || "$want" != *-dev ]] || fail "VERSION says $want"
grep -qx "Version: $(cat "$version_file")" "$prefix/lib/pkgconfig/parklot.pc" || fail "parklot.pc's version"

echo "== run CMD without --: options end at the first word"
out=$("$launcher" run echo hi 2>&1)
[ $? -eq 0 ] && [ "$out" = hi ] && echo "ok: run echo hi" || fail "run echo hi: '$out'"
out=$("$launcher" run --futex echo --stats 2>&1)
[ $? -eq 0 ] && [ "$out" = --stats ] && echo "ok: the command's own options stay its own" || fail "run --futex echo --stats: '$out'"
out=$("$launcher" run -- echo hi 2>&1)
[ $? -eq 0 ] && [ "$out" = hi ] && echo "ok: run -- echo hi" || fail "run -- echo hi: '$out'"

echo "== usage errors"
"$launcher" run --bogus echo hi >/dev/null 2>"$work/err"
rc=$?
[ "$rc" -eq 2 ] && grep -q "unknown option '--bogus'" "$work/err" && echo "ok: unknown option, 2" || { fail "run --bogus: rc $rc"; cat "$work/err"; }
"$launcher" run --stats >/dev/null 2>"$work/err"
rc=$?
[ "$rc" -eq 2 ] && echo "ok: no command, 2" || fail "run --stats alone: rc $rc"
"$launcher" run no-such-command-here >/dev/null 2>"$work/err"
rc=$?
[ "$rc" -eq 127 ] && echo "ok: unknown command, 127" || fail "run no-such-command-here: rc $rc"
"$launcher" run --profile-rate=0 echo >/dev/null 2>"$work/err"
rc=$?
[ "$rc" -eq 2 ] && echo "ok: --profile-rate=0 refused" || fail "--profile-rate=0: rc $rc"

echo "== info names where the reports go"
out=$(PARKLOT_STATS=/tmp/s.%p "$launcher" info 2>&1)
grep -q '^stats report: /tmp/s.%p' <<<"$out" && echo "ok: stats path shown" || fail "info: $out"

echo "== the licence"
[ -s "$prefix/share/doc/parklot/copyright" ] && grep -q '^License: Apache-2.0' "$prefix/share/doc/parklot/copyright" &&
  echo "ok: copyright" || fail "no share/doc/parklot/copyright"

echo "== --uninstall removes the files and the folders it made"
touch "$work/keep"
"$install" --prefix "$prefix" --uninstall 2>"$work/log" || { fail "--uninstall"; cat "$work/log"; }
if [ -e "$prefix" ]; then fail "left behind: $(find "$prefix" | head)"; else echo "ok: $prefix gone"; fi
[ -e "$work/keep" ] || fail "removed a file it did not install"
mkdir -p "$prefix/lib" && touch "$prefix/lib/other.so"
"$install" --tree "$tree_tar" --prefix "$prefix" 2>/dev/null && "$install" --prefix "$prefix" --uninstall 2>/dev/null ||
  fail "install and uninstall beside another file"
if [ -f "$prefix/lib/other.so" ] && [ -z "$(find "$prefix" -mindepth 1 ! -path "$prefix/lib" ! -path "$prefix/lib/other.so")" ]; then
  echo "ok: another file and its folder stay, the rest is gone"
else
  fail "after uninstall beside another file: $(find "$prefix")"
fi
exit $status
