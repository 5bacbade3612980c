#!/usr/bin/env bash
# Smoke test of //bench:suite: runs it in its tiny mode (one repetition of a
# few milliseconds per cell, the smallest matrix) and checks that
#   - it exits 0;
#   - every in-process scenario printed, unpinned and pinned, a row with
#     figures and a ratio for every cell and implementation (glibc's ratio
#     1.00x), and no row failed;
#   - scenario 5 (futex_hash) printed its rows, unpinned and pinned;
#   - scenario 7 ran `sort` under glibc and under the shim;
#   - scenario 8 printed 8a-8c like the in-process scenarios, and 8d said
#     that tiny mode leaves it out;
#   - the targets table is there;
#   - suite.json is valid JSON in Google Benchmark's format and holds a
#     median for every series, and futex_hash's JSON files parse;
#   - with gnuplot installed, the plots are PNG files.
# Figures are never judged: a benchmark reports, it does not pass or fail.
set -uo pipefail

suite="$1"
futex_hash="$2"
shim="$3"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
outdir="$tmp/suite"
out="$tmp/suite.out"

fail() { echo "FAIL: $*" >&2; echo "--- output ---" >&2; cat "$out" >&2; exit 1; }

command -v python3 >/dev/null || { echo "FAIL: python3 missing (tools/setup installs it)" >&2; exit 1; }

timeout 600 "$suite" --tiny --out="$outdir" --futex_hash="$futex_hash" \
  --shim="$shim" >"$out" 2>"$tmp/stderr"
rc=$?
tail -20 "$tmp/stderr" >&2
[[ $rc -eq 0 ]] || fail "suite exited with status $rc"
cmp -s "$out" "$outdir/report.txt" || fail "report.txt differs from the terminal output"

# The lines of the table "== <title prefix>... (<pin>) ==", up to a blank line.
section() {  # title-prefix pin
  awk -v t="== $1" -v p="($2) ==" '
    index($0, t) == 1 && index($0, p) > 0 { on = 1; next }
    on && /^$/ { exit }
    on { print }' "$out"
}

# The row of `impl` in `cell` (cells hold spaces, "+", "=").
row() {  # section-text cell impl
  awk -v c="$2" -v i="$3" '
    index($0, c) == 1 {
      rest = substr($0, length(c) + 1)
      if (rest !~ /^  +/) next
      sub(/^ +/, "", rest)
      if (index(rest, i " ") == 1) print
    }' <<<"$1"
}

mutexes=(glibc glibc_adaptive std absl futex parklot)
condvars=(glibc std absl parklot)
waiters=(glibc absl parklot park futex)

check() {  # title-prefix impl-array-name cell...
  local title=$1 impls_name=$2
  shift 2
  local -n impls=$impls_name
  for pin in unpinned pinned; do
    local text
    text="$(section "$title" "$pin")"
    [[ -n "$text" ]] || fail "no table '$title' ($pin)"
    for cell in "$@"; do
      # A tiny run on a busy machine can measure a zero for glibc (a
      # latency below the clock's step): a ratio to it is then "-", which
      # is the report's right answer, not a failure of the scenario.
      local base_zero=0
      grep -Eq ' 0(\.0+)?(ns|us|ms|s)? ' <<<"$(row "$text" "$cell" glibc)" && base_zero=1
      local ratio=' [0-9]+\.[0-9]+x( |$)'
      ((base_zero)) && ratio=' ([0-9]+\.[0-9]+x|-)( |$)'
      for impl in "${impls[@]}"; do
        local line
        line="$(row "$text" "$cell" "$impl")"
        [[ $(grep -c . <<<"$line") -eq 1 ]] || fail "'$title' ($pin): expected one row for $cell / $impl, got '$line'"
        if grep -Eq 'FAILED|skipped' <<<"$line"; then fail "'$title' ($pin): $line"; fi
        grep -Eq ' [0-9]+(\.[0-9]+)?(ns|us|ms|s|k|M|G)? ' <<<"$line" || fail "'$title' ($pin): no figure: $line"
        grep -Eq "$ratio" <<<"$line" || fail "'$title' ($pin): no ratio: $line"
        if [[ $impl == glibc ]]; then
          grep -Eq ' (1\.00x|-)( |$)' <<<"$line" || fail "'$title' ($pin): glibc's ratio is not 1.00x: $line"
          ((base_zero)) || grep -Eq ' 1\.00x( |$)' <<<"$line" || fail "'$title' ($pin): glibc's ratio is not 1.00x: $line"
        fi
      done
    done
  done
}

check "1. uncontended" mutexes "lock+unlock" "trylock+unlock"
check "1. uncontended" condvars "notify_one,no-waiter" "notify_all,no-waiter"
check "2. contended" mutexes "T=1 cs=10 out=100 locks=1" "T=2 cs=10 out=100 locks=1" \
  "T=4 cs=10 out=100 locks=1" "T=4 cs=10 out=100 locks=2"
check "3. fairness" mutexes "T=2 cs=0 delay=0" "T=2 cs=100us-sleep delay=0"
check "4. wake-up" waiters "workers=1" "workers=2"
check "6a. condvar producer/consumer" condvars "P=1 C=1 queue=1" "P=2 C=2 queue=1"
check "6b. condvar broadcast" condvars "waiters=4" "waiters=16"
release=(kernel parklot)
pair=(glibc parklot)
check "8a. release N threads" release "waiters=4" "waiters=40"
check "8b. write unlock releasing" pair "waiters=4" "waiters=40"
check "8c. barrier rounds" pair "T=4" "T=40"
grep -A1 '^== 8d\. perf bench futex wake-parallel' "$out" | grep -q 'left out in tiny mode' ||
  fail "no 8d section"

# 5: futex_hash's own tables, once unpinned and once pinned.
for pin in unpinned pinned; do
  text="$(awk -v t="== 5. hash scaling" -v p=", $pin ==" '
    index($0, t) == 1 && index($0, p) > 0 { on = 1; next }
    on && /^== / { exit }
    on { print }' "$out")"
  [[ -n "$text" ]] || fail "no scenario 5 ($pin)"
  for t in 1 3; do
    grep -q "^futex hash: $t threads x 32 keys" <<<"$text" || fail "5 ($pin): no table for $t threads"
  done
  for c in kernel/default parklot/adaptive parklot/threads parklot/fixed:16; do
    [[ $(grep -Ec "^$c +.* [0-9.]+[kMG]? +\[" <<<"$text") -eq 2 ]] || fail "5 ($pin): expected 2 rows for $c"
  done
done

# 7: sort under glibc and under the shim.
text="$(awk '/^== 7\. real programs/ { on = 1; next } on && /^$/ { exit } on { print }' "$out")"
for impl in glibc parklot; do
  line="$(row "$text" "sort --parallel=4" "$impl")"
  [[ -n "$line" ]] || fail "7: no row for sort / $impl"
  grep -Eq 'FAILED|skipped' <<<"$line" && fail "7: $line"
  grep -Eq ' [0-9.]+(ns|us|ms|s) \[' <<<"$line" || fail "7: no wall time: $line"
done

grep -q '^== targets' "$out" || fail "no targets table"
grep -Eq '^5 hash: parklot/adaptive ahead of the best kernel size .* (met|partly|MISSED)$' "$out" ||
  fail "targets table lacks the hash verdict"
[[ -s "$outdir/summary.md" ]] || fail "no summary.md"

python3 - "$outdir" <<'PY' || fail "JSON check failed"
import json, sys
d = sys.argv[1]
suite = json.load(open(d + "/suite.json"))
assert "context" in suite and suite["benchmarks"], "no benchmarks"
names = {b["name"] for b in suite["benchmarks"]}
series = {b["run_name"] for b in suite["benchmarks"]}
for s in series:
    assert s + "_median" in names, "no median for " + s
for b in suite["benchmarks"]:
    assert "error_occurred" not in b, b["name"] + ": " + b.get("error_message", "")
for prefix, count in [("uncontended/", 2 * (2 * 6 + 2 * 4)),
                      ("contended/", 2 * 4 * 6), ("fairness/", 2 * 2 * 6),
                      ("wakeup/", 2 * 2 * 5), ("prodcons/", 2 * 2 * 4),
                      ("broadcast/", 2 * 2 * 4), ("programs/", 2),
                      ("release/", 2 * 2 * 2), ("readers/", 2 * 2 * 2),
                      ("barrier/", 2 * 2 * 2)]:
    got = len([s for s in series if s.startswith(prefix)])
    assert got == count, "%s: %d series, expected %d" % (prefix, got, count)
assert "contended/T:4/cs:10/out:100/locks:2/pinned/parklot_median" in names
for f in ("futex_hash.json", "futex_hash_pinned.json"):
    assert json.load(open(d + "/" + f))["benchmarks"], f
PY

if command -v gnuplot >/dev/null; then
  for png in contended_unpinned contended_pinned fairness_p99 wakeup_latency hash_scaling broadcast programs; do
    f="$outdir/$png.png"
    [[ -s "$f" ]] || fail "no plot $png.png"
    [[ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" == '211PNG' ]] || fail "$png.png is not a PNG"
  done
fi

# Commands in the report are ones a user can run: no path into Bazel's
# output tree in the user's cache folder.
if grep -n '/bazel-out/' "$outdir/report.txt"; then fail "the report names Bazel cache paths"; fi
grep -q '^\$ bazel-bin/bench/futex_hash ' "$outdir/report.txt" || fail "no runnable futex_hash command in the report"

# Bad input is an error, not an empty report.
if "$suite" --scenarios=9 >/dev/null 2>&1; then fail "--scenarios=9 was accepted"; fi
echo PASS
