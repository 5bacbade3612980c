#!/usr/bin/env bash
# Installs parklot as a user would (tools/install into a fresh prefix, from
# the install tree Bazel built), then uses it without Bazel or the source
# tree: builds the examples with CMake and make against the prefix, runs
# them, and runs a real program with the installed launcher.
#
# usage: install_test.sh TREE.tar tools/install EXAMPLE-FILES...
# Everything happens in a temporary folder outside Bazel's output tree, with
# a clean environment (env -i), on copies of the tree and the script: no
# path into bazel-* outputs or the source tree is within reach.
set -uo pipefail

tree=$1 install=$2
shift 2
work="$(mktemp -d /tmp/parklot-install-test.XXXXXX)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src/examples" "$work/home"
cp "$tree" "$work/src/tree.tar"
cp "$install" "$work/src/install"
for f in "$@"; do
  d="$work/src/examples/$(basename "$(dirname "$f")")"
  mkdir -p "$d" && cp "$f" "$d/"
done
prefix="$work/prefix"
limit=120
failures=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
# Runs "$@" in $work with nothing of Bazel's environment (TEST_SRCDIR,
# RUNFILES_DIR, ...) and a watchdog.
clean() {
  (cd "$work" && env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$work/home" LC_ALL=C.UTF-8 \
    timeout "$limit" "$@")
}

echo "== install"
clean src/install --tree src/tree.tar --prefix "$prefix" || { echo "FAIL: tools/install"; exit 1; }
for f in bin/parklot lib/libparklot_preload.so lib/libparklot_diag.so lib/libparklot.so lib/libparklot.so.0 lib/libparklot.a \
         lib/parklot/parklot-info lib/parklot/parklot-top include/parklot/mutex.h lib/pkgconfig/parklot.pc \
         lib/cmake/parklot/parklotConfig.cmake share/man/man1/parklot.1 share/parklot/parklot_gdb.py; do
  [ -e "$prefix/$f" ] || fail "$f not installed"
done
grep -qx "prefix=$prefix" "$prefix/lib/pkgconfig/parklot.pc" || fail "parklot.pc does not name the prefix"

echo "== libparklot.so: SONAME and exports"
soname=$(readelf -d "$prefix/lib/libparklot.so.0" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = libparklot.so.0 ] && pass "SONAME $soname" || fail "SONAME '$soname'"
# Defined, exported symbols (not the version node), demangled.
exports="$(readelf --dyn-syms -W "$prefix/lib/libparklot.so.0" |
  awk '$7 != "UND" && $7 != "ABS" && ($5 == "GLOBAL" || $5 == "WEAK") { sub(/@.*/, "", $8); print $8 }' | c++filt)"
n=$(grep -c '^parklot::' <<<"$exports")
others=$(grep -v -e '^parklot::' -e '^typeinfo \(name \)\?for parklot::' -e '^vtable for parklot::' \
  -e '^TLS \(init\|wrapper\) function for parklot::' -e '^guard variable for parklot::' <<<"$exports")
grep -q '^parklot::internal::MutexCore::LockSlow' <<<"$exports" ||
  fail "parklot::internal::MutexCore::LockSlow not exported"
[ -z "$others" ] && pass "$n exports, all parklot::" || fail "exports besides parklot::: $others"
# The ABI holds no Abseil type (README, "ABI"): Abseil's inline namespace
# changes with every Abseil release a distribution ships.
abseil=$(grep 'absl::' <<<"$exports")
[ -z "$abseil" ] && pass "no Abseil type in the exports" || fail "exports with Abseil types: $abseil"
for f in lib/libparklot.so.0 lib/libparklot_preload.so lib/libparklot_diag.so lib/parklot/parklot-info lib/parklot/parklot-top; do
  if readelf -d "$prefix/$f" | grep -qE 'RPATH|RUNPATH'; then fail "$f has a run path into the build tree"; fi
done
stray=$(grep -rIl -e bazel-out -e execroot -e _solib "$prefix")
[ -z "$stray" ] || fail "installed files name Bazel's outputs: $stray"

echo "== headers: <parklot/...> with the prefix's include folder only"
cflags=$(clean env PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags parklot) || fail "pkg-config --cflags parklot"
if grep -rlE '^#include "(sync|runtime|hash|base)/' "$prefix/include"; then fail "installed headers use the source tree's include path"; fi
for h in "$prefix"/include/parklot/*.h; do
  # shellcheck disable=SC2086
  echo "#include <parklot/$(basename "$h")>" | clean g++ -std=c++20 -fsyntax-only $cflags -x c++ - ||
    fail "<parklot/$(basename "$h")> does not compile alone"
done

echo "== the examples, with CMake and make"
for variant in OFF ON; do
  b="build-cmake-$variant"
  if clean cmake -S src/examples/cmake -B "$b" -DCMAKE_PREFIX_PATH="$prefix" -DPARKLOT_STATIC="$variant" >"$work/log" 2>&1 &&
     clean cmake --build "$b" >>"$work/log" 2>&1 && clean "$b/queue"; then
    pass "cmake example (static=$variant)"
  else
    fail "cmake example (static=$variant)"; cat "$work/log"
  fi
done
for variant in "" static=1; do
  rm -rf "$work/make" && cp -r "$work/src/examples/make" "$work/make"
  # shellcheck disable=SC2086  # $variant: no word or one
  if clean env PKG_CONFIG_PATH="$prefix/lib/pkgconfig" make -C make $variant >"$work/log" 2>&1 && clean make/transfer; then
    pass "make example ${variant:-shared}"
  else
    fail "make example ${variant:-shared}"; cat "$work/log"
  fi
done
loaded=$(ldd "$work/build-cmake-OFF/queue" 2>&1)
grep -q "libparklot.so.0 => $prefix/lib/" <<<"$loaded" ||
  { fail "cmake example does not load the installed libparklot.so.0"; echo "$loaded"; }

echo "== the installed launcher"
info=$(clean "$prefix/bin/parklot" info) || fail "parklot info"
grep -qx 'preload shim: active' <<<"$info" && pass "parklot info: shim active" || fail "parklot info: $info"
# The shim and parklot-info each hold the runtime; only the shim's parses the
# environment, so a rejected knob is reported once.
warnings=$(clean env PARKLOT_POLICY=bogus "$prefix/bin/parklot" info 2>&1 >/dev/null |
  grep -c 'ignoring PARKLOT_POLICY=bogus')
[ "$warnings" = 1 ] && pass "parklot info reports a rejected knob once" ||
  fail "parklot info reported a rejected knob $warnings times"
clean "$prefix/bin/parklot" bench >/dev/null 2>"$work/log"
[ $? -eq 2 ] && grep -q 'source tree' "$work/log" && pass "parklot bench says it needs the source tree" ||
  fail "parklot bench installed: $(cat "$work/log")"
help=$(clean "$prefix/bin/parklot" --help) || fail "parklot --help"
# The man page's source, with escapes and font changes taken out (no man(1)
# needed): every option and variable --help names (but Bazel's) is in it.
man=$(sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' "$prefix/share/man/man1/parklot.1")
for word in $(sed '/^Bazel:/,$d' <<<"$help" | grep -oE -- '--[a-z]+|PARKLOT_[A-Z_]+' | sort -u); do
  grep -q -- "$word" <<<"$man" || fail "man page lacks $word (in --help)"
done
# It renders as man(1) shows it (a first-line '\" comment names
# preprocessors to man-db), and no Markdown is left in it.
if command -v man >/dev/null; then
  MANWIDTH=80 man -l "$prefix/share/man/man1/parklot.1" >"$work/man.txt" 2>"$work/man.err" &&
    [ ! -s "$work/man.err" ] && pass "man renders the page" ||
    fail "man -l parklot.1: $(head -c 300 "$work/man.err")"
fi
grep -q '](' "$prefix/share/man/man1/parklot.1" && fail "Markdown links left in the man page"

stockfish=/usr/games/stockfish
if [ -x "$stockfish" ]; then
  clean "$prefix/bin/parklot" run --stats -- "$stockfish" bench 16 2 8 >"$work/out" 2>"$work/stats" ||
    fail "stockfish under the installed parklot: exit $?"
  served=$(awk '/^served by parklot:/ { for (i = 4; i <= NF; ++i) if ($i ~ /^[0-9]+$/) n += $i } END { print n + 0 }' "$work/stats")
  grep -q 'Nodes searched' "$work/stats" "$work/out" || fail "stockfish bench did not finish"
  [ "$served" -gt 0 ] && pass "stockfish bench: $served lock operations served by parklot" ||
    { fail "stockfish: no lock operation served by parklot"; cat "$work/stats"; }
else
  fail "$stockfish not installed (tools/setup installs it)"
fi

((failures == 0)) || { echo "$failures failures"; exit 1; }
echo "all passed"
