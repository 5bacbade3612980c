#!/usr/bin/env bash
# The Debian package from tools/package: its control data declares the
# packages of every library its programs load, dpkg installs it into a
# scratch root, `parklot info` from there reports the shim active, and dpkg
# removes it leaving no file behind. apt-get (simulated) resolves its
# dependencies against this system's packages.
#
# usage: package_test.sh TREE.tar tools/install tools/package
set -uo pipefail

tree=$1 install=$2 package=$3
work="$(mktemp -d /tmp/parklot-package-test.XXXXXX)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src"
cp "$tree" "$work/src/tree.tar"
cp "$install" "$package" "$work/src/"
limit=120
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
# In $work, without Bazel's environment; sbin on PATH for dpkg (ldconfig).
clean() {
  (cd "$work" && env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME="$work" LC_ALL=C.UTF-8 timeout "$limit" "$@")
}

deb=$(clean src/package --tree src/tree.tar --out "$work/out") || { echo "FAIL: tools/package"; exit 1; }
[ -f "$deb" ] || { echo "FAIL: no package at '$deb'"; exit 1; }
pass "built $(basename "$deb")"

echo "== Depends"
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
# The package names alone, one a line.
declared=$(tr ',' '\n' <<<"$depends" | awk '{ print $1 }')
# With what they depend on, as installed here (a library's own libraries,
# libdw1's libelf1 and zlib1g, come with it): three levels.
closure=$declared
for _ in 1 2 3; do
  closure=$( (echo "$closure"; for p in $closure; do dpkg-query -W -f='${Depends}\n' "$p" 2>/dev/null; done) |
    tr ',|' '\n\n' | awk 'NF { sub(/:.*/, "", $1); print $1 }' | sort -u)
done
dpkg-deb -x "$deb" "$work/x"
for elf in usr/bin/parklot usr/lib/libparklot.so.0 usr/lib/libparklot_preload.so usr/lib/libparklot_diag.so usr/lib/parklot/parklot-info usr/lib/parklot/parklot-top; do
  [ -e "$work/x/$elf" ] || { fail "$elf not in the package"; continue; }
  [ "$(head -c 4 "$work/x/$elf")" = $'\x7fELF' ] || continue
  # Every library it loads (but parklot's own) comes from a declared package.
  while read -r lib path; do
    [[ "$lib" == libparklot* ]] && continue
    pkg=$(dpkg -S "$path" 2>/dev/null || dpkg -S "$(readlink -f "$path")" 2>/dev/null)
    pkg=${pkg%%:*}
    if [ -z "$pkg" ]; then fail "$elf: $lib ($path) belongs to no package"
    elif ! grep -qxF "$pkg" <<<"$closure"; then fail "$elf needs $lib from $pkg, not in Depends"; fi
  done < <(LD_LIBRARY_PATH="$work/x/usr/lib" ldd "$work/x/$elf" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }')
  # And it needs only libraries it uses (dpkg-shlibdeps warns of the rest).
  unused=$(LD_LIBRARY_PATH="$work/x/usr/lib" ldd -u "$work/x/$elf" | sed -n 's/^\t//p' | tr '\n' ' ')
  [ -z "$unused" ] || fail "$elf links libraries it does not use: $unused"
done
# The shim loads with libc alone (no liburcu: retired tables stay mapped;
# no Abseil, no libstdc++: those are the diagnostics object's).
extra=$(readelf -d "$work/x/usr/lib/libparklot_preload.so" |
  awk '/\(NEEDED\)/ {gsub(/[][]/, "", $5); print $5}' |
  grep -vxE 'libc\.so\.6|libm\.so\.6|libgcc_s\.so\.1|ld-linux-x86-64\.so\.2')
[ -z "$extra" ] && pass "the shim needs libc, libm, libgcc_s and the loader at most" ||
  fail "the shim needs $(echo $extra)"
grep -q libabsl <<<"$depends" && pass "Abseil declared" || fail "Abseil missing from Depends"

echo "== dpkg into a scratch root"
root="$work/root"
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/var/lib/dpkg/triggers"
touch "$root/var/lib/dpkg/status" "$root/var/lib/dpkg/available"
# The scratch root's dpkg database knows none of the dependencies (they are
# this system's, checked above): --force-depends.
dpkg_root() { clean dpkg --root="$root" --force-not-root --force-depends --log=/dev/null "$@"; }
dpkg_root -i "$deb" >"$work/log" 2>&1 && pass "dpkg -i" || { fail "dpkg -i"; cat "$work/log"; }
status=$(clean dpkg-query --root="$root" -W -f='${Status}' parklot 2>&1)
[ "$status" = "install ok installed" ] && pass "status: $status" || fail "status: $status"
info=$(clean "$root/usr/bin/parklot" info 2>&1)
grep -qx 'preload shim: active' <<<"$info" && pass "parklot info from the package: shim active" ||
  fail "parklot info from the package: $info"
dpkg_root -P parklot >"$work/log" 2>&1 && pass "dpkg -P" || { fail "dpkg -P"; cat "$work/log"; }
left=$(cd "$root" && find . -mindepth 1 -not -path './var' -not -path './var/*')
[ -z "$left" ] && pass "removed cleanly" || fail "left after removal: $left"

echo "== apt-get install ./$(basename "$deb") (simulated)"
if out=$(clean apt-get -s -o Debug::NoLocking=1 install "$deb" 2>&1) && grep -q '^Inst parklot ' <<<"$out"; then
  pass "apt-get resolves the dependencies"
else
  fail "apt-get -s install: $out"
fi

((failures == 0)) || { echo "$failures failures"; exit 1; }
echo "all passed"
