#!/bin/sh
# parklot's many-core benchmark kit: runs, side by side, in under 10
# minutes on a machine with 16 or more CPUs,
#   1. the suite's scenario 2 (contended mutexes: glibc, std, absl, a raw
#      futex mutex, parklot) at 16, 32 and 64 threads, unpinned and pinned;
#   2. futex_hash (perf bench futex hash's storm) at 16, 64, 256 and 1,024
#      threads: the kernel's private hash (default, global, fixed sizes)
#      against parklot's table policies, unpinned and pinned;
#   3. futex_schbench (schbench's message threads waking workers through
#      raw futex calls) with one worker per CPU in all (2 and 4 message
#      threads) and twice that, the kernel's hash against the shim serving
#      the calls (PARKLOT_SYSCALL_FUTEX=1);
# then prints every parklot-to-baseline ratio again, one "ratio" line
# each. Needs only glibc (MANIFEST says which version); the kit's lib/
# carries the rest.
#
#   ./run.sh [--quick] [--out DIR]
#
# --quick: a few seconds of tiny runs that only show the kit works (its
# figures mean nothing). --out: where the reports go (default
# ./parklot-kit-<date>); the full terminal output is also in run.log there.
set -eu

kit=$(cd "$(dirname "$0")" && pwd)
quick=0
out=""
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1 ;;
    --out) [ $# -ge 2 ] || { echo "run.sh: --out needs a folder" >&2; exit 2; }
      out=$2; shift ;;
    --out=*) out=${1#--out=} ;;
    -h | --help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (--quick, --out DIR)" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$out" ] || out=./parklot-kit-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
out=$(cd "$out" && pwd)

# The kit's shared objects first, for the benchmarks and for the shim they
# preload into their children.
LD_LIBRARY_PATH=$kit/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
shim=$kit/lib/libparklot_preload.so

# The glibc the kit was built against, at least (MANIFEST's "needs").
need=$(sed -n 's/^needs: .* glibc \([0-9.]*\) or later.*/\1/p' "$kit/MANIFEST")
have=$(getconf GNU_LIBC_VERSION | sed 's/^glibc //')
if [ -n "$need" ] && [ "$(printf '%s\n%s\n' "$need" "$have" |
  sort -t. -k1,1n -k2,2n | head -1)" != "$need" ]; then
  echo "run.sh: this machine has glibc $have; the kit needs $need or later" >&2
  exit 1
fi
if ! "$kit/bin/futex_hash" --list_configs >/dev/null 2>&1; then
  echo "run.sh: the kit's programs do not start here; what the loader says:" >&2
  ldd "$kit/bin/futex_hash" "$kit/bin/suite" "$kit/bin/futex_schbench" "$shim" >&2 || true
  exit 1
fi

cpus=$(getconf _NPROCESSORS_ONLN)
if [ "$quick" = 1 ]; then
  suite_args="--tiny --threads=2,4 --window_scale=4"
  hash_args="--threads=2,4 --repetitions=1 --duration=20ms"
  hash_configs=kernel/default,kernel/1024,parklot/adaptive,parklot/fixed:1024
  hash_pins=""
  sch_args="--reps=2 --duration=30ms"
  sch_pairs=1x2
  sch_configs=kernel/default,kernel/global,parklot/shim
else
  suite_args="--threads=16,32,64"
  hash_args="--threads=16,64,256,1024 --repetitions=5 --duration=300ms"
  hash_configs=kernel/default,kernel/global,kernel/1024,kernel/65536,parklot/adaptive,parklot/threads,parklot/cpus,parklot/fixed:16384
  hash_pins="--pin"
  sch_args="--reps=3 --duration=1s"
  # One worker per CPU in all, as schbench's default, with 2 and 4 message
  # threads; then twice as many workers as CPUs.
  w2=$((cpus / 2)); [ "$w2" -ge 1 ] || w2=1
  w4=$((cpus / 4)); [ "$w4" -ge 1 ] || w4=1
  # (Distinct pairs only: on a small machine the three can coincide.)
  sch_pairs=$(printf '%s\n' "2x$w2" "4x$w4" "4x$w2" | awk '!seen[$0]++' |
    paste -sd, -)
  sch_configs=""
fi

# Runs a benchmark into $out/NAME.txt and the terminal; its exit status
# goes to $out/NAME.rc (checked at the end).
run() {
  name=$1
  shift
  echo
  echo "==== $name: $*"
  { "$@" 2>&1; echo $? >"$out/$name.rc"; } | tee "$out/$name.txt"
}

{
  head -1 "$kit/MANIFEST"
  echo "machine: $(uname -srm), $cpus CPUs online, $(getconf GNU_LIBC_VERSION)"
  echo "model: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "started: $(date -u '+%Y-%m-%d %H:%M UTC')"
  [ "$quick" = 1 ] && echo "quick mode: tiny runs, figures meaningless"

  run suite2 "$kit/bin/suite" --scenarios=2 $suite_args --plots=false \
    --out="$out/suite"
  run futex_hash "$kit/bin/futex_hash" $hash_args --configs=$hash_configs \
    --json_out="$out/futex_hash.json"
  for pin in $hash_pins; do
    run futex_hash_pinned "$kit/bin/futex_hash" $hash_args $pin \
      --configs=$hash_configs --json_out="$out/futex_hash_pinned.json"
  done
  run schbench "$kit/bin/futex_schbench" --shim="$shim" --pairs=$sch_pairs \
    $sch_args ${sch_configs:+--configs=$sch_configs}

  echo
  echo "==== ratios (parklot / baseline; > 1 is parklot ahead for rates, behind for times)"
  # Scenario 2: parklot's rows, ops/s and CPU per op as ratios of glibc's.
  awk '/^== 2\. contended/ { pin = ($0 ~ /\(pinned\)/) ? "pinned" : "unpinned" }
       /^== / && !/^== 2\./ { pin = "" }
       pin != "" && $5 == "parklot" {
         printf "ratio suite2 %s %s %s %s %s: ops/s %s glibc, cpu/op %s glibc\n",
                pin, $1, $2, $3, $4, $10, $12 }' "$out/suite2.txt"
  # futex_hash: each parklot policy against the kernel's best size and its
  # default, and the default policy against the best fixed table.
  for f in futex_hash futex_hash_pinned; do
    [ -f "$out/$f.txt" ] || continue
    awk -v run="$f" '
      function num(s) {
        m = 1
        if (s ~ /k$/) m = 1e3; else if (s ~ /M$/) m = 1e6; else if (s ~ /G$/) m = 1e9
        sub(/[kMG]$/, "", s)
        return s * m
      }
      function flush() {
        for (k = 1; k <= n; k++) {
          c = order[k]
          if (c ~ /^parklot\//)
            printf "ratio %s T=%s %s: %.2fx the best kernel size (%s), %s kernel/default\n",
                   run, t, c, (best > 0 ? rate[c] / best : 0), bestname, vsdef[c]
        }
        n = 0; best = 0; bestname = "none"
      }
      /^futex hash: [0-9]+ threads/ { flush(); t = $3 }
      /^(kernel|parklot)\// {
        for (i = 2; i <= NF; i++) if ($i ~ /^\[/) break
        if (i > NF) next
        order[++n] = $1; rate[$1] = num($(i - 1)); vsdef[$1] = $NF
        if ($1 ~ /^kernel\// && rate[$1] > best) { best = rate[$1]; bestname = $1 }
      }
      /^growing vs fixed table:/ { sub(/^growing vs fixed table: /, ""); printf "ratio %s T=%s growing vs fixed: %s\n", run, t, $0 }
      END { flush() }' "$out/$f.txt"
  done
  # futex_schbench: the shim against the kernel's default hash and its best.
  awk '/^futex schbench: / { pair = $3 "x" $7 }
       /^parklot\/shim +[0-9]/ { printf "ratio schbench %s: parklot/shim requests/s %s kernel/default\n", pair, $6 }
       /^parklot\/shim vs the best/ { sub(/^parklot\/shim /, ""); printf "ratio schbench %s: parklot/shim %s\n", pair, $0 }' \
    "$out/schbench.txt"
  echo
  echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg); reports in $out"
} 2>&1 | tee "$out/run.log"

status=0
for rc in "$out"/*.rc; do
  if [ "$(cat "$rc")" != 0 ]; then
    echo "run.sh: $(basename "$rc" .rc) failed (exit $(cat "$rc"))" >&2
    status=1
  fi
done
exit $status
