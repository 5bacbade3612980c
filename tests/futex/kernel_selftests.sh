#!/usr/bin/env bash
# The Linux kernel's own futex conformance tests (tools/testing/selftests/
# futex/functional, from Debian's linux-source-6.12 package), run on the
# kernel and under the shim with PARKLOT_SYSCALL_FUTEX=1: every invocation of
# the suite's run.sh, RUNS times each; the served path must give the
# kernel's result (exit status: 0 pass, 4 skip, else fail) every time.
#
#   kernel_selftests.sh [--runs=N] [--tarball=PATH] [--shim=PATH]
#
# Needs gcc and the tarball (apt-get install linux-source-6.12); without the
# tarball it skips (exit 0 with a note). Tagged manual in BUILD: it takes
# about a minute per run and needs that package.
set -uo pipefail

runs=3
tarball=/usr/src/linux-source-6.12.tar.xz
shim="$PWD/preload/libparklot_preload.so"
for a in "$@"; do
  case "$a" in
    --runs=*) runs=${a#--runs=} ;;
    --tarball=*) tarball=${a#--tarball=} ;;
    --shim=*) shim=${a#--shim=} ;;
    *) echo "kernel_selftests.sh: unknown argument $a" >&2; exit 2 ;;
  esac
done
if [ ! -f "$tarball" ]; then
  echo "SKIP: $tarball not found (apt-get install linux-source-6.12)"
  exit 0
fi
[ -f "$shim" ] || { echo "FAIL: shim not found at $shim"; exit 1; }
if [ -f tests/preload/shim_preload.sh ]; then
  # shellcheck source=tests/preload/shim_preload.sh
  source tests/preload/shim_preload.sh || exit 1
  shim_preload "$shim" || exit 1
  preload=$PRELOAD
else
  preload=$shim
fi

work="${TEST_TMPDIR:-$(mktemp -d)}/kselftests"
rm -rf "$work" && mkdir -p "$work/bin" || exit 1
top=$(tar tf "$tarball" | head -1 | cut -d/ -f1)
tar xf "$tarball" -C "$work" "$top/tools/testing/selftests/futex" \
  "$top/tools/testing/selftests/kselftest.h" || { echo "FAIL: tar"; exit 1; }
src="$work/$top/tools/testing/selftests/futex/functional"
for c in "$src"/*.c; do
  # -include libgen.h: the tests call basename() without declaring it.
  gcc -O2 -w -D_GNU_SOURCE -pthread -include libgen.h -I"$src/../include" \
    -I"$src/../.." -o "$work/bin/$(basename "$c" .c)" "$c" -lpthread -lrt ||
    { echo "FAIL: building $c"; exit 1; }
done

# The invocations of run.sh, without its colour option.
mapfile -t cases < <(sed -n 's|^\./\(futex_[a-z_]*\) \$COLOR\(.*\)$|\1\2|p' "$src/run.sh")
[ "${#cases[@]}" -gt 0 ] || { echo "FAIL: no test in run.sh"; exit 1; }

verdict() {  # exit status -> pass/skip/fail
  case "$1" in 0) echo pass ;; 4) echo skip ;; 124) echo hang ;; *) echo "fail($1)" ;; esac
}
status=0
differ=0
kpass=0
spass=0
total=0
for ((r = 1; r <= runs; r++)); do
  for c in "${cases[@]}"; do
    read -ra argv <<<"$c"
    (cd "$work/bin" && timeout 60 "./${argv[0]}" "${argv[@]:1}" >"$work/k.out" 2>&1)
    k=$(verdict $?)
    (cd "$work/bin" && timeout 60 env LD_PRELOAD="$preload" PARKLOT_SYSCALL_FUTEX=1 \
      "./${argv[0]}" "${argv[@]:1}" >"$work/s.out" 2>&1)
    s=$(verdict $?)
    total=$((total + 1))
    [ "$k" = pass ] && kpass=$((kpass + 1))
    [ "$s" = pass ] && spass=$((spass + 1))
    if [ "$k" = "$s" ]; then
      echo "ok   run $r: $c: $k"
    else
      echo "DIFF run $r: $c: kernel $k, served $s"
      sed 's/^/     served| /' "$work/s.out" | tail -15
      differ=$((differ + 1))
      status=1
    fi
  done
done
echo "kernel passed $kpass of $total, served passed $spass of $total, $differ differ"
[ "$status" -eq 0 ] && echo PASS
exit "$status"
