#!/usr/bin/env bash
# Names in the reports and `parklot top`, with the installed tree
# (tests/tools/BUILD): names_prog.c, built here with -g, contends on a
# static hot_lock.
#   - `parklot run --stats --deadlock --profile` names hot_lock in the
#     statistics table, the lock-order cycle and the profile's `# lock`
#     line, and call sites as names_prog.c:LINE FUNCTION;
#     `parklot profile --text` shows names_prog.c:LINE and hot_lock;
#   - `parklot top --once PID`, while main holds hot_lock and a thread
#     waits for it, shows hot_lock, the waiter's and the holder's ids, and
#     the program's output is what it is without top;
#   - one-line errors: a process without the shim, a process gone, and
#     (as root only) a user without the right to read the process.
#   names_top_test.sh TREE_TAR PROG_SOURCE
set -uo pipefail
tree_tar=$1
src=$(readlink -f "$2")
work="${TEST_TMPDIR:-$(mktemp -d)}/names_top"
rm -rf "$work" && mkdir -p "$work/tree" "$work/tmp"
chmod 755 "$work" "$work/tree"
tar -xf "$tree_tar" -C "$work/tree" || { echo "FAIL: unpack $tree_tar"; exit 1; }
launcher="$work/tree/bin/parklot"
shim="$work/tree/lib/libparklot_preload.so"
export TMPDIR="$work/tmp"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

prog="$work/names_prog"
cc -g -O0 -pthread -o "$prog" "$src" || { echo "FAIL: cc names_prog.c"; exit 1; }
chmod 755 "$prog"

echo "== reports: hot_lock and names_prog.c:LINE"
(cd "$work" && timeout 60 "$launcher" run --stats --deadlock --profile="$work/prof.%p" -- "$prog" contend) \
  >"$work/contend.out" 2>"$work/contend.err"
rc=$?
[ "$rc" -eq 0 ] || fail "contend: exit $rc: $(head -c 500 "$work/contend.err")"
[ "$(cat "$work/contend.out")" = done ] || fail "contend: output '$(head -c 200 "$work/contend.out")'"
grep -qE '^  hot_lock +[0-9]+ +[0-9]+ +[0-9.]+  names_prog\.c:[0-9]+ worker \(' "$work/contend.err" &&
  pass "--stats names hot_lock and its caller's line" ||
  fail "--stats: no hot_lock row with names_prog.c:LINE worker: $(grep -A3 'most contended' "$work/contend.err")"
grep -qE '^  thread [0-9]+ holds lock hot_lock, taken at names_prog\.c:[0-9]+ hot_then_cold \(' "$work/contend.err" &&
  grep -qE '^      and takes lock hot_lock at names_prog\.c:[0-9]+ cold_then_hot \(.*closes the cycle' "$work/contend.err" &&
  pass "--deadlock names hot_lock and the lines" ||
  fail "--deadlock: $(grep -A5 'lock-order cycle' "$work/contend.err")"
profile=$(ls "$work"/prof.[0-9]* 2>/dev/null | grep -v holders | head -1)
if [ -z "$profile" ]; then
  fail "no profile written: $(head -c 300 "$work/contend.err")"
else
  grep -qE '^# lock 0x[0-9a-f]+ \(hot_lock\): first sampled wait at names_prog\.c:[0-9]+ worker' "$profile" &&
    pass "the profile's lock line names hot_lock" ||
    fail "profile: $(grep '^# lock' "$profile")"
  timeout 120 "$launcher" profile --text "$profile" >"$work/text" 2>"$work/text.err" ||
    fail "parklot profile --text: $(head -c 300 "$work/text.err")"
  grep -qE ' hot_lock \(0x0*[0-9a-f]+\)$' "$work/text" && grep -qE ' worker .*names_prog\.c:[0-9]+$' "$work/text" &&
    pass "profile --text shows hot_lock and names_prog.c:LINE" ||
    fail "profile --text: $(head -8 "$work/text")"
fi

echo "== top"
# hold: prints "holder TID waiter TID" once the waiter is about to lock,
# then waits for SIGUSR1.
LD_PRELOAD="$shim" "$prog" hold >"$work/hold.out" 2>"$work/hold.err" &
pid=$!
for _ in $(seq 100); do [ -s "$work/hold.out" ] && break; sleep 0.1; done
read -r _ holder _ waiter <"$work/hold.out"
[ -n "${waiter:-}" ] || fail "hold: no ids: $(cat "$work/hold.out" "$work/hold.err")"
# The waiter parks after printing: poll until top sees it.
ok=0
for _ in $(seq 50); do
  timeout 20 "$launcher" top --once "$pid" >"$work/top" 2>"$work/top.err"
  grep -qE "^  ${waiter:-x} +names_prog +hot_lock +[0-9.]+ s  ${holder:-x}$" "$work/top" && { ok=1; break; }
  sleep 0.1
done
((ok)) && pass "top shows thread $waiter on hot_lock held by $holder" ||
  fail "top: $(cat "$work/top" "$work/top.err")"
head -1 "$work/top" | grep -qE "^parklot top: pid $pid \(names_prog\), 2 threads, 1 parked, " ||
  fail "top's header: $(head -1 "$work/top")"

if [ "$(id -u)" -eq 0 ]; then
  if command -v setpriv >/dev/null; then
    chmod 755 "$work/tree/lib/parklot" "$work/tree/lib/parklot/parklot-top"
    setpriv --reuid=65534 --regid=65534 --clear-groups \
      "$work/tree/lib/parklot/parklot-top" --once "$pid" >"$work/perm" 2>&1
    rc=$?
    [ "$rc" -eq 1 ] && [ "$(wc -l <"$work/perm")" -eq 1 ] &&
      grep -q "^parklot top: pid $pid (names_prog): no permission to read its memory" "$work/perm" &&
      pass "another user: one line, no permission" || fail "another user: exit $rc: $(cat "$work/perm")"
  else
    echo "skip: no permission case (setpriv missing)"
  fi
else
  echo "skip: no permission case (needs root, to run top as another user)"
fi

kill -USR1 "$pid"
wait "$pid"
rc=$?
[ "$rc" -eq 0 ] || fail "hold: exit $rc"
printf 'holder %s waiter %s\ndone\n' "$holder" "$waiter" | cmp -s - "$work/hold.out" && [ ! -s "$work/hold.err" ] &&
  pass "the program's output is unchanged" || fail "hold's output: $(cat "$work/hold.out" "$work/hold.err")"

# A process gone (the one above, reaped) and one without the shim.
"$launcher" top --once "$pid" >"$work/gone" 2>&1
rc=$?
[ "$rc" -eq 1 ] && [ "$(cat "$work/gone")" = "parklot top: pid $pid: no such process (gone)" ] &&
  pass "a process gone: one line" || fail "gone: exit $rc: $(cat "$work/gone")"
sleep 30 &
plain=$!
# Until the forked shell has become sleep (top names the process by its
# command; a busy machine showed it still as bash).
for ((i = 0; i < 500; i++)); do
  [ "$(cat "/proc/$plain/comm" 2>/dev/null)" = sleep ] && break
  sleep 0.01
done
"$launcher" top --once "$plain" >"$work/plain" 2>&1
rc=$?
kill "$plain"
[ "$rc" -eq 1 ] && [ "$(wc -l <"$work/plain")" -eq 1 ] &&
  grep -q "^parklot top: pid $plain (sleep): not running under the parklot shim" "$work/plain" &&
  pass "a process without the shim: one line" || fail "no shim: exit $rc: $(cat "$work/plain")"

((failures == 0)) && echo PASS || { echo "$failures failure(s)"; exit 1; }
