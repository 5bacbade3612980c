#!/usr/bin/env bash
# Smoke test of //bench:wake_mechanisms: one repetition at 4 and 40
# threads; every mechanism prints a row with figures for each, and --raw
# prints its lines.
set -euo pipefail
bin=$1
out=$("$bin" --reps=1 --threads=4,40)
fail() { echo "FAIL: $*"; echo "$out"; exit 1; }
for n in 4 40; do
  grep -q "^N=$n " <<<"$out" || fail "no table for N=$n"
done
for m in kernel serial wakeop waitv tree:2:1 tree:2:2 tree:4:2 lot; do
  [[ $(grep -Ec "^$m +[0-9]+ \[" <<<"$out") -eq 2 ]] || fail "expected 2 rows for $m"
done
raw=$("$bin" --reps=1 --threads=40 --mechanisms=kernel,lot --raw=x)
[[ $(grep -c '^raw x 40 ' <<<"$raw") -eq 2 ]] || fail "--raw: $raw"
if "$bin" --mechanisms=nonsense >/dev/null 2>&1; then fail "a bad mechanism was accepted"; fi
echo PASS
