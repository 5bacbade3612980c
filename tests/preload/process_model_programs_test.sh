#!/usr/bin/env bash
# Real programs whose vfork children reset signal actions before exec: the
# parent's actions must stay its own under the shim, as under glibc
# (docs/design.md §5.16).
#   - CPython's subprocess (vfork since 3.10) resets every signal in the
#     child: afterwards SIGINT must still raise KeyboardInterrupt, and a
#     Python SIGHUP handler must still run.
#   - gdb starts its inferior from a vfork child that restores the
#     original actions: `gdb -batch -ex run` must run a program to its exit
#     (its SIGCHLD handler must still run in gdb).
#   - PROG (process_model_prog), whose vfork children leave by _exit,
#     under PARKLOT_STATS with a per-pid path: one report, the process's
#     own; a vfork child's figures are its parent's and it writes none
#     (glibc's _exit writes nothing).
# Each case runs against glibc first; its result there is the expectation.
#
#   process_model_programs_test.sh SHIM PROG
set -uo pipefail
root=$PWD
source "$root/tests/preload/shim_preload.sh"
shim_test_begin "$1" "$2" process_model

# Debian's interpreter, not one a user put first on PATH.
python=/usr/bin/python3
[ -x "$python" ] || { echo "FAIL: $python is missing (tools/setup installs it)"; exit 1; }
script="$work/signals.py"
cat >"$script" <<'PY'
import os, signal, subprocess, sys, time
hups = []
signal.signal(signal.SIGHUP, lambda s, f: hups.append(s))
subprocess.run(["/bin/true"], check=True)
os.kill(os.getpid(), signal.SIGHUP)
time.sleep(0.05)
print("sighup handled" if hups else "sighup lost")
try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(2)
    print("no KeyboardInterrupt")
except KeyboardInterrupt:
    print("KeyboardInterrupt")
PY

check() {  # NAME EXPECTED-PATTERN COMMAND...
  local name=$1 pattern=$2
  shift 2
  local want got
  want=$(env -u LD_PRELOAD timeout -s KILL 60 "$@" 2>&1)
  if ! grep -qE "$pattern" <<<"$want"; then
    echo "skip: $name: glibc alone does not give /$pattern/ here:"
    sed 's/^/  | /' <<<"$want"
    return
  fi
  got=$(env LD_PRELOAD="$PRELOAD" timeout -s KILL 60 "$@" 2>&1)
  local rc=$?
  if grep -qE "$pattern" <<<"$got"; then
    echo "ok: $name: /$pattern/, as under glibc"
  else
    fail "$name under the shim (exit $rc), want /$pattern/:"
    sed 's/^/  | /' <<<"$got"
  fi
}

check "python subprocess then SIGHUP" '^sighup handled$' "$python" "$script"
check "python subprocess then SIGINT" '^KeyboardInterrupt$' "$python" "$script"
command -v gdb >/dev/null || { echo "FAIL: gdb is missing (tools/setup installs it)"; exit 1; }
check "gdb -batch -ex run" 'exited normally' \
  gdb -nx -batch -ex run --args /bin/echo process-model

# Reports of the process alone, not of its vfork children.
mkdir -p "$work/reports"
if env LD_PRELOAD="$PRELOAD" PARKLOT_STATS="$work/reports/stats.%p" \
    timeout -s KILL 60 "$prog" >"$work/prog.out" 2>&1; then
  stats=$(find "$work/reports" -name 'stats.*' | wc -l)
  if [ "$stats" -eq 1 ]; then
    echo "ok: per-pid statistics: one report, the process's own"
  else
    fail "per-pid statistics: $stats reports, want 1:"
    ls -l "$work/reports"
  fi
else
  fail "$prog under PARKLOT_STATS:"
  sed 's/^/  | /' "$work/prog.out"
fi
exit $status
