#!/usr/bin/env bash
# Packs the many-core kit (tools/bench_kit/BUILD): one tarball that runs
# on a machine with glibc and nothing else installed.
#
#   make_kit.sh OUT.tar.gz RUN_SH VERSION SUITE FUTEX_HASH FUTEX_SCHBENCH SHIM
#
# The benchmarks come linked with Abseil's archives (bench/BUILD,
# KIT_LINKOPTS) and a run path to the kit's lib/. Every other object they
# or the shim need that glibc does not provide (Google Benchmark, which
# Debian ships only as a shared object, and the C++ runtime it needs) is
# copied into lib/ from where this machine's loader finds it. The tarball
# is reproducible: sorted names, one time stamp, no owners.
set -euo pipefail
out=$1 run_sh=$2 version=$3 suite=$4 futex_hash=$5 futex_schbench=$6 shim=$7

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
kit=$work/parklot-bench-kit
mkdir -p "$kit/bin" "$kit/lib"
install -m 0755 "$run_sh" "$kit/run.sh"
install -m 0755 "$suite" "$kit/bin/suite"
install -m 0755 "$futex_hash" "$kit/bin/futex_hash"
install -m 0755 "$futex_schbench" "$kit/bin/futex_schbench"
install -m 0755 "$shim" "$kit/lib/libparklot_preload.so"

# glibc's own objects: present wherever glibc is.
is_glibc() {
  case "$1" in
    libc.so.6 | libm.so.6 | libpthread.so.0 | libdl.so.2 | librt.so.1 | \
      ld-linux-x86-64.so.2 | linux-vdso.so.1) return 0 ;;
  esac
  return 1
}

# Copies the non-glibc objects an object needs, and theirs, into lib/.
bundle() {
  local obj=$1 name path
  while read -r name path; do
    is_glibc "$name" && continue
    [ -e "$kit/lib/$name" ] && continue
    if [ -z "$path" ] || [ ! -e "$path" ]; then
      echo "make_kit: $obj needs $name, which this machine's loader cannot find" >&2
      exit 1
    fi
    install -m 0644 "$(readlink -f "$path")" "$kit/lib/$name"
    bundle "$kit/lib/$name"
  done < <(ldd "$obj" | awk '$2 == "=>" { print $1, $3 }')
}
for obj in "$kit"/bin/* "$kit/lib/libparklot_preload.so"; do
  bundle "$obj"
done

# The newest glibc symbol version any object of the kit imports (the
# shim also defines glibc's versions, which say nothing): the target's
# glibc must be at least that (2.36 with Debian 12's libstdc++, which
# imports arc4random).
need=$(for f in "$kit"/bin/* "$kit"/lib/*; do
  objdump -T "$f" | awk '/\*UND\*/' | grep -o 'GLIBC_[0-9.]*' || true
done | sed 's/GLIBC_//' | sort -t. -k1,1n -k2,2n -k3,3n -u | tail -1)

{
  echo "parklot many-core benchmark kit, version $(cat "$version")"
  echo "needs: Linux x86-64 with glibc $need or later (getconf GNU_LIBC_VERSION)"
  echo "run: ./run.sh [--quick] [--out DIR]   (docs/results.md, \"The many-core kit\")"
  echo "files:"
  (cd "$kit" && find . -type f | LC_ALL=C sort | sed 's|^\./|  |')
} >"$kit/MANIFEST"

tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
  -C "$work" -cf - parklot-bench-kit | gzip -n >"$out"
