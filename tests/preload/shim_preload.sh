# Sourced by the tests that run programs under the preload shim.
#
#   shim_preload LIB...   sets PRELOAD to the LD_PRELOAD value that loads
#                         LIB... in that order (one of them the shim);
#                         returns non-zero, with a message, if it cannot
#
# A library built with AddressSanitizer (the shim under --config=asan) needs
# ASan's runtime loaded before every other library of the process: ASan
# checks that at start-up and aborts otherwise, and the programs under test
# are not instrumented, so nothing else brings it in first. The runtime put
# first is the one the library links (ldd), so it always matches the build.
# ASan's fake stacks are then turned on (detect_stack_use_after_return=1,
# appended to ASAN_OPTIONS): the shim's locals live off the thread's stack,
# so glibc's cancellation unwinding, which ASan does not follow, leaves no
# stale redzones there for later code to trip on (google/sanitizers#1399);
# it also checks use after return.
# A library built with ThreadSanitizer cannot be preloaded into another
# program at all: a test that tries was not declared with shim_test
# (//:sanitizers.bzl), which --config=tsan leaves out, and fails here.
shim_preload() {
  local lib deps runtime=""
  PRELOAD=""
  for lib in "$@"; do
    deps=$(ldd "$lib") || { echo "shim_preload: ldd $lib failed" >&2; return 1; }
    if grep -q 'libtsan\.so' <<<"$deps"; then
      echo "shim_preload: $lib is built with TSan and cannot be preloaded;" \
        "declare the test with shim_test (//:sanitizers.bzl)" >&2
      return 1
    fi
    [ -n "$runtime" ] || runtime=$(awk '$1 ~ /^libasan\.so/ { print $3 }' <<<"$deps")
    PRELOAD="${PRELOAD:+$PRELOAD:}$lib"
  done
  if [ -n "$runtime" ]; then
    [ -f "$runtime" ] || { echo "shim_preload: ASan runtime not found ($runtime)" >&2; return 1; }
    PRELOAD="$runtime:$PRELOAD"
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_stack_use_after_return=1"
  fi
}

# shim_test_begin SHIM PROG TAG: the common start of a shim test script
# that was given one program. Preloads SHIM (shim_preload), sets `prog` to
# PROG (resolved against $root when not executable as given), `work` to a
# fresh scratch folder removed at exit, `status=0`, and defines
# `fail MESSAGE...` (prints FAIL and sets status=1). Exits 1 if SHIM or
# PROG is missing.
shim_test_begin() {
  [ -f "$1" ] || { echo "FAIL: shim not found at $1"; exit 1; }
  shim_preload "$1" || exit 1
  prog="$2"
  [ -x "$prog" ] || prog="$root/$prog"
  [ -x "$prog" ] || { echo "FAIL: program $prog not found"; exit 1; }
  work="$(mktemp -d "${TEST_TMPDIR:-/tmp}/$3.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  status=0
  fail() { echo "FAIL: $*"; status=1; }
}
