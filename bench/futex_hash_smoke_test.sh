#!/usr/bin/env bash
# Smoke test of //bench:futex_hash: runs it in a tiny mode (small thread
# counts, few keys, one short repetition) and checks that it exits 0, that
# the side-by-side table has a row with figures for every configuration at
# every thread count (kernel sizes may be refused by an older kernel, and
# say so), and that the Google Benchmark JSON holds the same runs.
# Figures are not judged: this is a test that the benchmark works.
set -uo pipefail

bin="$1"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
out="$tmp/futex_hash.out"
json="$tmp/futex_hash.json"

fail() { echo "FAIL: $*" >&2; echo "--- output ---" >&2; cat "$out" >&2; exit 1; }

configs=(
  kernel/default kernel/global kernel/16 kernel/128 kernel/1024 kernel/8192
  kernel/65536 parklot/threads parklot/cpus parklot/fixed:2 parklot/fixed:16
  parklot/fixed:1024 parklot/adaptive
)
threads=(1 3)

listed="$("$bin" --list_configs)" || { echo "FAIL: --list_configs" >&2; exit 1; }
[[ "$listed" == "$(printf '%s\n' "${configs[@]}")" ]] ||
  { echo "FAIL: configurations differ from the expected list:" >&2; echo "$listed" >&2; exit 1; }

"$bin" --threads=1,3 --keys=32 --repetitions=1 --duration=10ms \
  --json_out="$json" >"$out" 2>"$tmp/stderr"
rc=$?
cat "$tmp/stderr" >&2
[[ $rc -eq 0 ]] || fail "futex_hash exited with status $rc"

num='[0-9]+(\.[0-9]+)?[kMG]?'
row_ok="^NAME +.* $num +\[$num - $num\] +[0-9]+\.[0-9]+x\$"
row_refused="^NAME +refused: prctl\(PR_FUTEX_HASH, SET_SLOTS, [0-9]+\) -> E[A-Z]+\$"

for t in "${threads[@]}"; do
  section="$(awk -v h="futex hash: $t threads x 32 keys;" \
    'index($0, h) == 1 {on = 1; next} on && /^$/ {exit} on {print}' "$out")"
  [[ -n "$section" ]] || fail "no table for $t threads"
  for c in "${configs[@]}"; do
    line="$(grep -E "^$c " <<<"$section")"
    [[ $(grep -c . <<<"$line") -eq 1 ]] || fail "$t threads: expected one row for $c, got: '$line'"
    if grep -Eq "${row_ok/NAME/$c}" <<<"$line"; then
      if [[ $c == kernel/default ]]; then
        grep -Eq ' 1\.00x$' <<<"$line" || fail "$t threads: baseline ratio is not 1.00x: $line"
      fi
      grep -Fq "\"name\": \"futex_hash/$c/threads:$t\"" "$json" ||
        fail "JSON lacks futex_hash/$c/threads:$t"
    elif [[ $c == kernel/[0-9g]* ]] && grep -Eq "${row_refused/NAME/$c}" <<<"$line"; then
      echo "note: $t threads: $line"
    else
      fail "$t threads: malformed or failed row: $line"
    fi
  done
done

if command -v python3 >/dev/null; then
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["benchmarks"], "no runs"' \
    "$json" || fail "invalid JSON"
fi

# The skewed workloads (hot keys, a phase change) run and report every
# configuration asked for; an unknown workload is an error.
for w in hot phase; do
  "$bin" --workload=$w --hot_keys=2 \
    --configs=kernel/default,parklot/threads,parklot/adaptive \
    --threads=3 --keys=32 --repetitions=1 --duration=10ms >"$out" 2>&1 ||
    fail "--workload=$w exited with status $?"
  for c in parklot/threads parklot/adaptive; do
    grep -Eq "${row_ok/NAME/$c}" "$out" || fail "--workload=$w: no row for $c"
  done
done
if "$bin" --workload=skew --configs=parklot/threads --threads=1 --repetitions=1 \
    --duration=1ms >/dev/null 2>&1; then
  fail "--workload=skew was accepted"
fi

# A bad configuration name is an error, not an empty table.
if "$bin" --configs=kernel/3 --threads=1 --repetitions=1 --duration=1ms >/dev/null 2>&1; then
  fail "--configs=kernel/3 was accepted"
fi

# Any policy PARKLOT_POLICY accepts runs as parklot/POLICY, with the table
# it asks for; a policy it rejects is an error.
"$bin" --configs=parklot/fixed:4096 --threads=1 --keys=8 --repetitions=1 \
  --duration=10ms >"$out" 2>&1 || fail "parklot/fixed:4096 exited with status $?"
grep -Eq "^parklot/fixed:4096 +4096 buckets" "$out" ||
  fail "parklot/fixed:4096: no row with 4096 buckets"
for bad in parklot/fixed:0 parklot/fixed:x parklot/sometimes; do
  if "$bin" --configs=$bad --threads=1 --repetitions=1 --duration=1ms >/dev/null 2>&1; then
    fail "--configs=$bad was accepted"
  fi
done
echo "PASS"
