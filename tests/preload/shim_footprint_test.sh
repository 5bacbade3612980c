#!/usr/bin/env bash
# The shim loads like part of libc (docs/design.md section 5.1):
# its DT_NEEDED list is libc, libm and the loader at most (and a sanitizer
# build's runtimes), not libgcc_s, whose unwinder it finds when first used
# (own_unwinder.c: the entry cost every process 6 page faults); it exports no C++ runtime symbol of the
# libsupc++ it links; a plain run maps nothing but the shim beyond what the
# program maps alone (no Abseil library, no libstdc++, not the diagnostics
# object), while PARKLOT_STATS, PARKLOT_DEADLOCK and PARKLOT_PROFILE load
# the diagnostics object from the shim's own directory; the diagnostics object exports its
# entry point alone.
#
#   shim_footprint_test.sh SHIM DIAG PROG
set -uo pipefail
root=$PWD
source "$root/tests/preload/shim_preload.sh"
diag=$2
shim_test_begin "$1" "$3" footprint
shim=$1

needed=$(readelf -d "$shim" | awk '/\(NEEDED\)/ {gsub(/[][]/, "", $5); print $5}')
sanitized=0
gcc_s=0
for lib in $needed; do
  case "$lib" in
    libc.so.6|libm.so.6|ld-linux-x86-64.so.2) ;;
    libasan.so.*|libubsan.so.*) sanitized=1 ;;  # --config=asan's runtimes
    libgcc_s.so.1) gcc_s=1 ;;
    *) fail "the shim needs $lib (allowed: libc, libm, the loader)" ;;
  esac
done
[ "$gcc_s" -eq 1 ] && [ "$sanitized" -eq 0 ] &&
  fail "the shim needs libgcc_s.so.1 (its unwinder is found when first used)"
echo "shim DT_NEEDED: $(echo $needed)"

# Address space: every process that preloads the shim maps its segments
# whole, so a small RLIMIT_AS (ulimit -v) must not lose more to it than to
# a library of its kind. The loadable segments' memory size, .bss included
# (the registry keeps its first 16,384 indices there and maps the rest as
# threads reach them; before: 13.7 MB of .bss, and a plain /bin/true under
# ulimit -v 16000 failed to start).
load_bytes=0
for memsz in $(readelf -lW "$shim" | awk '$1 == "LOAD" {print $6}'); do
  load_bytes=$((load_bytes + memsz))
done
load_kib=$((load_bytes / 1024))
echo "shim loadable segments: $load_kib KiB"
if [ "$sanitized" -eq 0 ] && [ "$load_kib" -gt 3072 ]; then
  fail "the shim's loadable segments take $load_kib KiB of address space (at most 3 MiB)"
fi

# Defined dynamic symbols: the served functions (C names) and the shim's
# own; no C++ name (mangled _Z...) and none of libsupc++'s __cxa_/__gxx_.
exported=$(nm -D --defined-only "$shim" | awk '$2 ~ /^[TWVDBRi]$/ {print $3}')
bad=$(grep -E '^(_Z|__cxa_|__gxx_|_Unwind_)' <<<"$exported")
[ -z "$bad" ] || fail "the shim exports C++ runtime symbols: $(echo $bad | head -c 300)"
grep -qx 'parklot_preload_active@@PARKLOT_PRELOAD' <<<"$exported" ||
  fail "parklot_preload_active is not exported"

[ -f "$diag" ] || fail "no diagnostics object at $diag"
diag_exports=$(nm -D --defined-only "$diag" | awk '$2 ~ /^[TWVDBRi]$/ {print $3}')
[ "$diag_exports" = parklot_diag_open ] ||
  fail "the diagnostics object exports more than parklot_diag_open: $(echo $diag_exports | head -c 300)"

mapped() {  # label, then environment assignments: the run's mapped files
  local label=$1
  shift
  env "$@" LD_PRELOAD="$PRELOAD" timeout 60 "$prog" >"$work/maps" 2>"$work/err" ||
    fail "$label: exit $?: $(head -c 300 "$work/err")"
  grep -qx 'shim active' "$work/maps" || fail "$label: the shim is not active"
}

# Without the shim: what the program maps itself (Bazel links C programs
# against libstdc++ too). A plain run under the shim adds the shim alone
# (and a sanitizer build's runtimes).
env -u LD_PRELOAD timeout 60 "$prog" | sort -u >"$work/own" || fail "the program alone failed"
mapped "plain run"
sort -u "$work/maps" | comm -13 "$work/own" - | grep '^/' >"$work/added"
while read -r path; do
  case "$path" in
    "$(readlink -f "$shim")"|*/libparklot_preload.so) ;;
    */libasan.so*|*/libubsan.so*|*/libstdc++.so*) [ "$sanitized" -eq 1 ] ||
      fail "a plain run maps $path" ;;
    *) fail "a plain run maps $path" ;;
  esac
done <"$work/added"
[ -s "$work/err" ] && fail "a plain run wrote to stderr: $(head -c 300 "$work/err")"

for knob in PARKLOT_STATS=1 PARKLOT_DEADLOCK=report "PARKLOT_PROFILE=$work/prof.%p"; do
  mapped "$knob" "$knob"
  grep -q '/libparklot_diag\.so$' "$work/maps" ||
    fail "$knob: the diagnostics object is not loaded: $(head -c 300 "$work/err")"
  grep -q 'did not load\|detection off' "$work/err" &&
    fail "$knob: $(head -c 300 "$work/err")"
done

[ "$status" -eq 0 ] && echo PASS
exit "$status"
