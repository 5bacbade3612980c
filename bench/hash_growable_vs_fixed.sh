#!/bin/bash
# The cost of the table's ability to grow, in futex_hash, at equal size:
# a growable table (policy `threads`, which retires old tables and keeps
# them mapped) against an immutable one of the same size, with a 2x2 at
# each thread count T (S = the size the policy reaches at T):
#   grow  S     parklot/threads, defaults (the `threads` policy as it grows)
#   fixed S     parklot/threads, PARKLOT_BUCKETS=S PARKLOT_MAX_BUCKETS=S
#               (the table starts at its cap: immutable)
#   grow  1024  parklot/threads, PARKLOT_BUCKETS=1024 (cap far above: stays
#               growable)
#   fixed 1024  parklot/fixed:1024
#   ctl   1024  parklot/threads, PARKLOT_BUCKETS=PARKLOT_MAX_BUCKETS=1024 (a
#               check: must match fixed:1024)
# Each cell is one futex_hash child; the five run in turn within each
# repetition (interleaved), and the summary gives the median [min-max] of
# waits/s and of process CPU ns per wait (less sensitive than wall time to
# other load on the machine), and the table size every run reported; the
# last column is the CPU ratio to the same size immutable (grow_*), or of
# size S to 1024 (fixed_S). Needs python3.
#   bazel build //bench:futex_hash
#   bench/hash_growable_vs_fixed.sh bazel-bin/bench/futex_hash [REPS] [T,T,...] [DUR]
set -euo pipefail
bin=$1
reps=${2:-7}
threads=${3:-2,8,32,128,256}
dur=${4:-300ms}
out=$(mktemp -d)
# The size the threads policy reaches: roundup_pow2(4 x T), at least 16.
size_for() { local s=16; while ((s < 4 * $1)); do s=$((s * 2)); done; echo $s; }
run() {  # NAME T CONFIG REP [ENV...]
  local name=$1 t=$2 cfg=$3 rep=$4
  shift 4
  env "$@" "$bin" --threads="$t" --repetitions=1 --duration="$dur" \
    --configs="$cfg" --json_out="$out/$name.$t.$rep.json" >/dev/null 2>&1 ||
    echo "run $name T=$t rep $rep failed" >&2
}
for ((rep = 0; rep < reps; rep++)); do
  for t in ${threads//,/ }; do
    s=$(size_for "$t")
    run grow_S "$t" parklot/threads "$rep"
    run fixed_S "$t" parklot/threads "$rep" PARKLOT_BUCKETS="$s" PARKLOT_MAX_BUCKETS="$s"
    run grow_1024 "$t" parklot/threads "$rep" PARKLOT_BUCKETS=1024
    run fixed_1024 "$t" parklot/fixed:1024 "$rep"
    run ctl_1024 "$t" parklot/threads "$rep" PARKLOT_BUCKETS=1024 PARKLOT_MAX_BUCKETS=1024
  done
  echo "repetition $((rep + 1))/$reps done" >&2
done
python3 - "$out" <<'PY'
import glob, json, os, statistics, sys
cells = {}  # (T, cell) -> (waits/s in M, CPU ns per wait, table sizes)
for path in glob.glob(os.path.join(sys.argv[1], "*.json")):
    name, t, _, _ = os.path.basename(path).rsplit(".", 3)
    for b in json.load(open(path))["benchmarks"]:
        if b.get("run_type") == "iteration" and not b.get("error_occurred"):
            c = cells.setdefault((int(t), name), ([], [], set()))
            c[0].append(b["ops_per_s"] / 1e6)
            c[1].append(b["cpu_time"])
            c[2].add(int(b["table_size"]))
order = ["grow_S", "fixed_S", "grow_1024", "fixed_1024", "ctl_1024"]
ref = {"grow_S": "fixed_S", "grow_1024": "fixed_1024", "fixed_S": "fixed_1024"}
fmt = lambda v, f: f"{statistics.median(v):{f}} [{min(v):{f}}-{max(v):{f}}]"
print("| T | cell | table | M waits/s | CPU ns/wait | CPU ns/wait vs |")
print("|---|---|---|---|---|---|")
for t in sorted({k[0] for k in cells}):
    for n in order:
        if (t, n) not in cells: continue
        ops, cpu, sizes = cells[(t, n)]
        r = ref.get(n)
        vs = (f"{statistics.median(cpu) / statistics.median(cells[(t, r)][1]):.2f}x {r}"
              if (t, r) in cells else "")
        print(f"| {t} | {n} | {','.join(map(str, sorted(sizes)))} | "
              f"{fmt(ops, '.1f')} | {fmt(cpu, '.1f')} | {vs} |")
PY
rm -rf "$out"
