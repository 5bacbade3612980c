#!/usr/bin/env bash
# Smoke test of //bench:futex_schbench: a tiny run (short duration, the
# default pairs 1x4, 2x64, 4x256) must exit 0 and print, for every pair, a
# row with requests/s and three latency percentiles for every configuration
# (a kernel size the kernel refuses says so). Figures are not judged.
set -uo pipefail
bin="$1"
shim="$2"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
out="$tmp/futex_schbench.out"
fail() { echo "FAIL: $*" >&2; cat "$out" >&2; exit 1; }
configs=(kernel/default kernel/global kernel/16 kernel/256 kernel/4096 parklot/shim)
listed="$("$bin" --list_configs)" || fail "--list_configs"
[[ "$listed" == "$(printf '%s\n' "${configs[@]}")" ]] || fail "configurations differ: $listed"

timeout 300 "$bin" --duration=40ms --work_ns=500 --shim="$shim" >"$out" 2>"$tmp/stderr"
rc=$?
cat "$tmp/stderr" >&2
[[ $rc -eq 0 ]] || fail "futex_schbench exited with status $rc"

num='[0-9]+(\.[0-9]+)?'
for pair in "1 message threads x 4 workers" "2 message threads x 64 workers" "4 message threads x 256 workers"; do
  section="$(awk -v h="futex schbench: $pair" '$0 == h {on = 1; next} on && /^$/ {exit} on {print}' "$out")"
  [[ -n "$section" ]] || fail "no table for $pair"
  for c in "${configs[@]}"; do
    line="$(grep -E "^$c " <<<"$section")"
    [[ $(grep -c . <<<"$line") -eq 1 ]] || fail "$pair: expected one row for $c: '$line'"
    if grep -Eq "^$c +[0-9]+ +$num +$num +$num +($num""x|-)\$" <<<"$line"; then
      rps=$(awk '{print $2}' <<<"$line")
      [[ $rps -gt 0 ]] || fail "$pair: $c served no request: $line"
    elif [[ $c == kernel/* && $c != kernel/default ]] && grep -q "refused: prctl" <<<"$line"; then
      echo "note: $line"
    else
      fail "$pair: malformed row: $line"
    fi
  done
done
echo PASS
