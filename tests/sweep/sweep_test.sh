#!/usr/bin/env bash
# Runs the ptrace sweep (sweep_driver, docs/testing.md "The ptrace sweep")
# against the shim, inside `timeout`.
#
#   sweep_test.sh [--timeout=SECONDS] DRIVER VICTIM [DRIVER OPTIONS...]
set -uo pipefail

limit=600
case "${1:-}" in --timeout=*) limit=${1#--timeout=}; shift ;; esac
[ $# -ge 2 ] || { echo "usage: sweep_test.sh [--timeout=S] DRIVER VICTIM [OPTIONS...]" >&2; exit 2; }

# Runfiles: Bazel runs the test in the workspace's runfiles directory.
root="${TEST_SRCDIR:+$TEST_SRCDIR/${TEST_WORKSPACE:-parklot}}"
root="${root:-$PWD}"
shim="$root/preload/libparklot_preload.so"
[ -f "$shim" ] || shim="$PWD/bazel-bin/preload/libparklot_preload.so"
[ -f "$shim" ] || { echo "FAIL: shim not found"; exit 1; }
helper="$root/tests/preload/shim_preload.sh"
[ -f "$helper" ] || helper="$(dirname "$0")/../preload/shim_preload.sh"
# shellcheck source=tests/preload/shim_preload.sh
source "$helper" || { echo "FAIL: $helper not found"; exit 1; }
shim_preload "$shim" || { echo "FAIL: cannot preload the shim"; exit 1; }
driver=$1
victim=$2
shift 2
[ -x "$driver" ] || driver="$root/$driver"
[ -x "$victim" ] || victim="$root/$victim"

timeout -k 10 "$limit" "$driver" --shim="$shim" --preload="$PRELOAD" \
  --victim="$victim" "$@"
rc=$?
[ "$rc" -ne 124 ] || echo "FAIL: the sweep did not finish in ${limit}s"
exit "$rc"
