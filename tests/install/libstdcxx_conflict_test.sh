#!/usr/bin/env bash
# A program run with an older libstdc++.so.6 first on its search path (a
# vendored runtime on LD_LIBRARY_PATH or its RUNPATH) starts under a plain
# LD_PRELOAD of the shim, and its locks are served: the shim loads with libc
# alone (no libstdc++, no Abseil; docs/design.md section 5.1).
# A shim that needed libstdc++ (through Abseil's shared libraries, as until
# 0.2.0's did) could not start there at all. The diagnostics object does need the
# system's libstdc++: under PARKLOT_STATS or PARKLOT_DEADLOCK it then cannot
# load, and the program runs anyway, the report saying what is missing.
#
#   libstdcxx_conflict_test.sh TREE_TAR
# A stand-in "older libstdc++" (soname libstdc++.so.6, only the GLIBCXX_3.4
# version node, defining std::terminate) is built here, and a program
# linked against it (RUNPATH), which takes a pthread mutex and reports
# whether the shim is loaded.
set -uo pipefail
tree_tar=$1
work="${TEST_TMPDIR:-$(mktemp -d)}/libstdcxx"
rm -rf "$work" && mkdir -p "$work/tree" "$work/old"
tar -xf "$tree_tar" -C "$work/tree" || { echo "FAIL: unpack $tree_tar"; exit 1; }
shim="$work/tree/lib/libparklot_preload.so"
launcher="$work/tree/bin/parklot"

echo 'GLIBCXX_3.4 { global: _ZSt9terminatev; local: *; };' > "$work/old/v.map"
echo 'void _ZSt9terminatev(void) {}' > "$work/old/fake.c"
gcc -shared -fPIC -Wl,-soname,libstdc++.so.6 -Wl,--version-script="$work/old/v.map" \
  "$work/old/fake.c" -o "$work/old/libstdc++.so.6" || { echo "FAIL: build the old libstdc++"; exit 1; }
cat > "$work/prog.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
void _ZSt9terminatev(void); /* std::terminate, from whichever libstdc++ */
int main(void) {
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&m);
  pthread_mutex_unlock(&m);
  printf("libstdc++ %s, shim %s\n", &_ZSt9terminatev ? "bound" : "missing",
         dlsym(RTLD_DEFAULT, "parklot_preload_active") ? "active" : "absent");
  return 0;
}
C
gcc -pthread "$work/prog.c" -L"$work/old" -l:libstdc++.so.6 -Wl,-rpath,"$work/old" \
  -ldl -o "$work/prog" || { echo "FAIL: build the program"; exit 1; }

status=0
check() {  # label, want, then the command
  local label=$1 want=$2
  shift 2
  local out
  out=$(timeout 60 "$@" 2>"$work/err")
  local rc=$?
  if [ "$rc" -eq 0 ] && [ "$out" = "$want" ]; then
    echo "ok: $label: $out"
  else
    echo "FAIL: $label: exit $rc, '$out' (want '$want')"; cat "$work/err"; status=1
  fi
}

# Alone, the program runs on its own libstdc++.
check "alone" "libstdc++ bound, shim absent" env LD_LIBRARY_PATH="$work/old" "$work/prog"
# The stand-in is a real conflict: the system's libstdc++-linked tools
# cannot start with it first.
if env LD_LIBRARY_PATH="$work/old" "$work/tree/lib/parklot/parklot-info" >/dev/null 2>&1; then
  echo "FAIL: precondition: parklot-info (C++) started with the old libstdc++ first"
  status=1
else
  echo "ok: precondition: a C++ program of this system does not start with the old libstdc++ first"
fi
check "plain LD_PRELOAD, old libstdc++ on LD_LIBRARY_PATH" "libstdc++ bound, shim active" \
  env LD_LIBRARY_PATH="$work/old" LD_PRELOAD="$shim" "$work/prog"
check "plain LD_PRELOAD, old libstdc++ on the program's RUNPATH" "libstdc++ bound, shim active" \
  env LD_PRELOAD="$shim" "$work/prog"
# Its lock was served by the shim.
env LD_LIBRARY_PATH="$work/old" LD_PRELOAD="$shim" PARKLOT_STATS=1 "$work/prog" >"$work/out" 2>"$work/err"
rc=$?
if [ "$rc" -eq 0 ] && grep -q '^served by parklot: 1 mutex acquisitions' "$work/err" &&
   grep -q '^call sites: module+offset only (no symbolizer: .*libparklot_diag.so did not load' "$work/err"; then
  echo "ok: PARKLOT_STATS: the lock served; call sites unnamed, as the diagnostics object cannot load"
else
  echo "FAIL: PARKLOT_STATS with the old libstdc++: exit $rc"; cat "$work/err"; status=1
fi
env LD_LIBRARY_PATH="$work/old" LD_PRELOAD="$shim" PARKLOT_DEADLOCK=report "$work/prog" >"$work/out" 2>"$work/err"
rc=$?
if [ "$rc" -eq 0 ] && [ "$(cat "$work/out")" = "libstdc++ bound, shim active" ] &&
   grep -q '^parklot: PARKLOT_DEADLOCK needs libparklot_diag.so, beside the shim: .*detection off$' "$work/err"; then
  echo "ok: PARKLOT_DEADLOCK: runs, detection off, said in one line"
else
  echo "FAIL: PARKLOT_DEADLOCK with the old libstdc++: exit $rc"; cat "$work/out" "$work/err"; status=1
fi
check "parklot run, old libstdc++ on LD_LIBRARY_PATH" "libstdc++ bound, shim active" \
  env LD_LIBRARY_PATH="$work/old" "$launcher" run -- "$work/prog"
check "parklot run, old libstdc++ on the program's RUNPATH" "libstdc++ bound, shim active" \
  "$launcher" run -- "$work/prog"
check "parklot run, a program with no libstdc++" "hi" \
  env LD_LIBRARY_PATH="$work/old" "$launcher" run -- echo hi
exit $status
