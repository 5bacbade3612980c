#!/usr/bin/env bash
# `parklot run --stats/--deadlock` outlives its program on every way out:
# a reader of the reports that closed the pipe (`2>&1 | head`) or a
# catchable signal sent to the launcher never ends it first. It still
# waits for the program, passes the signal on, removes its private
# $TMPDIR/parklot-run.* directory and exits with the program's status; the
# program is never left running as an orphan, not even when the launcher is
# killed by SIGKILL.
#   launcher_exit_test.sh TREE_TAR PROG_C
set -uo pipefail
# shellcheck source=tests/install/launcher_setup.sh
source "$(dirname "$0")/launcher_setup.sh"
launcher_setup launcher_exit "$1" "$2"
# The launcher's private directories go here, where the test can see them.
mkdir -p "$work/tmp"
export TMPDIR="$work/tmp"

status=0
fail() { echo "FAIL: $*"; status=1; }
leftover() { compgen -G "$TMPDIR/parklot-run.*" >/dev/null; }
# Waits up to 30 s for FILE to hold a pid, then prints it.
pid_from() {
  local i
  for ((i = 0; i < 300; ++i)); do
    [ -s "$1" ] && { cat "$1"; return 0; }
    sleep 0.1
  done
  return 1
}
# Waits up to 10 s for PID to be gone.
gone() {
  local i
  for ((i = 0; i < 100; ++i)); do
    kill -0 "$1" 2>/dev/null || return 0
    sleep 0.1
  done
  return 1
}

# 1. `--stats 2>&1 | head -3`: the program writes until head has gone and
# exits 0; the report then meets a closed pipe (EPIPE, or SIGPIPE).
timeout 60 "$launcher" run --stats -- "$prog" reader-gone 2>&1 | head -3 >/dev/null
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
  fail "reader gone after the program's output: launcher status $rc (want the program's, 0)"
elif leftover; then
  fail "reader gone: private directory left behind: $(ls -d "$TMPDIR"/parklot-run.*)"
else
  echo "ok: --stats | head -3: status 0, no directory left"
fi
rm -rf "$TMPDIR"/parklot-run.*

# 2. `--deadlock` on a program that hangs after its cycle report met a
# closed pipe: the launcher must still be there, waiting for it; SIGTERM to
# the launcher then ends both, and nothing is left behind.
mkfifo "$work/fifo"
"$launcher" run --deadlock -- "$prog" hang-after-cycle "$work/pid2" >"$work/fifo" 2>&1 &
lpid=$!
head -1 "$work/fifo" >/dev/null  # reads a line, then closes the pipe
if ! ppid=$(pid_from "$work/pid2"); then
  fail "hanging program: it never wrote its pid"
  kill "$lpid" 2>/dev/null
else
  sleep 2  # the launcher copies reports every 200 ms: the cycle's has been tried
  if ! kill -0 "$lpid" 2>/dev/null; then
    wait "$lpid"
    fail "hanging program: the launcher ended (status $?) while its program runs"
  else
    kill -TERM "$lpid"
    wait "$lpid"
    rc=$?
    if [ "$rc" -ne 143 ]; then
      fail "hanging program: launcher status $rc after SIGTERM (want 143, the program's)"
    else
      echo "ok: --deadlock, reader gone, program hangs: the launcher waited, passed SIGTERM on, status 143"
    fi
  fi
  if ! gone "$ppid"; then
    fail "hanging program: pid $ppid left running as an orphan"
    kill -KILL "$ppid" 2>/dev/null
  fi
fi
if leftover; then fail "hanging program: private directory left behind"; fi
rm -rf "$TMPDIR"/parklot-run.*

# Starts `parklot run --stats` on a program that hangs, sends SIG to the
# launcher once the program runs, and waits for the launcher: sets rc (its
# status) and fails with WHAT unless the program is gone after it. Returns
# 1 where it failed.
signal_launcher() {
  local sig=$1 what=$2 pidfile="$work/pid.$1"
  "$launcher" run --stats -- "$prog" hang "$pidfile" 2>/dev/null &
  local lpid=$! ppid
  if ! ppid=$(pid_from "$pidfile"); then
    fail "$what: the program never wrote its pid"
    kill "$lpid" 2>/dev/null
    return 1
  fi
  kill "-$sig" "$lpid"
  wait "$lpid"
  rc=$?
  if ! gone "$ppid"; then
    fail "$what: program pid $ppid left running as an orphan (launcher status $rc)"
    kill -KILL "$ppid" 2>/dev/null
    return 1
  fi
}

# 3. A catchable signal beyond SIGINT/SIGTERM/SIGHUP/SIGQUIT (SIGUSR1, whose
# default ends a process) sent to the launcher: passed on, the program ends
# of it, the launcher exits 128+10 after cleaning up.
if signal_launcher USR1 "SIGUSR1 to the launcher"; then
  if [ "$rc" -ne 138 ]; then fail "SIGUSR1 to the launcher: status $rc (want 138)"
  else echo "ok: SIGUSR1 to the launcher: passed on, status 138"; fi
fi
if leftover; then fail "SIGUSR1: private directory left behind"; fi
rm -rf "$TMPDIR"/parklot-run.*

# 4. SIGKILL to the launcher, which it can neither catch nor pass on: the
# kernel kills the program too (PR_SET_PDEATHSIG), so it is not left
# running as an orphan. (The private directory stays: nothing can run.)
if signal_launcher KILL "SIGKILL to the launcher"; then
  echo "ok: SIGKILL to the launcher: the program ended with it"
fi
exit $status
