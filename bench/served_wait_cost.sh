#!/usr/bin/env bash
# Served waits side by side: `perf bench futex hash` (every thread calls
# FUTEX_WAIT_PRIVATE through syscall() with a stale value on words of its
# own, so each operation is one wait that returns EAGAIN), on the kernel
# and under each shim given (PARKLOT_SYSCALL_FUTEX=1), every configuration
# once per repetition, repetitions interleaved. Prints, per configuration,
# the median [min - max] of perf's per-thread rate, the ratio of the
# medians to the kernel's, and the process's CPU time per operation
# (user + system from getrusage, over perf's operation count: the whole
# call, perf's loop included).
#
#   bench/served_wait_cost.sh [--reps=N] [--threads=N] [--secs=N] NAME=SHIM...
# e.g.
#   bazel build -c opt //preload:libparklot_preload.so &&
#   bench/served_wait_cost.sh --threads=2 \
#       parklot=bazel-bin/preload/libparklot_preload.so
# Needs perf (linux-perf) and python3.
set -euo pipefail
reps=5
threads=2
secs=2
while :; do
  case "${1:-}" in
    --reps=*) reps=${1#--reps=}; shift ;;
    --threads=*) threads=${1#--threads=}; shift ;;
    --secs=*) secs=${1#--secs=}; shift ;;
    *) break ;;
  esac
done
configs=(kernel "$@")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((r = 0; r < reps; r++)); do
  for c in "${configs[@]}"; do
    name=${c%%=*}
    envs=(PARKLOT_UNUSED=1)
    if [ "$name" != kernel ]; then
      envs=(LD_PRELOAD="$(readlink -f "${c#*=}")" PARKLOT_SYSCALL_FUTEX=1)
    fi
    # The rusage line (usr sys, in s) and perf's summary line.
    python3 - "$out/$name" "$threads" "$secs" "${envs[@]}" <<'PY'
import os, re, subprocess, sys
path, threads, secs, envs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
env = dict(os.environ)
for e in envs:
    k, v = e.split("=", 1)
    env[k] = v
before = os.times()
p = subprocess.run(["perf", "bench", "futex", "hash", "-t", str(threads),
                    "-r", secs, "-s"], env=env, capture_output=True, text=True,
                   timeout=120)
after = os.times()
m = re.search(r"Averaged (\d+) operations/sec", p.stdout)
if p.returncode != 0 or not m:
    sys.exit("perf bench futex hash failed: " + p.stdout + p.stderr)
rate = int(m.group(1))  # per thread
cpu = (after.children_user - before.children_user) + \
      (after.children_system - before.children_system)
ops = rate * threads * int(secs)
with open(path, "a") as f:
    f.write(f"{rate} {cpu * 1e9 / ops}\n")
PY
  done
done
python3 - "$out" "${configs[@]}" <<'PY'
import os, statistics, sys
out, configs = sys.argv[1], [c.split("=", 1)[0] for c in sys.argv[2:]]
rows = {}
for name in configs:
    vals = [tuple(map(float, l.split())) for l in open(os.path.join(out, name))]
    rows[name] = ([v[0] for v in vals], [v[1] for v in vals])
k = statistics.median(rows["kernel"][0])
print(f"{'configuration':14s} {'ops/s per thread':>18s} {'[min - max]':>22s} "
      f"{'x kernel':>9s} {'CPU ns/op':>10s} {'[min - max]':>14s}")
for name in configs:
    r, c = rows[name]
    print(f"{name:14s} {statistics.median(r) / 1e6:17.2f}M "
          f"[{min(r) / 1e6:7.2f}M - {max(r) / 1e6:7.2f}M] "
          f"{statistics.median(r) / k:8.1f}x {statistics.median(c):10.1f} "
          f"[{min(c):5.1f} - {max(c):5.1f}]")
PY
