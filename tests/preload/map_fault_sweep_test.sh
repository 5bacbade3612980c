#!/usr/bin/env bash
# Fails each mapping the shim makes in turn (docs/design.md section 6,
# invariant 7; docs/testing.md): for N = 1, 2, 3, ... runs the workload under
# the shim, traced by map_fault_tracer --fail=N (ptrace: no code in the
# program changes), so that the N-th mapping the shim (or its diagnostics
# object) asks glibc's mmap for fails with ENOMEM, until a run makes fewer
# than N mappings. Every run must finish with the program's checks passed,
# within its limit, never by a signal (an abort is a failure); a failed
# mapping must cost at most one line of the shim's on stderr.
#
#   map_fault_sweep_test.sh [options] TRACER PROGRAM [ARGS...]
#     --env=NAME=VALUE   environment for every run (repeatable; @WORK@ in
#                        VALUE is a scratch directory)
#     --syscall-stops    the tracer stops every system call (PTRACE_SYSCALL)
#                        rather than mmap only (a seccomp filter): slower
#     --max-n=N          stop after N (default 64: a bound, not a sample)
#     --expect=BYTES     the run with none failed must map BYTES once or
#                        more (repeatable): the sweep reaches that mapping
#     --timeout=SECONDS  limit per run (default 60)
set -uo pipefail

limit=60
max_n=64
extra_env=()
expect=()
tracer_opts=()
while [ $# -gt 0 ]; do
  case "$1" in
    --env=*) extra_env+=("${1#--env=}") ;;
    --syscall-stops) tracer_opts+=("$1") ;;
    --max-n=*) max_n=${1#--max-n=} ;;
    --expect=*) expect+=("${1#--expect=}") ;;
    --timeout=*) limit=${1#--timeout=} ;;
    --) shift; break ;;
    -*) echo "map_fault_sweep_test.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
  shift
done
[ $# -ge 2 ] || { echo "usage: map_fault_sweep_test.sh [options] TRACER PROGRAM [ARGS...]" >&2; exit 2; }

root="${TEST_SRCDIR:+$TEST_SRCDIR/${TEST_WORKSPACE:-parklot}}"
root="${root:-$PWD}"
shim="$root/preload/libparklot_preload.so"
[ -f "$shim" ] || shim="$PWD/preload/libparklot_preload.so"
[ -f "$shim" ] || { echo "FAIL: shim not found at $shim"; exit 1; }
tracer="$1"
prog="$2"
shift 2
[ -x "$tracer" ] || tracer="$root/$tracer"
[ -x "$prog" ] || prog="$root/$prog"
[ -x "$tracer" ] || { echo "FAIL: tracer $tracer not found"; exit 1; }
[ -x "$prog" ] || { echo "FAIL: program $prog not found"; exit 1; }

work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/map_fault.XXXXXX")
trap 'rm -rf "$work"' EXIT
# @WORK@ in an --env value: a scratch directory (report and profile paths).
for i in "${!extra_env[@]}"; do extra_env[$i]=${extra_env[$i]//@WORK@/$work}; done

status=0
runs=0
base_lines=0  # the shim's lines with no mapping failed
# Runs the workload (the arguments after $1) failing mapping $1 (0: none). Sets `injected` to the
# size of the mapping it failed ("" if the run made fewer than $1).
run_one() {
  local n=$1 log="$work/log.$1" out="$work/out.$1"
  shift
  : >"$log"
  # The tracer outside the preload and the extra environment: they are the
  # program's. timeout(1)'s SIGTERM ends the tracer, and PTRACE_O_EXITKILL
  # every task it traces.
  timeout -k 10 "$limit" "$tracer" "${tracer_opts[@]}" --fail="$n" --log="$log" -- \
    env "${extra_env[@]}" LD_PRELOAD="$shim" "$prog" "$@" >"$out" 2>&1
  local rc=$?
  runs=$((runs + 1))
  injected=$(sed -n "s/^map_fault: pid [0-9]* #$n \([0-9]*\) bytes failed$/\1/p" "$log" | head -1)
  local made
  made=$(grep -c '^map_fault:' "$log")
  local what="no mapping failed"
  [ -n "$injected" ] && what="mapping #$n ($injected bytes) failed"
  local lines
  lines=$(grep -c '^parklot:' "$out")
  if [ "$rc" -eq 77 ]; then
    echo "SKIP: N=$n: $(grep SKIP "$out" | head -1)"
    return 77
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "FAIL: N=$n: $what: timed out after ${limit}s"
  elif [ "$rc" -gt 128 ]; then
    echo "FAIL: N=$n: $what: killed by signal $((rc - 128))"
  elif [ "$rc" -eq 70 ] && grep -q '^map_fault_tracer: FATAL' "$out"; then
    echo "FAIL: N=$n: the tracer could not go on: $(grep '^map_fault_tracer: FATAL' "$out" | head -1)"
  elif [ "$rc" -ne 0 ]; then
    echo "FAIL: N=$n: $what: exit status $rc"
  elif [ "$lines" -gt $((base_lines + 1)) ]; then
    echo "FAIL: N=$n: $what: $lines lines from the shim, want at most $((base_lines + 1))"
    rc=1
  else
    echo "ok: N=$n: $what; $made mappings counted; shim lines: $lines"
    return 0
  fi
  status=1
  echo "--- output:"
  tail -n 30 "$out"
  echo "--- mappings:"
  cat "$log"
  return 1
}

echo "=== $(basename "$prog") $* with ${extra_env[*]:-no extra environment}"
run_one 0 "$@"
[ $? -eq 77 ] && exit 0
base_lines=$(grep -c '^parklot:' "$work/out.0")
for bytes in "${expect[@]}"; do
  if ! grep -q "^map_fault: pid [0-9]* #[0-9]* $bytes bytes ok$" "$work/log.0"; then
    echo "FAIL: the workload made no mapping of $bytes bytes (the tracer did"
    echo "      not see it, or the workload no longer reaches it):"
    cat "$work/log.0"
    status=1
  fi
done
n=1
while [ "$n" -le "$max_n" ]; do
  run_one "$n" "$@"
  [ -n "$injected" ] || break
  n=$((n + 1))
done
if [ "$n" -gt "$max_n" ]; then
  echo "note: stopped at --max-n=$max_n"
fi
echo "$runs runs"
[ "$status" -eq 0 ] && echo "PASS" || echo "FAIL"
exit "$status"
