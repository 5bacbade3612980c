#!/usr/bin/env bash
# futex_breakdown: per-request cost of one futex_schbench configuration,
# kernel vs the shim, from the outside: futex system calls (perf's
# syscalls:sys_enter_futex tracepoint), context switches (voluntary and
# involuntary, getrusage via /usr/bin/time), CPU time; and, for the shim,
# its PARKLOT_STATS lines (bucket-lock contention, parks, forwarded wakes).
# Runs one measurement child of futex_schbench per line, interleaved
# kernel/shim for REPS repetitions.
#
#   bench/futex_breakdown.sh FUTEX_SCHBENCH SHIM MxW [DURATION] [REPS]
# e.g.
#   bench/futex_breakdown.sh bazel-bin/bench/futex_schbench \
#       bazel-bin/preload/libparklot_preload.so 2x64 1s 3
# Needs perf (perf_event_paranoid <= 1 or root) and /usr/bin/time.
set -euo pipefail
bin="$1" shim="$2" pair="$3" dur="${4:-1s}" reps="${5:-3}"
m="${pair%x*}" w="${pair#*x}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
one() {  # config label
  local cfg="$1" label="$2"
  local envs=(PARKLOT_UNUSED=1)
  if [ "$cfg" = parklot/shim ]; then
    envs=(LD_PRELOAD="$shim" PARKLOT_SYSCALL_FUTEX=1 PARKLOT_STATS=1)
  fi
  perf stat -x, -o "$tmp/perf" -e 'syscalls:sys_enter_futex' \
    /usr/bin/time -o "$tmp/time" -f '%w %c %U %S' \
    env "${envs[@]}" "$bin" --child="$cfg" --child_m="$m" --child_w="$w" --duration="$dur" \
    >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err" >&2; return 1; }
  local futex req el p99 vol inv usr sys
  futex=$(awk -F, '/sys_enter_futex/ {print $1}' "$tmp/perf")
  read -r vol inv usr sys <"$tmp/time"
  req=$(sed -n 's/.* requests=\([0-9]*\).*/\1/p' "$tmp/out")
  el=$(sed -n 's/.* elapsed_ns=\([0-9]*\).*/\1/p' "$tmp/out")
  p99=$(sed -n 's/.* p99=\([0-9]*\).*/\1/p' "$tmp/out")
  awk -v l="$label" -v f="$futex" -v r="$req" -v e="$el" -v p="$p99" \
      -v vo="$vol" -v iv="$inv" -v u="$usr" -v s="$sys" 'BEGIN {
    printf "%-8s rps=%8.0f p99=%7.1fus futex/req=%5.2f vcsw/req=%5.2f icsw/req=%6.3f cpu_us/req=%6.2f (usr %5.2f sys %5.2f)\n",
      l, r*1e9/e, p/1000, f/r, vo/r, iv/r, (u+s)*1e6/r, u*1e6/r, s*1e6/r }'
  if [ "$cfg" = parklot/shim ]; then
    grep -E 'bucket|futex wakes forwarded|^parks|^unparks|futex served' "$tmp/err" | sed "s/^/    /" || true
  fi
}
echo "futex_breakdown $pair, $dur per run, $reps interleaved repetitions"
for ((i = 0; i < reps; i++)); do
  one kernel/default kernel
  one parklot/shim shim
done
