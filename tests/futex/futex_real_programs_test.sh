#!/usr/bin/env bash
# Real programs from Debian under the shim with PARKLOT_SYSCALL_FUTEX=1,
# each run inside `timeout`:
#   ripgrep (a Rust program: std's Mutex/Condvar/park are private futexes
#   through syscall()) searching a generated tree with 4 threads: the same
#   output as without the shim, and its futex waits and wakes were served;
#   stress-ng's futex stressor: exit 0. Its futex word is MAP_SHARED between
#   a parent and a forked child, waited on and woken with shared futex ops,
#   which the shim must and does pass to the kernel: the statistics show
#   them there.
set -uo pipefail

shim="$PWD/preload/libparklot_preload.so"
[ -f "$shim" ] || { echo "FAIL: shim not found at $shim"; exit 1; }
# shellcheck source=tests/preload/shim_preload.sh
source tests/preload/shim_preload.sh || exit 1
shim_preload "$shim" || exit 1
preload=$PRELOAD
work="${TEST_TMPDIR:-$(mktemp -d)}"
limit=60
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

under_shim() {  # stats file, then the command
  local stats=$1
  shift
  timeout "$limit" env LD_PRELOAD="$preload" PARKLOT_SYSCALL_FUTEX=1 PARKLOT_STATS=1 "$@" 2>"$stats"
}
# count STATS "served by parklot"|"passed to the kernel" OP
count() {
  awk -v what="$2" -v op="$3" '
    index($0, "futex " what ":") == 1 {
      for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == op) n += kv[2] }
    }
    END { print n + 0 }' "$1"
}

# --- ripgrep -----------------------------------------------------------------
if command -v rg >/dev/null; then
  tree="$work/tree"
  rm -rf "$tree"
  for d in $(seq 1 24); do
    mkdir -p "$tree/d$d"
    for f in $(seq 1 40); do
      seq $((d * f)) $((d * f + 400)) | sed "s/^/d$d f$f line /" >"$tree/d$d/f$f.txt"
    done
  done
  expected="$work/rg.expected"
  timeout "$limit" rg -j4 --no-heading -n '7[0-9]3|99' "$tree" | sort >"$expected"
  [ -s "$expected" ] || fail "rg found nothing without the shim"
  served=0
  for i in 1 2 3; do
    under_shim "$work/rg.stats" rg -j4 --no-heading -n '7[0-9]3|99' "$tree" >"$work/rg.out"
    rc=$?
    sort "$work/rg.out" >"$work/rg.sorted"
    if [ "$rc" -ne 0 ]; then
      fail "rg run $i under the shim: exit status $rc"; cat "$work/rg.stats"
    elif ! cmp -s "$expected" "$work/rg.sorted"; then
      fail "rg run $i: output differs under the shim"; diff "$expected" "$work/rg.sorted" | head -5
    else
      pass "rg run $i: identical output ($(wc -l <"$expected") lines)"
    fi
    for op in wait wait_bitset wake; do
      served=$((served + $(count "$work/rg.stats" "served by parklot" $op)))
    done
  done
  if [ "$served" -gt 0 ]; then pass "rg: $served private futex calls served by parklot"; else fail "rg: no futex call served"; grep '^futex' "$work/rg.stats"; fi
else
  fail "rg not installed (tools/setup installs ripgrep)"
fi

# --- stress-ng --futex --------------------------------------------------------
if command -v stress-ng >/dev/null; then
  # Its workers leave by _exit: they report only to files of their own.
  if timeout "$limit" env LD_PRELOAD="$preload" PARKLOT_SYSCALL_FUTEX=1 PARKLOT_STATS="$work/sng.stats.%p" \
       stress-ng --futex 2 --futex-ops 20000 -t 30 >"$work/sng.out" 2>"$work/sng.err"; then
    pass "stress-ng --futex 2 --futex-ops 20000"
  else
    fail "stress-ng --futex exit status $?"; tail -20 "$work/sng.err"
  fi
  cat "$work"/sng.stats.* >"$work/sng.stats" 2>/dev/null
  k=$(( $(count "$work/sng.stats" "passed to the kernel" wait) + $(count "$work/sng.stats" "passed to the kernel" wake) ))
  if [ "$k" -gt 0 ]; then pass "stress-ng: $k shared futex calls went through the shim to the kernel"; else fail "stress-ng: no futex call seen by the shim"; grep '^futex' "$work/sng.stats"; fi
else
  fail "stress-ng not installed (tools/setup installs it)"
fi

[ "$failures" -eq 0 ] && echo "PASS" || echo "$failures failures"
exit $((failures != 0))
