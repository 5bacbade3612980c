#!/usr/bin/env bash
# Runs PROGRAM under LD_PRELOAD of the shim with PARKLOT_SYSCALL_FUTEX=1 and
# PARKLOT_STATS=FILE.%p, inside `timeout`, and checks the futex counts of the
# statistics reports (summed over every process's file).
#
#   run_under_futex_shim.sh [options] PROGRAM [ARGS...]
#     --expect-served=OP,...   each op (wait, wake_op, ...) was served > 0 times
#     --expect-kernel=OP,...   each op was passed to the kernel > 0 times
#     --env=NAME=VALUE         extra environment (repeatable)
#     --timeout=SECONDS        limit (default 100)
#
# An ASan-built shim (--config=asan) is preloaded after ASan's runtime
# (tests/preload/shim_preload.sh).
set -uo pipefail

limit=100
served=""
kernel=""
extra_env=()
while [ $# -gt 0 ]; do
  case "$1" in
    --expect-served=*) served=${1#--expect-served=} ;;
    --expect-kernel=*) kernel=${1#--expect-kernel=} ;;
    --env=*) extra_env+=("${1#--env=}") ;;
    --timeout=*) limit=${1#--timeout=} ;;
    --) shift; break ;;
    -*) echo "run_under_futex_shim.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
  shift
done
[ $# -ge 1 ] || { echo "usage: run_under_futex_shim.sh [options] PROGRAM [ARGS...]" >&2; exit 2; }

shim="$PWD/preload/libparklot_preload.so"
[ -f "$shim" ] || { echo "FAIL: shim not found at $shim"; exit 1; }
# shellcheck source=tests/preload/shim_preload.sh
source tests/preload/shim_preload.sh || exit 1
shim_preload "$shim" || exit 1
preload=$PRELOAD
prog="$1"
shift
work="${TEST_TMPDIR:-$(mktemp -d)}"
stats="$work/futex_stats.$$"

# One report file per process (%p): fork children that leave by _exit
# report only so.
rm -f "$stats".*
timeout "$limit" env LD_PRELOAD="$preload" PARKLOT_SYSCALL_FUTEX=1 PARKLOT_STATS="$stats.%p" \
  "${extra_env[@]}" "$prog" "$@"
rc=$?
cat "$stats".* >"$stats" 2>/dev/null
status=0
if [ "$rc" -eq 124 ]; then
  echo "FAIL: $(basename "$prog") timed out after ${limit}s"; status=1
elif [ "$rc" -ne 0 ]; then
  echo "FAIL: $(basename "$prog") exit status $rc"; status=1
fi

# count "served"|"passed to the kernel" OP: summed over the reports.
count() {
  awk -v what="$1" -v op="$2" '
    index($0, "futex " what ":") == 1 {
      for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == op) n += kv[2] }
    }
    END { print n + 0 }' "$stats"
}
check() {  # what list
  local what=$1 list=$2 op n
  [ -n "$list" ] || return 0
  IFS=, read -ra ops <<<"$list"
  for op in "${ops[@]}"; do
    n=$(count "$what" "$op")
    if [ "$n" -gt 0 ]; then echo "ok: futex $op $what: $n"; else echo "FAIL: no futex $op $what"; status=1; fi
  done
}
check "served by parklot" "$served"
check "passed to the kernel" "$kernel"
grep -h '^futex ' "$stats" | sort | uniq -c | head -20
[ "$status" -eq 0 ] && echo "PASS"
exit "$status"
