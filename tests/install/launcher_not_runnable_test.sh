#!/usr/bin/env bash
# `parklot run` on something it cannot run says what bash says, with
# bash's status: a file without execute permission (by path, or the only
# one found on PATH) "Permission denied", 126; a directory by path "Is a
# directory", 126; a name found nowhere "command not found", 127; a path
# that does not exist "No such file or directory", 127. With --stats (the
# launcher that stays the parent) too.
#   launcher_not_runnable_test.sh TREE_TAR
set -uo pipefail
tree_tar=$1
work="${TEST_TMPDIR:-$(mktemp -d)}/not_runnable"
rm -rf "$work" && mkdir -p "$work/tree" "$work/bin" "$work/dir"
tar -xf "$tree_tar" -C "$work/tree" || { echo "FAIL: unpack $tree_tar"; exit 1; }
launcher="$work/tree/bin/parklot"
printf '#!/bin/sh\necho ran\n' > "$work/bin/noexec"
chmod 644 "$work/bin/noexec"
if [ -x "$work/bin/noexec" ]; then
  # Even root may run a file only where some execute bit is set: one that
  # still counts as executable here leaves nothing to check.
  echo "FAIL: $work/bin/noexec counts as executable here"; exit 1
fi

status=0
check() {  # label, want status, want stderr line, then the run arguments
  local label=$1 want_rc=$2 want_err=$3
  shift 3
  local opts
  for opts in "" "--stats"; do
    # shellcheck disable=SC2086
    out=$(cd "$work" && timeout 60 "$launcher" run $opts -- "$@" 2>"$work/err")
    rc=$?
    if [ "$rc" -ne "$want_rc" ] || [ "$(cat "$work/err")" != "$want_err" ] || [ -n "$out" ]; then
      echo "FAIL: $label ${opts:-plain}: status $rc, stderr '$(cat "$work/err")' (want $want_rc, '$want_err')"
      status=1
    else
      echo "ok: $label ${opts:-plain}: $rc, $want_err"
    fi
  done
}
check "file without x, by path" 126 "parklot: $work/bin/noexec: Permission denied" "$work/bin/noexec"
check "directory, by path" 126 "parklot: $work/dir: Is a directory" "$work/dir"
PATH="$work/bin:$PATH" check "file without x, on PATH" 126 \
  "parklot: $work/bin/noexec: Permission denied" noexec
check "name found nowhere" 127 "parklot: parklot-no-such-command: command not found" \
  parklot-no-such-command
check "missing path" 127 "parklot: $work/missing: No such file or directory" "$work/missing"
# What bash says of the same, so the test and the shell agree.
bash -c "$work/bin/noexec" 2>/dev/null; [ $? -eq 126 ] || { echo "FAIL: bash disagrees (noexec)"; status=1; }
bash -c "$work/dir" 2>/dev/null; [ $? -eq 126 ] || { echo "FAIL: bash disagrees (dir)"; status=1; }
exit $status
