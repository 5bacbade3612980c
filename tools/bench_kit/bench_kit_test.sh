#!/usr/bin/env bash
# The many-core kit (tools/bench_kit/BUILD): unpacked into a temporary
# folder, every object needs nothing beyond glibc but what the kit's lib/
# carries, and run.sh --quick, with a bare environment, runs every
# benchmark and prints every ratio line.
#
#   bench_kit_test.sh parklot-bench-kit.tar.gz
set -euo pipefail
tarball=$1
tmp=${TEST_TMPDIR:-$(mktemp -d)}
dir=$tmp/unpacked
mkdir -p "$dir"
tar -xzf "$tarball" -C "$dir"
kit=$dir/parklot-bench-kit

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

for f in run.sh MANIFEST bin/suite bin/futex_hash bin/futex_schbench \
  lib/libparklot_preload.so; do
  [ -e "$kit/$f" ] || fail "the kit has no $f"
done
grep -q '^needs: Linux x86-64 with glibc [0-9]' "$kit/MANIFEST" ||
  fail "MANIFEST does not say which glibc the kit needs"

# Every object's NEEDED entries: glibc's, or in lib/; no Abseil object
# (it is linked in).
glibc=" libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1 ld-linux-x86-64.so.2 "
for obj in "$kit"/bin/* "$kit"/lib/*; do
  needed=$(readelf -d "$obj" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  [ -n "$needed" ] || fail "$obj: readelf found no NEEDED entries"
  for need in $needed; do
    case $need in libabsl*) fail "$obj needs the shared $need" ;; esac
    case $glibc in *" $need "*) continue ;; esac
    [ -e "$kit/lib/$need" ] ||
      fail "$obj needs $need, which is neither glibc's nor in the kit's lib/"
  done
done

# The benchmarks find the kit's objects by their run path, before the
# system's copies, with nothing set in the environment.
for b in "$kit"/bin/*; do
  resolved=$(env -i ldd "$b")
  if grep -q 'not found' <<<"$resolved"; then
    fail "$b: $(grep 'not found' <<<"$resolved")"
  fi
  for lib in "$kit"/lib/*; do
    name=$(basename "$lib")
    grep -q "^[[:space:]]*$name => " <<<"$resolved" || continue
    grep -q "^[[:space:]]*$name => $kit/bin/../lib/$name " <<<"$resolved" ||
      fail "$b: $name resolves outside the kit: $(grep "$name" <<<"$resolved")"
  done
done

# Quick mode, bare environment.
log=$tmp/run.out
if ! env -i PATH=/usr/bin:/bin "$kit/run.sh" --quick --out "$tmp/results" \
  >"$log" 2>&1; then
  cat "$log" >&2
  fail "run.sh --quick failed"
fi

expect() {
  local what=$1 pattern=$2 min=$3 n
  n=$(grep -cE "$pattern" "$log" || true)
  if [ "$n" -lt "$min" ]; then
    cat "$log" >&2
    fail "$what: $n lines match '$pattern', want at least $min"
  fi
}
x='[0-9]+\.[0-9]+x'
# Scenario 2, tiny: T=2 and T=4 cells (one lock, and T/2 = 2 locks at T=4),
# unpinned and pinned. A cell where glibc's threads made no operation in
# the tiny window has no ratio ("-"); most have one.
r="($x|-)"
expect "suite scenario 2" "^ratio suite2 unpinned T=[0-9]+ .*: ops/s $r glibc, cpu/op $r glibc$" 3
expect "suite scenario 2" "^ratio suite2 pinned T=[0-9]+ .*: ops/s $r glibc, cpu/op $r glibc$" 3
expect "suite scenario 2" "^ratio suite2 .*: ops/s $x glibc, cpu/op $x glibc$" 1
for t in 2 4; do
  for c in parklot/adaptive parklot/fixed:1024; do
    expect "futex_hash" "^ratio futex_hash T=$t $c: $x the best kernel size \(kernel/[0-9a-z]+\), $x kernel/default$" 1
  done
  expect "futex_hash" "^ratio futex_hash T=$t growing vs fixed: .*= $x " 1
done
expect "schbench" "^ratio schbench 1x2: parklot/shim requests/s $x kernel/default$" 1
expect "schbench" "^ratio schbench 1x2: parklot/shim vs the best kernel configuration .*requests/s $x" 1
[ -s "$tmp/results/run.log" ] || fail "no run.log in the results folder"
[ -s "$tmp/results/futex_hash.json" ] || fail "no futex_hash.json in the results folder"
echo "PASS"
