#!/usr/bin/env bash
# The shim's own output on a stderr that is a pipe whose reader has gone
# (a pipeline whose consumer exited, a daemon's dead log pipe): glibc writes
# nothing there and the program runs on; the shim's warning (a malformed
# PARKLOT_* value) and its statistics report at exit must not kill the
# program by SIGPIPE (base/text.h, WriteAllNoSigpipe). Each case runs
# against glibc and under the shim with stderr such a pipe, and the exit
# statuses must match.
#
#   broken_stderr_test.sh SHIM PROG     (PROG: served_counts_prog)
set -uo pipefail
root=$PWD
source "$root/tests/preload/shim_preload.sh"
shim_test_begin "$1" "$2" broken_stderr

# Runs the command with stderr a pipe whose read end is closed; prints
# the exit status (128 + N for signal N).
run_broken() {
  env -u LD_PRELOAD python3 - "$@" <<'PY'
import os, subprocess, sys
r, w = os.pipe()
os.close(r)
p = subprocess.run(sys.argv[1:], stderr=w, stdout=subprocess.DEVNULL,
                   timeout=60, restore_signals=True)
print(128 - p.returncode if p.returncode < 0 else p.returncode)
PY
}

check() {  # NAME ENV... -- COMMAND...
  local name=$1
  shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local want got
  # The runner itself runs plain; only the child gets the environment.
  want=$(run_broken env -u LD_PRELOAD "${envs[@]}" "$@")
  got=$(run_broken env LD_PRELOAD="$PRELOAD" "${envs[@]}" "$@")
  if [ "$got" = "$want" ]; then
    echo "ok: $name: exit $got, as under glibc"
  else
    fail "$name: exit $got under the shim, $want under glibc (141: SIGPIPE)"
  fi
}

check "a malformed PARKLOT_SPIN, /bin/true" PARKLOT_SPIN=zz -- /bin/true
check "PARKLOT_STATS=1 at exit" PARKLOT_STATS=1 -- "$prog"
check "both" PARKLOT_SPIN=zz PARKLOT_STATS=1 -- "$prog"
[ "$status" -eq 0 ] && echo PASS
exit "$status"
