#!/usr/bin/env bash
# The Open POSIX Test Suite's conformance tests of the interfaces the shim
# replaces (posixtestsuite 1.5.2, Debian's source package:
# conformance/interfaces/pthread_* and sem_*), built against the installed
# libc and run three ways: on glibc, under the shim (LD_PRELOAD), and under
# the shim with every key in one bucket (PARKLOT_POLICY=fixed:1). Every test
# must give glibc's result the other two ways (PASS or not: the suite also
# has tests glibc fails, and their result must not change either).
#
#   open_posix_tests.sh [--tarball=PATH] [--shim=PATH] [--jobs=N]
#                       [--timeout=S] [--reruns=N] [--only=REGEX]
#                       [--work=DIR]
#     --tarball=PATH  posixtestsuite_1.5.2.orig.tar.gz (default: the cache
#                     `tools/setup --posixtestsuite` fills,
#                     .cache/posixtestsuite/ in the source tree)
#     --timeout=S     each run's limit (default 60: some tests hang by
#                     design, and the suite counts that as HUNG)
#     --reruns=N      run each test whose results differ N more times each
#                     way, to tell timing flakes from differences (default 2)
#     --only=REGEX    only the tests whose names (INTERFACE/N-M) match
#     --work=DIR      build and run there and keep it (default: a scratch
#                     folder removed at exit)
#
# Without the tarball it skips (exit 0 with a note). Tagged manual in BUILD:
# it builds 463 programs and takes about 20 minutes on two cores.
#
# The suite's own build (its Makefile with Debian's LDFLAGS): each test is
# one C file, compiled with `-O2 -D_POSIX_C_SOURCE=200112L -std=gnu99
# -Iinclude ... -D_GNU_SOURCE -lpthread -lrt` (here with -w for -Wall
# -Werror: warnings of today's GCC are not what is tested); a file without
# main() is only compiled (the suite's build-only tests). Results are its exit
# codes: 0 PASS, 1 FAIL, 2 UNRESOLVED, 4 UNSUPPORTED, 5 UNTESTED; past the
# limit HUNG, killed by a signal SIGNALED(N). The NUMBER-NUMBER.sh
# "tests" of these folders only print a note and are not run.
set -uo pipefail

# shellcheck source=tests/util/suite_setup.sh
source "$(dirname "$0")/../util/suite_setup.sh" ||
  { echo "FAIL: tests/util/suite_setup.sh not found"; exit 1; }
# The source tree (for the cache): where this script really is.
tree=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
tarball="$tree/.cache/posixtestsuite/posixtestsuite_1.5.2.orig.tar.gz"
limit=60
reruns=2
option() {  # this script's own options (suite_options)
  case "$1" in
    --timeout=*) limit=${1#--timeout=} ;;
    --reruns=*) reruns=${1#--reruns=} ;;
    *) return 1 ;;
  esac
}
suite_options "$@"
if [ ! -f "$tarball" ]; then
  echo "SKIP: $tarball not found (tools/setup --posixtestsuite fetches it)"
  exit 0
fi
suite_setup open_posix cwd

# Tests whose result under the shim differs from glibc's for a reason
# docs/compatibility.md ("The Open POSIX Test Suite") accepts: a barrier or
# condvar destroyed with a thread blocked in it (glibc's destroy waits for
# ever: HUNG; the shim returns 0: PASS), and an rwlock unlocked while not
# held (glibc 0, the shim EPERM, where the test wants 0 or EINVAL: FAIL).
accepted=" pthread_barrier_destroy/2-1 pthread_cond_destroy/speculative/4-1 pthread_rwlock_unlock/4-1 "

# --- sources and build ---------------------------------------------------------
tar xzf "$tarball" -C "$src" --strip-components=1 || { echo "FAIL: tar"; exit 1; }
ifc="$src/conformance/interfaces"
mapfile -t tests < <(cd "$ifc" && find pthread_* sem_* -name '[0-9]*-*.c' | sed 's/\.c$//' | sort |
  { if [ -n "$only" ]; then grep -E "$only"; else cat; fi; })
((${#tests[@]})) || { echo "FAIL: no test matches"; exit 1; }

build_one() {  # name
  local t=$1 out="$bin/${1//\//.}" kind=run
  grep -q 'main *(' "$ifc/$t.c" || kind=buildonly
  if [ "$kind" = run ]; then
    gcc -g -O2 -w -D_POSIX_C_SOURCE=200112L -std=gnu99 -I"$src/include" \
      "$ifc/$t.c" -o "$out" -D_GNU_SOURCE -lpthread -lrt >"$out.log" 2>&1
  else
    gcc -g -O2 -w -D_POSIX_C_SOURCE=200112L -std=gnu99 -I"$src/include" \
      -c "$ifc/$t.c" -o "$out.o" -D_GNU_SOURCE >"$out.log" 2>&1
  fi
  local rc=$?
  if [ $rc -ne 0 ]; then echo build-failed; elif [ "$kind" = buildonly ]; then echo buildonly; else echo built; fi >"$out.build"
}
# One run: the suite's verdict, the output in $res/NAME.MODE.RUN.out.
run_one() {  # name mode run
  local t=$1 mode=$2 r=$3 f="${1//\//.}" rc v
  local -a envv=(LC_ALL=C)
  case "$mode" in
    shim) envv+=(LD_PRELOAD="$preload") ;;
    fixed1) envv+=(LD_PRELOAD="$preload" PARKLOT_POLICY=fixed:1) ;;
  esac
  # A folder of its own for each run, for the files a test leaves.
  local cwd="$work/cwd/$f.$mode.$r"
  mkdir -p "$cwd"
  # timeout runs the test in a process group of its own (its pid); what is
  # left of the group once timeout returns (a forked child that blocks
  # SIGTERM outlives it) is killed.
  local pid
  (cd "$cwd" && exec env -u LD_PRELOAD -u PARKLOT_POLICY "${envv[@]}" \
    timeout -k 5 "$limit" "$bin/$f") >"$res/$f.$mode.$r.out" 2>&1 </dev/null &
  pid=$!
  { wait "$pid"; } 2>/dev/null  # no job report of a crash on stderr
  rc=$?
  kill -KILL -- "-$pid" 2>/dev/null
  rm -rf "$cwd"
  case $rc in
    0) v=PASS ;; 1) v=FAIL ;; 2) v=UNRESOLVED ;; 4) v=UNSUPPORTED ;; 5) v=UNTESTED ;;
    124|137) v=HUNG ;; *) if [ $rc -gt 128 ]; then v="SIGNALED($((rc - 128)))"; else v="EXIT($rc)"; fi ;;
  esac
  echo "$v" >"$res/$f.$mode.$r"
}
export -f build_one run_one
export src ifc bin res preload limit work

echo "building ${#tests[@]} Open POSIX tests with $jobs jobs"
printf '%s\n' "${tests[@]}" | xargs -P "$jobs" -n 1 bash -c 'build_one "$1"' _
runnable=() buildonly=() unbuilt=()
for t in "${tests[@]}"; do
  case "$(cat "$bin/${t//\//.}.build")" in
    built) runnable+=("$t") ;;
    buildonly) buildonly+=("$t") ;;
    *) unbuilt+=("$t") ;;
  esac
done
echo "running ${#runnable[@]} tests x 3 ways with $jobs jobs, ${limit}s each" \
  "(${#buildonly[@]} build-only; ${#unbuilt[@]} did not build: ${unbuilt[*]:-none})"

# --- run -----------------------------------------------------------------------
# One job per test, its three ways in turn; the tests that open named
# semaphores or shared memory in one job of their own, in turn: some share
# a fixed name (sem_init/3-2 and 3-3, sem_unlink/2-2 and 9-1) and would
# unlink each other's objects, or their own, run side by side.
run_unit() {  # run name... : each test on glibc, under the shim, with fixed:1
  local r=$1 t m
  shift
  for t in "$@"; do
    for m in glibc shim fixed1; do run_one "$t" "$m" "$r"; done
  done
}
export -f run_unit
run_units() {  # run name...
  local r=$1 t named=() rest=()
  shift
  for t in "$@"; do
    if grep -q 'sem_open\|shm_open' "$ifc/$t.c"; then named+=("$t"); else rest+=("$t"); fi
  done
  { ((${#named[@]})) && echo "$r ${named[*]}"
    ((${#rest[@]})) && printf "$r %s\n" "${rest[@]}"; } |
    xargs -P "$jobs" -L 1 bash -c 'run_unit "$@"' _
}
run_units 1 "${runnable[@]}"

verdicts() {  # name mode: the verdicts of every run, joined by commas
  local f="${1//\//.}" r v="" x
  for ((r = 1; ; r++)); do
    [ -f "$res/$f.$2.$r" ] || break
    x=$(cat "$res/$f.$2.$r")
    v="${v:+$v,}$x"
  done
  echo "${v:-missing}"
}
# Reruns of the tests whose results differ, every way, to tell timing flakes
# (results that vary from run to run, glibc's too) from differences.
differing=()
for t in "${runnable[@]}"; do
  f="${t//\//.}"
  g=$(cat "$res/$f.glibc.1") s=$(cat "$res/$f.shim.1") x=$(cat "$res/$f.fixed1.1")
  [ "$g" = "$s" ] && [ "$g" = "$x" ] || differing+=("$t")
done
if ((${#differing[@]})) && ((reruns > 0)); then
  echo "rerunning the ${#differing[@]} tests whose results differ, $reruns more times each way"
  for ((r = 2; r <= reruns + 1; r++)); do run_units "$r" "${differing[@]}"; done
fi

# --- table ---------------------------------------------------------------------
# Counts are of the first runs; the table lists every test that did not
# pass every way, with all its runs.
all_are() {  # verdicts v: every run gave v
  local IFS=, x
  for x in $1; do [ "$x" = "$2" ] || return 1; done
}
status=0 real=0 flaky=0 acceptedn=0
declare -A count
printf '%-36s %-24s %-24s %-24s %s\n' test glibc shim fixed:1 ""
for t in "${runnable[@]}"; do
  g=$(verdicts "$t" glibc) s=$(verdicts "$t" shim) x=$(verdicts "$t" fixed1)
  for m in glibc shim fixed1; do
    v=$(cat "$res/${t//\//.}.$m.1")
    count[$m.$v]=$((${count[$m.$v]:-0} + 1))
  done
  note=""
  g1=${g%%,*}
  all_are "$g" "$g1" || g1=""
  # Each way on its own: the same when all its runs gave glibc's one
  # result, flaky when some did (or glibc's runs disagree), else it differs.
  kind=same
  for v in "$s" "$x"; do
    if [ -n "$g1" ] && all_are "$v" "$g1"; then
      :
    elif [ -z "$g1" ] || [[ ",$v," == *",$g1,"* ]]; then
      [ "$kind" = same ] && kind=flaky
    else
      kind=differs
    fi
  done
  case $kind in
    same) note="" ;;
    flaky) note="flaky"; flaky=$((flaky + 1)) ;;
    differs)
      if [[ "$accepted" == *" $t "* ]]; then
        note="differs as accepted (docs/compatibility.md)"
        acceptedn=$((acceptedn + 1))
      else
        note="DIFFERS"
        real=$((real + 1))
        status=1
      fi ;;
  esac
  [ -z "$note" ] && [ "$g" = PASS ] && continue  # the table lists the rest
  printf '%-36s %-24s %-24s %-24s %s\n' "$t" "$g" "$s" "$x" "$note"
done
echo "(tests that passed every way are not listed)"
for t in "${runnable[@]}"; do
  f="${t//\//.}"
  g=$(cat "$res/$f.glibc.1")
  for m in shim fixed1; do
    v=$(cat "$res/$f.$m.1")
    if [ "$v" != "$g" ]; then
      echo "--- $t on glibc: $g"
      tail -5 "$res/$f.glibc.1.out"
      echo "--- $t under $m: $v"
      tail -10 "$res/$f.$m.1.out"
    fi
  done
done
for m in glibc shim fixed1; do
  line=""
  for v in PASS FAIL UNRESOLVED UNSUPPORTED UNTESTED HUNG; do
    line+=" $v ${count[$m.$v]:-0},"
  done
  other=${#runnable[@]}
  for v in PASS FAIL UNRESOLVED UNSUPPORTED UNTESTED HUNG; do other=$((other - ${count[$m.$v]:-0})); done
  printf '%-8s%s other %d\n' "$m:" "$line" "$other"
done
echo "Open POSIX tests: ${#tests[@]} selected, ${#runnable[@]} run, ${#buildonly[@]} build-only," \
  "${#unbuilt[@]} did not build; $real differ, $flaky flaky, $acceptedn differ as accepted"
[ "$status" -eq 0 ] && echo PASS
exit "$status"
