#!/usr/bin/env bash
# What a debugger sees of a program under the shim whose threads hold and
# wait for locks (gdb_view_prog), live (gdb -p) and from a core file
# written by gdb: glibc's owner fields (a mutex's __owner, a write-locked
# rwlock's __cur_writer) name the holders, and the gdb extension's
# `info parklot` (tools/gdb/parklot_gdb.py) lists each parked thread, the
# lock it waits on by symbol, its holder, and the deadlock cycle.
#
#   gdb_view_test.sh SHIM PROG EXTENSION
set -uo pipefail
root=$PWD
source "$root/tests/preload/shim_preload.sh"
shim_test_begin "$1" "$2" gdb_view
ext=$3
[ -f "$ext" ] || ext="$root/$ext"
[ -f "$ext" ] || { echo "FAIL: extension $3 not found"; exit 1; }
command -v gdb >/dev/null || { echo "FAIL: gdb is missing (tools/setup installs it)"; exit 1; }

LD_PRELOAD="$PRELOAD" "$prog" >"$work/prog.out" 2>&1 &
pid=$!
trap 'kill -9 $pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 600); do
  grep -q '^ready' "$work/prog.out" && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
ready=$(grep '^ready' "$work/prog.out") || { echo "FAIL: the program never got ready:"; cat "$work/prog.out"; exit 1; }
echo "$ready"
field() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<"$ready"; }
a=$(field crossed_a) b=$(field crossed_b) w=$(field rwlock_writer) main=$(field main)

# Owners read as a debugger reads them without the program's types: the
# int at byte 8 of a pthread_mutex_t, at byte 24 of a pthread_rwlock_t.
commands=(-ex "source $ext" -ex "info parklot"
          -ex 'print ((int*)&lock_a)[2]' -ex 'print ((int*)&lock_b)[2]'
          -ex 'print ((int*)&held_rwlock)[6]')

check_view() {  # LABEL FILE
  local label=$1 out=$2
  grep -q "^parklot: 4 of 5 threads parked" "$out" ||
    fail "$label: not 'parklot: 4 of 5 threads parked'"
  grep -Eq "\(LWP $a\) waits on 0x[0-9a-f]+ <lock_b>.*, held by Thread [0-9]+ \(LWP $b\) \(__owner\)" "$out" ||
    fail "$label: crossed_a's wait for lock_b held by crossed_b"
  grep -Eq "\(LWP $b\) waits on 0x[0-9a-f]+ <lock_a>.*, held by Thread [0-9]+ \(LWP $a\) \(__owner\)" "$out" ||
    fail "$label: crossed_b's wait for lock_a held by crossed_a"
  grep -Eq "\(LWP $w\) waits on 0x[0-9a-f]+ <held_rwlock>.*, held by Thread [0-9]+ \(LWP $main\) \(__cur_writer\)" "$out" ||
    fail "$label: rwlock_writer's wait for held_rwlock held by main"
  grep -Eq "waits on 0x[0-9a-f]+ <idle_cond>" "$out" ||
    fail "$label: the condvar waiter"
  grep -Eq "^deadlock: Thread [0-9]+ -> lock_[ab] -> Thread [0-9]+ -> lock_[ab] -> Thread [0-9]+$" "$out" ||
    fail "$label: the deadlock cycle"
  [ "$(grep -c '^deadlock:' "$out")" -eq 1 ] || fail "$label: one cycle, reported once"
  # Every parked thread says when it queued and how long it has waited,
  # bounded by this test's own run.
  [ "$(grep -Ec ' waits on .*, parked since [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3} \([0-9]+\.[0-9]{3} s\)' "$out")" -eq 4 ] ||
    fail "$label: four 'parked since HH:MM:SS.mmm (S s)'"
  sed -n 's/.*parked since [0-9:.]* (\([0-9]*\)\.[0-9]* s).*/\1/p' "$out" |
    while read -r s; do [ "$s" -lt 300 ] || echo "age $s s"; done | grep -q . &&
    fail "$label: a wait older than this test"
  grep -q "^\$1 = $a$" "$out" || fail "$label: lock_a's __owner is not crossed_a's tid $a"
  grep -q "^\$2 = $b$" "$out" || fail "$label: lock_b's __owner is not crossed_b's tid $b"
  grep -q "^\$3 = $main$" "$out" || fail "$label: held_rwlock's __cur_writer is not main's tid $main"
}

timeout -s KILL 120 gdb -nx -batch -p $pid "${commands[@]}" \
  -ex "generate-core-file $work/core" >"$work/live.out" 2>&1
sed 's/^/  live | /' "$work/live.out" | grep -v '^  live | \[New LWP'
check_view live "$work/live.out"
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
if [ -s "$work/core" ]; then
  timeout -s KILL 120 gdb -nx -batch "$prog" "$work/core" "${commands[@]}" \
    >"$work/core.out" 2>&1
  sed 's/^/  core | /' "$work/core.out" | grep -v '^  core | \[New LWP'
  check_view "core file" "$work/core.out"
  # The core holds the same queueing times as the live process showed.
  since() { grep -o 'parked since [0-9:.]*' "$1" | sort; }
  [ "$(since "$work/live.out")" = "$(since "$work/core.out")" ] ||
    fail "core file: the parked-since times differ from the live view's"
else
  fail "gdb wrote no core file"
fi
[ $status -eq 0 ] && echo "ok: owners and info parklot, live and from a core file"
exit $status
