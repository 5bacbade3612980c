#!/usr/bin/env bash
# `parklot run` says in one line when a report the user asked for has
# nothing in it, after the program exits: --stats where no process served a
# lock (a program that locks nothing, a static one behind a shell),
# --profile where no wait was sampled, --deadlock where no lock-order cycle
# was found; and says none of these where the report has something.
#   launcher_silence_test.sh TREE_TAR PROG_C
set -uo pipefail
# shellcheck source=tests/install/launcher_setup.sh
source "$(dirname "$0")/launcher_setup.sh"
launcher_setup silence "$1" "$2"
mkdir -p "$work/prof"
gcc -O1 -static -pthread "$prog_c" -o "$work/static" || { echo "FAIL: gcc -static"; exit 1; }

status=0
# label, the line wanted (or "!LINE": that line must not be there), then
# the run arguments; the program must exit 0.
check() {
  local label=$1 line=$2
  shift 2
  (cd "$work/prof" && timeout 60 "$launcher" run "$@" >/dev/null 2>"$work/err")
  local rc=$? n
  if [ "${line:0:1}" = '!' ]; then
    n=$(grep -cxF -- "${line:1}" "$work/err")
    [ "$rc" -eq 0 ] && [ "$n" -eq 0 ] && { echo "ok: $label: no '${line:1}'"; return; }
  else
    n=$(grep -cxF -- "$line" "$work/err")
    [ "$rc" -eq 0 ] && [ "$n" -eq 1 ] && { echo "ok: $label: $line"; return; }
  fi
  echo "FAIL: $label: status $rc (want 0), line '$line' ('!': must be absent), stderr:"
  cat "$work/err"
  status=1
}
check "--stats, no lock" "parklot: $prog: no lock was served" --stats -- "$prog" none
check "--stats, static behind a shell" "parklot: sh: no lock was served" \
  --stats -- sh -c "$work/static lock"
check "--stats, a lock" "!parklot: $prog: no lock was served" --stats -- "$prog" lock
check "--profile, no wait" "parklot: $prog: no wait was sampled" \
  --profile="$work/prof/p.%p" -- "$prog" lock
check "--profile, a 100 ms wait" "!parklot: $prog: no wait was sampled" \
  --profile="$work/prof/p.%p" -- "$prog" contended
ls "$work/prof"/p.* >/dev/null 2>&1 || { echo "FAIL: --profile, a 100 ms wait: no profile written"; status=1; }
check "--deadlock, no cycle" "parklot: $prog: no lock-order cycle" --deadlock -- "$prog" lock
check "--deadlock, a cycle" "!parklot: $prog: no lock-order cycle" --deadlock -- "$prog" cycle
grep -q '^parklot: lock-order cycle' "$work/err" || { echo "FAIL: --deadlock, a cycle: not reported"; status=1; }
exit $status
