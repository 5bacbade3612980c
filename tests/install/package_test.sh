#!/usr/bin/env bash
# The Debian packages from tools/package: libparklot0 (the runtime library),
# libparklot-dev (headers, .a, .so link, pkg-config, CMake), parklot (the
# launcher and the objects loaded by path, in its private folder) and their
# dbgsym packages. Checks which file is in which package, the control data
# (Depends declares the packages of every library the objects load), the
# dates (SOURCE_DATE_EPOCH, never 1970; two builds are identical), the
# stripped objects and their debug files, SONAME and paths. Then dpkg
# installs them into a scratch root: `parklot info` and `parklot run` from
# there use the packaged shim, the CMake example and a pkg-config build use
# the packaged library, and dpkg removes them leaving no file behind.
# apt-get (simulated) resolves their dependencies against this system's
# packages. lintian, where installed (tools/setup installs it), reports no
# error and no warning but the expected ones; without lintian that part is
# skipped and says so.
#
# usage: package_test.sh TREE.tar tools/install tools/package EXAMPLE-FILES...
set -uo pipefail

tree=$1 install=$2 package=$3
shift 3
work="$(mktemp -d /tmp/parklot-package-test.XXXXXX)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src/examples"
cp "$tree" "$work/src/tree.tar"
cp "$install" "$package" "$work/src/"
for f in "$@"; do
  d="$work/src/examples/$(basename "$(dirname "$f")")"
  mkdir -p "$d" && cp "$f" "$d/"
done
limit=120
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
# In $work, without Bazel's environment; sbin on PATH for dpkg (ldconfig).
clean() {
  (cd "$work" && env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME="$work" LC_ALL=C.UTF-8 timeout "$limit" "$@")
}
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
arch=$(dpkg --print-architecture)

# Three builds: two at a fixed date (identical bytes), one with the date
# tools/package finds itself (here, outside a checkout: the tree's).
epoch=1767225600  # 2026-01-01 00:00:00 UTC
list=$(clean env SOURCE_DATE_EPOCH=$epoch src/package --tree src/tree.tar --out "$work/out") ||
  { echo "FAIL: tools/package"; exit 1; }
again=$(clean env SOURCE_DATE_EPOCH=$epoch src/package --tree src/tree.tar --out "$work/again") ||
  fail "tools/package, second build"
own=$(clean src/package --tree src/tree.tar --out "$work/own") || fail "tools/package without SOURCE_DATE_EPOCH"
mapfile -t made <<<"$list"
version=$(dpkg-deb -f "${made[0]}" Version)
names=(libparklot0 libparklot-dev parklot libparklot0-dbgsym parklot-dbgsym)
exts=(deb deb deb ddeb ddeb)
declare -A pkg=()
for i in "${!names[@]}"; do
  f="$work/out/${names[$i]}_${version}_${arch}.${exts[$i]}"
  if [ "${made[$i]:-}" = "$f" ] && [ -f "$f" ]; then pkg[${names[$i]}]=$f; else fail "no ${names[$i]} at '$f' (made: $list)"; fi
done
((${#made[@]} == ${#names[@]})) && pass "built $(cd "$work/out" && echo *)" || fail "made ${#made[@]} packages: $list"
((failures == 0)) || { echo "$failures failures"; exit 1; }
for n in "${names[@]}"; do
  d="${pkg[$n]#"$work/out/"}"
  cmp -s "$work/out/$d" "$work/again/$d" || fail "$d differs between two builds at one SOURCE_DATE_EPOCH"
done
pass "two builds at one SOURCE_DATE_EPOCH are identical"

echo "== the split: which file in which package"
# Files and links of a package, "./" dropped; the internal headers counted
# apart.
contents() { dpkg-deb -c "$1" | awk '$1 !~ /^d/ { print $6 }' | sed 's|^\./||' | sort; }
expect() {  # PACKAGE, then the expected list on stdin
  local got want
  got=$(contents "${pkg[$1]}" | grep -v '^usr/include/parklot/internal/')
  want=$(sort)
  [ "$got" = "$want" ] && pass "$1: $(wc -l <<<"$got") files where expected" ||
    fail "$1 holds other files: $(diff <(echo "$want") <(echo "$got") | grep '^[<>]' | tr '\n' ' ')"
}
expect libparklot0 <<EOF
usr/lib/$ma/libparklot.so.0
usr/share/doc/libparklot0/changelog.Debian.gz
usr/share/doc/libparklot0/copyright
EOF
expect libparklot-dev <<EOF
usr/include/parklot/barrier.h
usr/include/parklot/condvar.h
usr/include/parklot/latch.h
usr/include/parklot/mutex.h
usr/include/parklot/once.h
usr/include/parklot/parklot.h
usr/include/parklot/scheduling.h
usr/include/parklot/semaphore.h
usr/include/parklot/shared_mutex.h
usr/lib/$ma/cmake/parklot/parklotConfig.cmake
usr/lib/$ma/cmake/parklot/parklotConfigVersion.cmake
usr/lib/$ma/libparklot.a
usr/lib/$ma/libparklot.so
usr/lib/$ma/pkgconfig/parklot.pc
usr/share/doc/libparklot-dev/changelog.Debian.gz
usr/share/doc/libparklot-dev/copyright
EOF
internal=$(contents "${pkg[libparklot-dev]}" | grep -c '^usr/include/parklot/internal/.*\.h$')
((internal > 0)) && pass "libparklot-dev: $internal internal headers" || fail "libparklot-dev: no internal headers"
expect parklot <<EOF
usr/bin/parklot
usr/lib/$ma/parklot/libparklot_diag.so
usr/lib/$ma/parklot/libparklot_preload.so
usr/lib/$ma/parklot/parklot-info
usr/lib/$ma/parklot/parklot-run
usr/lib/$ma/parklot/parklot-top
usr/lib/$ma/parklot/version
usr/share/doc/parklot/changelog.Debian.gz
usr/share/doc/parklot/copyright
usr/share/man/man1/parklot.1.gz
usr/share/parklot/parklot_gdb.py
EOF
for n in libparklot0 parklot; do
  got=$(contents "${pkg[$n-dbgsym]}")
  ids=$(dpkg-deb -f "${pkg[$n-dbgsym]}" Build-Ids)
  want=$({ for id in $ids; do echo "usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug"; done
           echo "usr/share/doc/$n-dbgsym"; } | sort)
  [ -n "$ids" ] && [ "$got" = "$want" ] && pass "$n-dbgsym: a debug file for each of its $(wc -w <<<"$ids") build IDs" ||
    fail "$n-dbgsym holds $got, its Build-Ids: $ids"
done

echo "== control data"
for n in "${names[@]}"; do
  m=$(dpkg-deb -f "${pkg[$n]}" Maintainer)
  [[ "$m" =~ ^[^\<]+\ \<[^@]+@[^@]+\>$ ]] && [[ "$m" != *@invalid\> ]] || fail "$n: Maintainer '$m'"
done
pass "Maintainer: $(dpkg-deb -f "${pkg[parklot]}" Maintainer)"
[[ "$version" =~ -1$ ]] && pass "version $version (a Debian revision)" || fail "version $version has no Debian revision"
dev_depends=$(dpkg-deb -f "${pkg[libparklot-dev]}" Depends)
grep -qF "libparklot0 (= $version)" <<<"$dev_depends" && pass "libparklot-dev depends on libparklot0 (= $version)" ||
  fail "libparklot-dev Depends: $dev_depends"
grep -q 'libabsl-dev' <<<"$dev_depends" || fail "libparklot-dev does not depend on libabsl-dev"
for n in libparklot0 parklot; do
  d=$(dpkg-deb -f "${pkg[$n-dbgsym]}" Depends)
  [ "$d" = "$n (= $version)" ] || fail "$n-dbgsym Depends: $d"
  [ "$(dpkg-deb -f "${pkg[$n-dbgsym]}" Section)" = debug ] || fail "$n-dbgsym not in section debug"
done
dpkg-deb -e "${pkg[libparklot0]}" "$work/ctl"
[ "$(cat "$work/ctl/shlibs")" = "libparklot 0 libparklot0 (>= ${version%-*})" ] && pass "libparklot0 shlibs" ||
  fail "libparklot0 shlibs: $(cat "$work/ctl/shlibs")"
grep -qx 'activate-noawait ldconfig' "$work/ctl/triggers" && pass "libparklot0 triggers ldconfig" ||
  fail "libparklot0 triggers: $(cat "$work/ctl/triggers")"

x="$work/x"
for n in "${names[@]}"; do dpkg-deb -x "${pkg[$n]}" "$x"; done
private="usr/lib/$ma/parklot"
# Every library an object loads (but parklot's own) comes from a package
# its package declares.
for pair in "libparklot0 usr/lib/$ma/libparklot.so.0" "parklot $private/libparklot_preload.so" \
            "parklot $private/libparklot_diag.so" "parklot $private/parklot-info" "parklot $private/parklot-run" \
            "parklot $private/parklot-top"; do
  n=${pair%% *} elf=${pair#* }
  depends=$(dpkg-deb -f "${pkg[$n]}" Depends)
  declared=$(tr ',' '\n' <<<"$depends" | awk '{ print $1 }')
  # With what they depend on, as installed here (a library's own libraries,
  # libdw1's libelf1 and zlib1g, come with it): three levels.
  for _ in 1 2 3; do
    declared=$( (echo "$declared"; for q in $declared; do dpkg-query -W -f='${Depends}\n' "$q" 2>/dev/null; done) |
      tr ',|' '\n\n' | awk 'NF { sub(/:.*/, "", $1); print $1 }' | sort -u)
  done
  while read -r lib path; do
    [[ "$lib" == libparklot* ]] && continue
    p=$(dpkg -S "$path" 2>/dev/null || dpkg -S "$(readlink -f "$path")" 2>/dev/null)
    p=${p%%:*}
    if [ -z "$p" ]; then fail "$elf: $lib ($path) belongs to no package"
    elif ! grep -qxF "$p" <<<"$declared"; then fail "$elf needs $lib from $p, not in $n's Depends"; fi
  done < <(LD_LIBRARY_PATH="$x/usr/lib/$ma" ldd "$x/$elf" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }')
  unused=$(LD_LIBRARY_PATH="$x/usr/lib/$ma" ldd -u "$x/$elf" | sed -n 's/^\t//p' | tr '\n' ' ')
  [ -z "$unused" ] || fail "$elf links libraries it does not use: $unused"
done
pass "Depends declares the libraries the objects load"
# The shim loads with libc alone (no liburcu: retired tables stay mapped;
# no Abseil, no libstdc++: those are the diagnostics object's).
extra=$(readelf -d "$x/$private/libparklot_preload.so" |
  awk '/\(NEEDED\)/ {gsub(/[][]/, "", $5); print $5}' |
  grep -vxE 'libc\.so\.6|libm\.so\.6|libgcc_s\.so\.1|ld-linux-x86-64\.so\.2')
[ -z "$extra" ] && pass "the shim needs libc, libm, libgcc_s and the loader at most" ||
  fail "the shim needs $(echo $extra)"
grep -q libabsl <<<"$(dpkg-deb -f "${pkg[parklot]}" Depends)" && pass "parklot declares Abseil (the diagnostics object)" ||
  fail "Abseil missing from parklot's Depends"

echo "== dates"
stamp=$(date -u -d "@$epoch" '+%F %T')
for n in "${names[@]}"; do
  dates=$(dpkg-deb --fsys-tarfile "${pkg[$n]}" | TZ=UTC tar -tv --full-time | awk '{ print $4, $5 }' | sort -u)
  [ "$dates" = "$stamp" ] || fail "$n: files dated $(echo $dates), not SOURCE_DATE_EPOCH $stamp"
done
pass "every file dated SOURCE_DATE_EPOCH ($stamp)"
for f in "$work"/own/*; do
  dates=$(dpkg-deb --fsys-tarfile "$f" | TZ=UTC tar -tv --full-time | awk '{ print $4 }' | sort -u)
  if [ "$(wc -l <<<"$dates")" != 1 ] || [[ "$dates" == 1970-* ]]; then fail "$(basename "$f") without SOURCE_DATE_EPOCH: dated $(echo $dates)"; fi
done
pass "without SOURCE_DATE_EPOCH: one date, not 1970 ($(dpkg-deb --fsys-tarfile "$work/own/$(basename "${pkg[parklot]}")" | TZ=UTC tar -tv --full-time | awk 'NR == 1 { print $4 }'))"
for n in libparklot0 libparklot-dev parklot; do
  [[ "$(zcat "$x/usr/share/doc/$n/changelog.Debian.gz")" == "parklot ($version) "* ]] ||
    fail "$n: changelog.Debian.gz does not name $version"
done

echo "== stripped objects, their debug files, SONAME and paths"
for elf in "usr/lib/$ma/libparklot.so.0" "$private/libparklot_preload.so" "$private/libparklot_diag.so" \
           "$private/parklot-info" "$private/parklot-run" "$private/parklot-top"; do
  sections=$(readelf -SW "$x/$elf")
  if grep -qE ' \.(symtab|debug_[a-z]+) ' <<<"$sections"; then fail "$elf is not stripped"; continue; fi
  grep -q ' \.gnu_debuglink ' <<<"$sections" || fail "$elf has no .gnu_debuglink"
  id=$(readelf -n "$x/$elf" | sed -n 's/^ *Build ID: //p')
  dbg="$x/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug"
  if [ -z "$id" ] || [ ! -f "$dbg" ]; then fail "$elf: no debug file for build ID '$id'"; continue; fi
  # (readelf says a debug file of a program has no interpreter: not ours.)
  sections=$(readelf -SW "$dbg" 2>/dev/null)
  grep -qE ' \.(zdebug|debug)_info ' <<<"$sections" || fail "$elf: its debug file has no DWARF"
  grep -q ' \.symtab ' <<<"$sections" || fail "$elf: its debug file has no symbol table"
done
pass "objects stripped, each with its debug file (DWARF and symbols) under /usr/lib/debug/.build-id"
sections=$(readelf -SW "$x/usr/lib/$ma/libparklot.a")
grep -q ' \.debug_' <<<"$sections" && fail "libparklot.a keeps its debug sections" ||
  pass "libparklot.a stripped of debug sections"
soname=$(readelf -d "$x/usr/lib/$ma/libparklot.so.0" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libparklot.so.0 ] && pass "SONAME libparklot.so.0" || fail "SONAME '$soname'"
[ "$(readlink "$x/usr/lib/$ma/libparklot.so")" = libparklot.so.0 ] || fail "libparklot.so does not link to libparklot.so.0"
grep -qx "libdir=\${prefix}/lib/$ma" "$x/usr/lib/$ma/pkgconfig/parklot.pc" && pass "parklot.pc: libdir lib/$ma" ||
  fail "parklot.pc: $(grep libdir "$x/usr/lib/$ma/pkgconfig/parklot.pc")"
grep -qx "pkglib=lib/$ma/parklot" "$x/usr/bin/parklot" && pass "the launcher looks in $private" ||
  fail "the launcher: $(grep '^pkglib=' "$x/usr/bin/parklot")"

echo "== lintian"
if lintian=$(command -v lintian) && [ -x "$lintian" ]; then
  # The warnings expected, each with its reason:
  #   initial-upload-closes-no-bugs: the changelog's single entry closes
  #     no ITP bug; the packages are not uploaded to Debian's archive.
  expected='^W: [a-z0-9-]+: initial-upload-closes-no-bugs '
  # Status 0: no error, 1: errors (--fail-on error), anything else: it did
  # not run.
  clean lintian --tag-display-limit 0 "${pkg[@]}" >"$work/lintian" 2>&1
  status=$?
  errors=$(grep -c '^E: ' "$work/lintian")
  others=$(grep -E '^[EW]: ' "$work/lintian" | grep -vE "$expected")
  if ((status > 1)); then
    fail "lintian did not run (status $status): $(tail -3 "$work/lintian")"
  elif ((status == 0 && errors == 0)) && [ -z "$others" ]; then
    pass "lintian: 0 errors, $(grep -c '^W: ' "$work/lintian") expected warnings"
  else
    fail "lintian: $errors errors"; grep -E '^[EW]: ' "$work/lintian"
  fi
else
  echo "skipped: lintian is not installed (tools/setup installs it)"
fi

echo "== dpkg into a scratch root"
root="$work/root"
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/var/lib/dpkg/triggers"
touch "$root/var/lib/dpkg/status" "$root/var/lib/dpkg/available"
# The scratch root's dpkg database knows none of the dependencies (they are
# this system's, checked above): --force-depends.
dpkg_root() { clean dpkg --root="$root" --force-not-root --force-depends --log=/dev/null "$@"; }
dpkg_root -i "${pkg[@]}" >"$work/log" 2>&1 && pass "dpkg -i (the five packages)" || { fail "dpkg -i"; cat "$work/log"; }
for n in "${names[@]}"; do
  status=$(clean dpkg-query --root="$root" -W -f='${Status}' "$n" 2>&1)
  [ "$status" = "install ok installed" ] || fail "$n status: $status"
done
info=$(clean "$root/usr/bin/parklot" info 2>&1)
grep -qx 'preload shim: active' <<<"$info" && pass "parklot info from the package: shim active" ||
  fail "parklot info from the package: $info"
preload=$(clean "$root/usr/bin/parklot" run -- sh -c 'echo "$LD_PRELOAD"' 2>&1)
[ "$preload" = "$root/$private/libparklot_preload.so" ] && pass "parklot run preloads the packaged shim" ||
  fail "parklot run: LD_PRELOAD=$preload"
v=$(clean "$root/usr/bin/parklot" --version 2>&1)
grep -q "^parklot " <<<"$v" && [[ "$v" != *unknown* ]] && pass "parklot --version: $v" || fail "parklot --version: $v"

# The library from the packages: the CMake example (find_package searches
# PREFIX/lib/TRIPLET/cmake) and a pkg-config build (the sysroot puts the
# scratch root before its paths).
for variant in OFF ON; do
  b="build-cmake-$variant"
  if clean cmake -S src/examples/cmake -B "$b" -DCMAKE_PREFIX_PATH="$root/usr" -DPARKLOT_STATIC="$variant" >"$work/log" 2>&1 &&
     clean cmake --build "$b" >>"$work/log" 2>&1 && clean env LD_LIBRARY_PATH="$root/usr/lib/$ma" "$b/queue" >>"$work/log" 2>&1; then
    pass "cmake example against the packages (static=$variant)"
  else
    fail "cmake example against the packages (static=$variant)"; cat "$work/log"
  fi
done
grep -qx "parklot_DIR:PATH=$root/usr/lib/$ma/cmake/parklot" "$work/build-cmake-OFF/CMakeCache.txt" ||
  fail "CMake found another parklot: $(grep '^parklot_DIR' "$work/build-cmake-OFF/CMakeCache.txt")"
cat >"$work/count.cc" <<'EOF'
#include <parklot/mutex.h>
#include <mutex>
#include <thread>
parklot::Mutex mu;
long count = 0;
void Work() { for (int i = 0; i < 100000; ++i) { std::lock_guard lock(mu); ++count; } }
int main() {
  { std::jthread a(Work), b(Work); }
  return count == 200000 ? 0 : 1;
}
EOF
pc() { clean env PKG_CONFIG_PATH="$root/usr/lib/$ma/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$root" pkg-config "$@"; }
# shellcheck disable=SC2046
if clean g++ -std=c++20 -o count count.cc $(pc --cflags --libs parklot) >"$work/log" 2>&1 &&
   clean env LD_LIBRARY_PATH="$root/usr/lib/$ma" ./count; then
  pass "pkg-config build against the packages"
else
  fail "pkg-config build against the packages"; cat "$work/log"
fi

for n in libparklot0-dbgsym parklot-dbgsym parklot libparklot-dev libparklot0; do
  dpkg_root -P "$n" >"$work/log" 2>&1 || { fail "dpkg -P $n"; cat "$work/log"; }
done
pass "dpkg -P"
left=$(cd "$root" && find . -mindepth 1 -not -path './var' -not -path './var/*')
[ -z "$left" ] && pass "removed cleanly" || fail "left after removal: $left"

echo "== apt-get install ./libparklot0 ./libparklot-dev ./parklot (simulated)"
if out=$(clean apt-get -s -o Debug::NoLocking=1 install "${pkg[libparklot0]}" "${pkg[libparklot-dev]}" "${pkg[parklot]}" 2>&1) &&
   grep -q '^Inst libparklot0 ' <<<"$out" && grep -q '^Inst libparklot-dev ' <<<"$out" && grep -q '^Inst parklot ' <<<"$out"; then
  pass "apt-get resolves the dependencies"
else
  fail "apt-get -s install: $out"
fi

((failures == 0)) || { echo "$failures failures"; exit 1; }
echo "all passed"
