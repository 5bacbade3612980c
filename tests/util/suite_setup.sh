# shellcheck shell=bash
# Sourced, as "$(dirname "$0")/../util/suite_setup.sh", by the scripts that
# build a foreign test suite and run it on glibc and under the shim
# (tests/open_posix/open_posix_tests.sh, tests/glibc_nptl/glibc_nptl_tests.sh),
# by hand or as Bazel tests (this file and tests/preload/shim_preload.sh in
# their runfiles). Sets $root: the runfiles' workspace, or the current
# folder.
#
# suite_options ARG...: takes the options both scripts have
# (--tarball=PATH, --shim=PATH, --jobs=N, --only=REGEX, --work=DIR; the
# defaults of the last four are set here) and gives any other to the
# script's own `option ARG`, which returns false for one it does not know
# either: then a usage error (exit 2).
#
# suite_setup NAME DIR...: after the options. Checks $shim and makes it
# absolute, sets $preload to the LD_PRELOAD that loads it (shim_preload),
# and makes $work absolute (a scratch folder NAME.XXXXXX, removed at exit,
# where --work gave none) with the empty folders $src, $bin, $res and
# $work/DIR... in it. Exits with a FAIL line if a step fails.

# shellcheck source=tests/preload/shim_preload.sh
source "$(dirname "${BASH_SOURCE[0]}")/../preload/shim_preload.sh" ||
  { echo "FAIL: tests/preload/shim_preload.sh not found"; exit 1; }

root="${TEST_SRCDIR:+$TEST_SRCDIR/${TEST_WORKSPACE:-parklot}}"
root="${root:-$PWD}"
# shellcheck disable=SC2034  # the variables are the sourcing script's
{
  shim="$root/preload/libparklot_preload.so"
  jobs=$(nproc)
  only=""
  work=""
}

# shellcheck disable=SC2034
suite_options() {
  local a
  for a in "$@"; do
    case "$a" in
      --tarball=*) tarball=${a#--tarball=} ;;
      --shim=*) shim=${a#--shim=} ;;
      --jobs=*) jobs=${a#--jobs=} ;;
      --only=*) only=${a#--only=} ;;
      --work=*) work=${a#--work=} ;;
      *) option "$a" ||
        { echo "$(basename "$0"): unknown argument $a" >&2; exit 2; } ;;
    esac
  done
}

# shellcheck disable=SC2034
suite_setup() {
  local name=$1 d
  shift
  [ -f "$shim" ] || { echo "FAIL: shim not found at $shim"; exit 1; }
  shim=$(readlink -f "$shim")
  shim_preload "$shim" || exit 1
  preload=$PRELOAD
  if [ -z "$work" ]; then
    work="$(mktemp -d "${TEST_TMPDIR:-/tmp}/$name.XXXXXX")"
    trap 'rm -rf "$work"' EXIT
  fi
  mkdir -p "$work" && work=$(cd "$work" && pwd)
  src="$work/src"
  bin="$work/bin"
  res="$work/results"
  for d in "$src" "$bin" "$res" "${@/#/$work/}"; do
    rm -rf "$d"
    mkdir -p "$d" || exit 1
  done
}
