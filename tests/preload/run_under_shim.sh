#!/usr/bin/env bash
# Runs a test program (a plain -pthread binary that does not link parklot)
# with LD_PRELOAD=libparklot_preload.so, inside `timeout`.
#
#   run_under_shim.sh [options] PROGRAM [ARGS...]
#     --glibc-too        first run PROGRAM against plain glibc (no preload,
#                        PARKLOT_TEST_GLIBC=1): the program's expectations
#                        must be glibc's own results
#     --jemalloc=first   LD_PRELOAD=libjemalloc.so.2:<shim>
#     --jemalloc=last    LD_PRELOAD=<shim>:libjemalloc.so.2
#     --env=NAME=VALUE   extra environment for the shim run (repeatable)
#     --timeout=SECONDS  limit per run (default 150)
#
# Exit status 77 from the program means it cannot run here for want of a
# privilege it names (SCHED_FIFO without CAP_SYS_NICE, say): the run says
# "SKIP" with the program's reason and does not fail, as the shell tests
# that need root say so and pass (secure_mode_test.sh).
#
# The program checks by itself that the shim is loaded and exits non-zero
# on any failed check; a hang fails through `timeout`. An ASan-built shim
# (--config=asan) is preloaded after ASan's runtime (shim_preload.sh).
set -uo pipefail

limit=150
glibc_too=0
jemalloc=""
extra_env=()
while [ $# -gt 0 ]; do
  case "$1" in
    --glibc-too) glibc_too=1 ;;
    --jemalloc=first|--jemalloc=last) jemalloc=${1#--jemalloc=} ;;
    --env=*) extra_env+=("${1#--env=}") ;;
    --timeout=*) limit=${1#--timeout=} ;;
    --) shift; break ;;
    -*) echo "run_under_shim.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
  shift
done
[ $# -ge 1 ] || { echo "usage: run_under_shim.sh [options] PROGRAM [ARGS...]" >&2; exit 2; }

# Runfiles: Bazel runs the test in the workspace's runfiles directory.
root="${TEST_SRCDIR:+$TEST_SRCDIR/${TEST_WORKSPACE:-parklot}}"
root="${root:-$PWD}"
shim="$root/preload/libparklot_preload.so"
[ -f "$shim" ] || shim="$PWD/preload/libparklot_preload.so"
[ -f "$shim" ] || { echo "FAIL: shim not found at $shim"; exit 1; }
helper="$root/tests/preload/shim_preload.sh"
[ -f "$helper" ] || helper="$(dirname "$0")/shim_preload.sh"
# shellcheck source=tests/preload/shim_preload.sh
source "$helper" || { echo "FAIL: $helper not found"; exit 1; }
prog="$1"
shift
[ -x "$prog" ] || prog="$root/$prog"
[ -x "$prog" ] || { echo "FAIL: program $prog not found"; exit 1; }

status=0
run() {  # label, then env assignments and the command, through env(1)
  local label=$1
  shift
  echo "=== $label"
  env "$@"
  local rc=$?
  if [ "$rc" -eq 124 ]; then
    echo "FAIL: $label: timed out after ${limit}s"
  elif [ "$rc" -eq 77 ]; then
    echo "SKIP: $label: the program cannot run here (its reason above)"
    rc=0
  elif [ "$rc" -ne 0 ]; then
    echo "FAIL: $label: exit status $rc"
  else
    echo "ok: $label"
  fi
  [ "$rc" -eq 0 ] || status=1
}

if [ "$glibc_too" = 1 ]; then
  run "$(basename "$prog") against plain glibc" -u LD_PRELOAD \
    PARKLOT_TEST_GLIBC=1 timeout -k 10 "$limit" "$prog" "$@"
fi

libs=("$shim")
if [ -n "$jemalloc" ]; then
  je=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
  [ -f "$je" ] || { echo "FAIL: $je not found (tools/setup installs libjemalloc2)"; exit 1; }
  if [ "$jemalloc" = first ]; then libs=("$je" "$shim"); else libs=("$shim" "$je"); fi
  extra_env+=(PARKLOT_TEST_EXPECT_JEMALLOC=1)
fi
shim_preload "${libs[@]}" || { echo "FAIL: cannot preload the shim"; exit 1; }
preload=$PRELOAD

run "$(basename "$prog") under LD_PRELOAD=$preload${extra_env[*]:+ with ${extra_env[*]}}" \
  LD_PRELOAD="$preload" "${extra_env[@]}" timeout -k 10 "$limit" "$prog" "$@"
exit "$status"
