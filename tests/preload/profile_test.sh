#!/usr/bin/env bash
# PARKLOT_PROFILE (preload/diag/profile.h): profile_prog's locks, taken and
# released in functions of their own, must come out of google-pprof at the
# top of both views with plausible delays; the files' header, rows and
# memory map must be what google-pprof and Go's pprof parse; --png (through
# tools/parklot profile) must give a PNG; fork children write only into
# %p files; with profiling off there is no file and nothing mapped.
#
#   profile_test.sh SHIM PROG LAUNCHER
set -uo pipefail
root=$PWD
source "$root/tests/preload/shim_preload.sh"
# Absolute paths: the runs below happen in scratch folders.
shim_test_begin "$(readlink -f "$1")" "$(readlink -f "$2")" profile
launcher=$(readlink -f "$3")
command -v google-pprof >/dev/null || { echo "FAIL: google-pprof missing (tools/setup installs google-perftools)"; exit 1; }
command -v dot >/dev/null || { echo "FAIL: dot missing (tools/setup installs graphviz)"; exit 1; }

# run NAME MODE VAR=VALUE...: PROG MODE under the shim, stdout to
# $work/NAME.out; fails the test on a non-zero exit.
run() {
  local name=$1 mode=$2
  shift 2
  env "$@" LD_PRELOAD="$PRELOAD" timeout 60 "$prog" "$mode" \
    >"$work/$name.out" 2>"$work/$name.err"
  local rc=$?
  [ "$rc" -eq 0 ] || fail "$name: exit $rc: $(head -c 300 "$work/$name.err")"
}

# check_file FILE PERIOD: the header, the rows and the memory map.
check_file() {
  local f=$1 period=$2
  [ -s "$f" ] || { fail "$f: missing or empty"; return; }
  [ "$(sed -n 1p "$f")" = "--- contention:" ] || fail "$f: first line '$(sed -n 1p "$f")'"
  [ "$(sed -n 2p "$f")" = "cycles/second=1000000000" ] || fail "$f: line 2 '$(sed -n 2p "$f")'"
  [ "$(sed -n 3p "$f")" = "sampling period=$period" ] || fail "$f: line 3 '$(sed -n 3p "$f")'"
  grep -qE '^discarded samples=[0-9]+$' <(sed -n 4p "$f") || fail "$f: line 4 '$(sed -n 4p "$f")'"
  grep -qxF "# program: $(readlink -f "$prog")" "$f" || fail "$f: no '# program:' line naming $prog"
  # Between the header and the map: comments and rows only.
  local bad
  bad=$(awk 'NR > 4 && /^--- Memory map: ---$/ { exit } NR > 4 && !/^#/ && !/^[0-9]+ [1-9][0-9]* @( 0x[0-9a-f]+)+$/' "$f" | head -3)
  [ -z "$bad" ] || fail "$f: not a row: $bad"
  [ "$(grep -c '^--- Memory map: ---$' "$f")" = 1 ] || fail "$f: no single memory map sentinel"
  # The map is /proc/self/maps' format, with the program's code in it.
  bad=$(sed -n '/^--- Memory map: ---$/,$p' "$f" | sed 1d |
        grep -vE '^[0-9a-f]+-[0-9a-f]+ [-r][-w][-x][ps] [0-9a-f]+ [0-9a-f]+:[0-9a-f]+ [0-9]+ *( .*)?$' | head -3)
  [ -z "$bad" ] || fail "$f: not a map line: $bad"
  grep -qE " r-xp .* $(readlink -f "$prog")\$" "$f" || fail "$f: the program's code is not in the map"
  # Every row's first frame is a lock (a pseudo-frame, not code); its
  # second, the program's call, lies in an executable mapping of the map.
  awk 'function hex(s,   v, i) { v = 0; sub(/^0x/, "", s)
                                 for (i = 1; i <= length(s); ++i) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
                                 return v }
       /^--- Memory map: ---$/ { map = 1; next }
       map && $2 ~ /x/ { split($1, r, "-"); lo[++n] = hex(r[1]); hi[n] = hex(r[2]) }
       !map && / @ / { pc[++m] = hex($5) }
       END { for (i = 1; i <= m; ++i) { ok = 0; for (j = 1; j <= n; ++j) if (pc[i] >= lo[j] && pc[i] < hi[j]) ok = 1
                                         if (!ok) { printf "pc %x in no executable mapping\n", pc[i]; exit 1 } } }' "$f" ||
    fail "$f: a row's pc is outside the map"
}

# top FILE: google-pprof's flat list, "seconds name" per line.
top() {
  google-pprof --text "$prog" "$1" 2>"$work/pprof.err" |
    awk '$2 ~ /%$/ && $3 ~ /%$/ { print $1, $6 }'
}

# cum FILE: google-pprof's list by cumulative delay, "seconds name" per
# line (the program's functions, above the lock frames).
cum() {
  google-pprof --text --cum "$prog" "$1" 2>"$work/pprof.err" |
    awk '$2 ~ /%$/ && $3 ~ /%$/ { print $4, $6 }'
}

# expect_cum FILE WALL_S NAME...: each NAME has a cumulative delay above 0
# and below WALL_S seconds.
expect_cum() {
  local f=$1 wall=$2 list
  shift 2
  list=$(cum "$f")
  for name in "$@"; do
    awk -v n="$name" -v w="$wall" '$2 == n { found = 1; if (!($1 > 0 && $1 < w)) exit 1 } END { exit !found }' <<<"$list" ||
      fail "$f: $name not in the list with a delay in (0, $wall) s:
$list"
  done
}

# lock_names OUT: google-pprof's names (0x and 16 hex digits) of the locks
# OUT printed ("alpha=0x... beta=0x...").
lock_names() {
  sed -n 's/^alpha=0x\([0-9a-f]*\) beta=0x\([0-9a-f]*\)$/\1 \2/p' "$1" |
    while read -r a b; do
      printf '0x%016x 0x%016x\n' "$((16#$a))" "$((16#$b))"
    done
}

# expect_top FILE WALL_S NAME...: NAME... are the top entries of FILE's flat
# list, each with a delay above 0 and below WALL_S seconds. The flat list's
# top entries are the locks (each stack's innermost frame): NAME is then
# google-pprof's name of the lock's address (lock_names).
expect_top() {
  local f=$1 wall=$2
  shift 2
  local list want got
  list=$(top "$f")
  [ -n "$list" ] || { fail "$f: google-pprof gave no rows: $(head -c 300 "$work/pprof.err")"; return; }
  want=$(printf '%s\n' "$@" | sort | tr '\n' ' ')
  got=$(head -n $# <<<"$list" | awk '{ print $2 }' | sort | tr '\n' ' ')
  [ "$got" = "$want" ] || fail "$f: top entries '$got', want '$want'
$list"
  for name in "$@"; do
    awk -v n="$name" -v w="$wall" '$2 == n { found = 1; if (!($1 > 0 && $1 < w)) exit 1 } END { exit !found }' <<<"$list" ||
      fail "$f: $name's delay not in (0, $wall) s: $(grep " $name\$" <<<"$list")"
  done
}

cd "$work" || exit 1

# Two hot mutexes, every contended acquisition sampled.
run two_locks two_locks PARKLOT_PROFILE="$work/two.prof" PARKLOT_PROFILE_RATE=1
wall=$(awk -F= '/^wall_ns=/ { print $2 / 1e9 }' "$work/two_locks.out")
[ -n "$wall" ] || fail "two_locks: no wall time printed"
check_file two.prof 1
check_file two.prof.holders 1
# Both views: the locks on top (each stack's innermost frame), and under
# them the functions that took and released them. Two threads wait for
# each lock: up to twice the wall time.
read -r alpha beta < <(lock_names "$work/two_locks.out")
[ -n "$beta" ] || fail "two_locks: no lock addresses printed"
wall2=$(awk -v w="$wall" 'BEGIN { print 2 * w }')
expect_top two.prof "$wall2" "$alpha" "$beta"
expect_top two.prof.holders "$wall2" "$alpha" "$beta"
expect_cum two.prof "$wall2" take_alpha take_beta
expect_cum two.prof.holders "$wall2" drop_alpha drop_beta
grep -qE "^# lock $(printf '%#x' "$alpha")( \([^)]+\))?: first sampled wait at " two.prof ||
  fail "two.prof: no '# lock' line for alpha"

# Few long waits (about 35 of 8 ms per lock), at the default rate: every
# wait of 1 ms or more is kept, so both locks are on top in every run (at
# 1 in 100 contended acquisitions, most runs had neither).
for i in 1 2 3; do
  run "long$i" long_waits PARKLOT_PROFILE="$work/long$i.prof"
  lwall=$(awk -F= '/^wall_ns=/ { print 2 * $2 / 1e9 }' "$work/long$i.out")
  read -r alpha beta < <(lock_names "$work/long$i.out")
  check_file "long$i.prof" 1
  expect_top "long$i.prof" "$lwall" "$alpha" "$beta"
done

# A process that waited but sampled nothing says so in one line. one_wait
# waits once, tens of microseconds, here at one sample per second of wait:
# kept about once in 10^4 runs, but a loaded machine may keep the releasing
# thread off the CPU for milliseconds. So a run that sampled its wait (and
# wrote a profile) is run again, 5 times at most.
# run_unsampled NAME [VAR=VALUE...]: one_wait so, profile at $work/NAME.prof.
run_unsampled() {
  local name=$1 try
  shift
  for try in 1 2 3 4 5; do
    rm -f "$work/$name.prof" "$work/$name.prof.holders" "$work/$name.report"
    run "$name" one_wait PARKLOT_PROFILE="$work/$name.prof" PARKLOT_PROFILE_RATE=1000000000 "$@"
    [ -e "$work/$name.prof" ] || return 0
  done
  fail "one_wait: its wait was sampled in each of 5 runs"
}
run_unsampled nothing
grep -q '^parklot: PARKLOT_PROFILE: pid [0-9]* sampled none of its 1 contended waits' "$work/nothing.err" ||
  fail "one_wait: no line says nothing was sampled: $(head -c 300 "$work/nothing.err")"
# On the report sink: PARKLOT_REPORT when set.
run_unsampled nothing_report PARKLOT_REPORT="$work/nothing_report.report"
grep -q 'sampled none of its 1 contended waits' "$work/nothing_report.report" ||
  fail "one_wait: PARKLOT_REPORT has no line"
# Both views charge the same waits.
[ "$(head -1 <(google-pprof --text "$prog" two.prof 2>/dev/null | grep Total))" = \
  "$(head -1 <(google-pprof --text "$prog" two.prof.holders 2>/dev/null | grep Total))" ] ||
  fail "two_locks: the two views' totals differ"

# The launcher finds the program in the file and draws the picture.
"$launcher" profile --png two.prof >two.png 2>"$work/launcher.err" ||
  fail "parklot profile --png: $(head -c 300 "$work/launcher.err")"
[ "$(head -c 8 two.png | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
  fail "parklot profile --png: not a PNG ($(head -c 16 two.png | od -An -c | head -1))"
# -o FILE writes there; a PNG is never written to a terminal (script(1)
# gives the launcher one); pprof's "Using local file" lines stay out.
"$launcher" profile --png -o two-o.png two.prof 2>"$work/launcher.err" ||
  fail "parklot profile --png -o: $(head -c 300 "$work/launcher.err")"
cmp -s two.png two-o.png || fail "parklot profile --png -o: not the PNG that stdout got"
! grep -q "Using local file" "$work/launcher.err" ||
  fail "parklot profile: pprof's chatter reached the user: $(head -c 200 "$work/launcher.err")"
if command -v script >/dev/null; then
  script -qec "$launcher profile --png two.prof" /dev/null >"$work/tty.out" 2>&1
  rc=$?
  [ "$rc" = 2 ] && grep -q "not writing a PNG to a terminal" "$work/tty.out" ||
    fail "parklot profile --png to a terminal: status $rc, $(head -c 200 "$work/tty.out")"
else
  echo "note: no script(1): the terminal refusal is not checked"
fi
"$launcher" profile --text --holders two.prof "$prog" >two.txt 2>>"$work/launcher.err" ||
  fail "parklot profile --text --holders: $(head -c 300 "$work/launcher.err")"
# By source line (--lines): "drop_alpha FILE:LINE".
grep -qE ' drop_alpha [^ ]+:[0-9]+$' two.txt || fail "parklot profile --text --holders: no drop_alpha FILE:LINE: $(head -5 two.txt)"

# Every other kind the shim serves; a condvar wait is not contention.
run kinds kinds PARKLOT_PROFILE="$work/kinds.prof" PARKLOT_PROFILE_RATE=1
check_file kinds.prof 1
check_file kinds.prof.holders 1
waits=$(cum kinds.prof)
for name in wait_recursive wait_errorcheck wait_timed wait_rdlock wait_wrlock wait_sem wait_barrier; do
  awk -v n="$name" '$2 == n && $1 > 0 { found = 1 } END { exit !found }' <<<"$waits" ||
    fail "kinds: $name not in the waiters' view:
$waits"
done
# 40 condvar waits of about 1 ms each: profiled, they would show ~0.04 s.
awk '$2 == "wait_cond" && $1 >= 0.005 { exit 1 }' <<<"$waits" ||
  fail "kinds: the condvar wait was profiled: $(grep wait_cond <<<"$waits")"
holders=$(cum kinds.prof.holders)
for name in release_recursive release_errorcheck release_timed release_rw post_sem arrive_barrier; do
  awk -v n="$name" '$2 == n && $1 > 0 { found = 1 } END { exit !found }' <<<"$holders" ||
    fail "kinds: $name not in the holders' view:
$holders"
done

# Another rate: a comment says it (the rows are scaled already: period 1).
# The default, 1 ms of wait per sample, is the configuration's.
run rate two_locks PARKLOT_PROFILE="$work/rate.prof" PARKLOT_PROFILE_RATE=4000
check_file rate.prof 1
grep -q '^# [0-9]* sampled waits.* min(1, d / 4000)' rate.prof || fail "rate.prof: no comment names the rate"
# two_locks: a process that served nothing prints no statistics report.
run default two_locks PARKLOT_PROFILE="$work/default.prof" PARKLOT_STATS=1
grep -q '^config: .* profile_rate=1000000$' "$work/default.err" ||
  fail "default rate: $(grep '^config:' "$work/default.err")"

# Fork children: a %p path gives each process its own pair of files; a
# plain path keeps the parent's (a child leaving by _exit writes nothing).
run forkp fork PARKLOT_PROFILE="$work/fork.%p" PARKLOT_PROFILE_RATE=1
read -r parent child < <(sed -n 's/^parent=\([0-9]*\) child=\([0-9]*\)$/\1 \2/p' "$work/forkp.out")
for pid in "$parent" "$child"; do
  check_file "fork.$pid" 1
  check_file "fork.$pid.holders" 1
  grep -q "^# parklot contention profile, pid $pid:" "fork.$pid" || fail "fork.$pid: another process's profile"
done
mkdir plain && cd plain || exit 1
run forkplain fork PARKLOT_PROFILE="$work/plain/fork" PARKLOT_PROFILE_RATE=1
cd "$work" || exit 1
read -r parent child < <(sed -n 's/^parent=\([0-9]*\) child=\([0-9]*\)$/\1 \2/p' "$work/forkplain.out")
[ "$(ls plain | tr '\n' ' ')" = "fork fork.holders " ] || fail "fork without %p: files $(ls plain | tr '\n' ' ')"
grep -q "^# parklot contention profile, pid $parent:" plain/fork || fail "fork without %p: not the parent's profile"

# Off: no file, nothing mapped. The anonymous memory at main's start is
# that of a run without any knob; with the profile on it is larger by the
# tables (1.3 MB), so the comparison can see them.
mkdir off && cd off || exit 1
run base maps
run unset maps PARKLOT_PROFILE=
run rejected maps PARKLOT_PROFILE=no-slash
run on maps PARKLOT_PROFILE="$work/off/on.prof"
bytes() { sed -n 's/^anonymous_bytes=//p' "$work/$1.out"; }
[ -n "$(bytes base)" ] || fail "maps: no figure printed"
[ "$(bytes unset)" = "$(bytes base)" ] || fail "off (empty): $(bytes unset) anonymous bytes, $(bytes base) in a plain run"
[ "$(bytes rejected)" = "$(bytes base)" ] || fail "off (rejected): $(bytes rejected) anonymous bytes, $(bytes base) in a plain run"
grep -q 'ignoring PARKLOT_PROFILE=no-slash' "$work/rejected.err" || fail "off (rejected): no line on stderr"
[ $(($(bytes on) - $(bytes base))) -ge 1000000 ] ||
  fail "on: $(bytes on) anonymous bytes, $(bytes base) without: the tables are not seen"
# No file from any of them: off, nothing is written; on, a process that
# sampled no wait (these have no contention) writes none either.
[ -z "$(ls)" ] || fail "maps: files written: $(ls | tr '\n' ' ')"

[ "$status" -eq 0 ] && echo PASS
exit "$status"
