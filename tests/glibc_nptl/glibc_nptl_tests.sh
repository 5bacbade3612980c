#!/usr/bin/env bash
# glibc's own NPTL test suite (glibc 2.36: the tests of nptl/ and of
# sysdeps/pthread/, where glibc 2.34 moved most of them), built against the
# installed libc and run three ways: on glibc, under the shim (LD_PRELOAD),
# and under the shim with every key in one bucket (PARKLOT_POLICY=fixed:1).
# Every test that passes on glibc must pass the other two ways, except the
# tests that write glibc's private fields of an object the shim runs
# (docs/compatibility.md, "glibc's own test suite"). Then glibc's six gdb
# pretty-printer tests run with the shim preloaded into the inferior.
#
#   glibc_nptl_tests.sh [--tarball=PATH] [--shim=PATH] [--jobs=N]
#                       [--runs=N] [--only=REGEX] [--no-printers]
#                       [--work=DIR]
#     --runs=N      run each test N times each way (default 1)
#     --only=REGEX  only the tests whose names match (grep -E)
#     --work=DIR    build and run there and keep it (default: a scratch
#                   folder removed at exit)
#
# Needs gcc, g++, make, python3 and the tarball from Debian's glibc-source
# package (apt-get install glibc-source); the printer tests also need gdb
# and python3-pexpect. Without the tarball it skips (exit 0 with a note).
# Tagged manual in BUILD: it builds about 350 programs and takes 10 to 25
# minutes on two cores.
#
# How the tests are built without a glibc build tree: glibc's Makefiles
# (nptl/Makefile, sysdeps/pthread/Makefile, support/Makefile) are
# evaluated by make itself with their include lines removed, which gives
# the test list and each test's flags, environment, arguments and modules;
# the test driver (support/) is built as a static library from its own
# sources; and the few internal headers the tests and the driver include
# come from glibc's include/ (the stand-alone ones) or, for the internal
# layouts and constants, from tests/glibc_nptl/include/. Static tests are
# left out (LD_PRELOAD does not apply to them), as are glibc's xtests and
# container tests, which its own `make check` does not run either.
set -uo pipefail

# shellcheck source=tests/util/suite_setup.sh
source "$(dirname "$0")/../util/suite_setup.sh" ||
  { echo "FAIL: tests/util/suite_setup.sh not found"; exit 1; }
tarball=/usr/src/glibc/glibc-2.36.tar.xz
runs=1
printers=1
option() {  # this script's own options (suite_options)
  case "$1" in
    --runs=*) runs=${1#--runs=} ;;
    --no-printers) printers=0 ;;
    *) return 1 ;;
  esac
}
suite_options "$@"
if [ ! -f "$tarball" ]; then
  echo "SKIP: $tarball not found (apt-get install glibc-source)"
  exit 0
fi
here=$(cd "$(dirname "$0")" && pwd)
compat="$here/include"
[ -f "$compat/pthreadP.h" ] || compat="$root/tests/glibc_nptl/include"
[ -f "$compat/pthreadP.h" ] || { echo "FAIL: $compat/pthreadP.h not found"; exit 1; }
suite_setup glibc_nptl include
inc="$work/include"

# Tests that write glibc's private fields of an object and then run it:
# tst-barrier5 sets a barrier's arrival counters near glibc's reset point,
# where the shim keeps its own count (docs/compatibility.md). (tst-rwlock19,
# which sets an rwlock's reader count near glibc's overflow, must pass: the
# shim's word keeps glibc's encoding there.)
private_field_tests=" tst-barrier5 "

# --- sources -----------------------------------------------------------------
top=$(tar tf "$tarball" | head -1 | cut -d/ -f1)
members=(nptl sysdeps/pthread support scripts test-skeleton.c
  include/array_length.h include/libc-diag.h include/intprops.h
  include/scratch_buffer.h include/libc-pointer-arith.h
  include/allocate_once.h include/dso_handle.h
  sysdeps/x86_64/stackinfo.h sysdeps/x86/tst-stack-align.h
  sysdeps/generic/tst-stack-align.h sysdeps/x86/nptl/pthreaddef.h
  sysdeps/unix/sysv/linux/tst-skeleton-thread-affinity.c
  sysdeps/unix/sysv/linux/tst-skeleton-affinity.c
  posix/tst-vfork1.c posix/tst-vfork2.c
  elf/tst-unwind-main.c malloc/tst-interpose-aux.c)
tar xf "$tarball" -C "$src" --strip-components=1 "${members[@]/#/$top/}" ||
  { echo "FAIL: tar"; exit 1; }
# The stand-alone internal headers, and no other: glibc's include/ wraps
# the public headers for its own build, which these tests must not see.
cp "$src"/include/*.h "$src/sysdeps/x86_64/stackinfo.h" "$compat"/*.h "$inc/"

# --- glibc's Makefiles, evaluated --------------------------------------------
# Their `include` lines pull in the build tree's configuration; without
# them, make still evaluates the test lists and the per-test variables.
for mk in nptl/Makefile sysdeps/pthread/Makefile support/Makefile; do
  sed '/^-\{0,1\}include /d' "$src/$mk" >"$work/$(echo "$mk" | tr / _)"
done
cat >"$work/eval.mk" <<EOF
subdir := nptl
build-shared := yes
run-built-tests := yes
have-thread-library := yes
libpthread-routines-var := routines
CXX := g++
CFLAGS-printers-tests := -O0 -ggdb3 -DIS_IN_build
objpfx := $bin/
common-objpfx := $work/common/
host-test-program-cmd = \$(objpfx)\$*
include $work/nptl_Makefile
include $work/sysdeps_pthread_Makefile
built := \$(filter-out \$(tests-static),\$(tests) \$(tests-internal))
parklot-printers := \$(if \$(filter 1,$printers),\$(tests-printers))
list: \$(addprefix test/,\$(built) \$(parklot-printers)) \$(addprefix module/,\$(modules-names))
fields = \$*|\$<|\$(strip \$(CFLAGS-\$*.c) \$(CFLAGS-\$*.o) \$(CPPFLAGS-\$*.c))|\$(strip \$(LDLIBS-\$*))|\$(strip \$(LDFLAGS-\$*))|\$(strip \$(\$*-ENV))|\$(strip \$(\$*-ARGS))
test/%: %.c ; @:\$(info test|\$(fields))
test/%: %.cc ; @:\$(info test|\$(fields))
module/%: %.c ; @:\$(info module|\$*|\$<|\$(strip \$(CFLAGS-\$*.c) \$(CFLAGS-\$*.os))|\$(strip \$(LDFLAGS-\$*.so)))
EOF
# Evaluated in a folder of links to the sources, so that `$<` is a bare
# file name, as the flags computed from it expect (tst-initializers1-c89).
mkdir -p "$work/flat"
for f in "$src"/sysdeps/pthread/*.c* "$src"/nptl/*.c*; do
  ln -sfn "$f" "$work/flat/"
done
(cd "$work/flat" && make -s -f "$work/eval.mk" list) >"$work/list.txt" 2>"$work/list.err" ||
  { echo "FAIL: evaluating glibc's Makefiles"; cat "$work/list.err"; exit 1; }
# The source's path in the tree, for its folder's headers.
while IFS='|' read -r kind name file rest; do
  file=$(readlink -f "$work/flat/$file")
  echo "$kind|$name|${file#"$src"/}|$rest"
done <"$work/list.txt" >"$work/list.tmp" && mv "$work/list.tmp" "$work/list.txt"
# Link-time inputs of each program and module, from the rules' database.
(cd "$work/flat" && make -s -p -f "$work/eval.mk" list 2>/dev/null) |
  awk -v b="$bin/" 'index($0, b) == 1 && $1 ~ /:$/ && $1 !~ /\.out:$/ {
      t = substr($1, length(b) + 1); sub(/:$/, "", t)
      for (i = 2; i <= NF; i++) if ($i ~ /\.(so|o)$/) print t, substr($i, length(b) + 1)
    }' | sort -u >"$work/deps.txt"

# --- build ---------------------------------------------------------------------
cat >"$work/support.mk" <<EOF
objpfx := $work/common/support/
prefix := /usr
libdir := /usr/lib/x86_64-linux-gnu
bindir := /usr/bin
sbindir := /usr/sbin
slibdir := /lib/x86_64-linux-gnu
rootsbindir := /sbin
complocaledir := /usr/lib/locale
rtld-installed-name := ld-linux-x86-64.so.2
include $work/support_Makefile
list: ; @:\$(foreach r,\$(libsupport-routines),\$(info \$(r)|\$(CFLAGS-\$(r).c)))
EOF
# Where tests look for the build tree's libraries, the installed ones.
mkdir -p "$work/common/support" "$work/common/malloc" "$work/common/nptl_db"
ln -sf /lib/x86_64-linux-gnu/libc_malloc_debug.so.0 "$work/common/malloc/libc_malloc_debug.so"
for n in libthread_db.so libthread_db.so.1; do
  ln -sf /lib/x86_64-linux-gnu/libthread_db.so.1 "$work/common/nptl_db/$n"
done
(cd "$src/support" && make -s -f "$work/support.mk" list) >"$work/support.txt" ||
  { echo "FAIL: evaluating support/Makefile"; exit 1; }

# glibc's sysdeps folders, in its search order, for the few of their
# headers extracted above.
sysinc="-I$src/sysdeps/unix/sysv/linux -I$src/sysdeps/pthread"
sysinc+=" -I$src/sysdeps/x86/nptl -I$src/sysdeps/x86 -I$src/sysdeps/generic -I$src"
cflags=(-O2 -g -w -D_GNU_SOURCE -pthread -fno-strict-aliasing -I"$inc" -include "$inc/config.h")
{
  echo "all:"
  echo ".DELETE_ON_ERROR:"
  objs=()
  while IFS='|' read -r r f; do
    o="$work/common/support/$r.o"
    objs+=("$o")
    echo "$o:; @cd $src/support && gcc -c ${cflags[*]} -I$src -I$src/support $f -o \$@ $r.c >\$@.log 2>&1 || rm -f \$@"
  done <"$work/support.txt"
  # Routines that need more of the build tree than the tests use (socket
  # and descriptor helpers, time64 paths) fail to build and are left out of
  # the archive.
  echo "$bin/libsupport.a: ${objs[*]}"
  echo "	@ar rcs \$@ \$(wildcard ${objs[*]})"
  all=()
  while IFS='|' read -r kind name file fl ldlibs ldflags _; do
    if [ "$kind" = module ]; then  # module|name|file|cflags|ldflags
      out="$bin/$name.so"
      sodeps=$(awk -v n="$name.so" '$1 == n && $2 ~ /\.so$/ { printf " '"$bin"'/%s", $2 }' "$work/deps.txt")
      echo "$out:$sodeps; @cd $src && gcc ${cflags[*]} -fPIC -shared -I$src/nptl -I$src/$(dirname "$file") $sysinc $fl $file$sodeps $ldlibs -o \$@ >\$@.log 2>&1"
      all+=("$out")
      continue
    fi
    out="$bin/$name"
    [ -z "$only" ] || grep -qE "$only" <<<"$name" || continue
    extra=$(awk -v n="$name" '$1 == n { printf " '"$bin"'/%s", $2 }' "$work/deps.txt")
    cc=gcc
    [ "${file##*.}" = cc ] && cc=g++
    echo "$out: $bin/libsupport.a$extra; @cd $src/$(dirname "$file") && $cc ${cflags[*]} -I$src/nptl -I$src/$(dirname "$file") $sysinc $fl $(basename "$file")$extra $ldflags $bin/libsupport.a -lpthread -lrt -ldl -lm $ldlibs -o \$@ >\$@.log 2>&1"
    all+=("$out")
  done <"$work/list.txt"
  # Copies of a module under other names (tst-stack4mod-N-M.so).
  modules=" $(awk -F'|' '$1 == "module" { printf "%s.so ", $2 }' "$work/list.txt")"
  while read -r t d; do
    [[ "$t" == *.so && "$d" == *.so && "$modules" != *" $t "* ]] || continue
    echo "$bin/$t: $bin/$d; @cp \$< \$@"
    all+=("$bin/$t")
  done <"$work/deps.txt"
  # Auxiliary objects linked into a test (tst-cleanup4aux.o).
  for o in $(awk '$2 ~ /\.o$/ { print $2 }' "$work/deps.txt" | sort -u); do
    c=$(cd "$src" && ls nptl/"${o%.o}".c sysdeps/pthread/"${o%.o}".c 2>/dev/null | head -1)
    fl=$(awk -F'|' -v n="${o%.o}" '$2 == n { print $4 }' "$work/list.txt")
    echo "$bin/$o:; @cd $src && gcc -c ${cflags[*]} $fl -I$src $c -o \$@ >\$@.log 2>&1"
  done
  echo "all: ${all[*]}"
} >"$work/build.mk"
echo "building glibc's NPTL tests ($(grep -c '^test|' "$work/list.txt") programs, $(grep -c '^module|' "$work/list.txt") modules) with $jobs jobs"
make -k -j"$jobs" -f "$work/build.mk" all >"$work/build.log" 2>&1
[ -f "$bin/libsupport.a" ] || { echo "FAIL: the test driver did not build"; cat "$work/build.log"; exit 1; }

# --- run -----------------------------------------------------------------------
# One run: verdict pass (exit 0), unsupported (77, glibc's own code), hang
# (the outer timeout; the test driver's own timeout gives a failure) or
# fail(STATUS). Output kept in $res/NAME.MODE.RUN.out.
run_one() {  # name mode run
  local name=$1 mode=$2 r=$3 line env_str args_str rc v
  line=$(awk -F'|' -v n="$name" '$1 == "test" && $2 == n' "$work/list.txt")
  env_str=$(cut -d'|' -f7 <<<"$line")
  args_str=$(cut -d'|' -f8 <<<"$line")
  local -a envv=(LC_ALL=C TIMEOUTFACTOR=5 LD_LIBRARY_PATH="$bin")
  local pre=""
  eval "local -a tenv=($env_str)"
  local e
  for e in "${tenv[@]}"; do
    case "$e" in
      LD_PRELOAD=*) pre=${e#LD_PRELOAD=} ;;
      *) envv+=("$e") ;;
    esac
  done
  case "$mode" in
    glibc) [ -n "$pre" ] && envv+=(LD_PRELOAD="$pre") ;;
    shim) envv+=(LD_PRELOAD="$preload${pre:+:$pre}") ;;
    fixed1) envv+=(LD_PRELOAD="$preload${pre:+:$pre}" PARKLOT_POLICY=fixed:1) ;;
  esac
  eval "local -a targs=($args_str)"
  # In the source folder, as glibc's `make check` runs them (tst-cancel4
  # opens its Makefile).
  (cd "$work/src/nptl" && env -u LD_PRELOAD "${envv[@]}" timeout -k 10 900 "$bin/$name" "${targs[@]}") \
    >"$res/$name.$mode.$r.out" 2>&1 </dev/null
  rc=$?
  case $rc in 0) v=pass ;; 77) v=unsupported ;; 124|137) v=hang ;; *) v="fail($rc)" ;; esac
  echo "$v" >"$res/$name.$mode.$r"
}
# A printer test: glibc's Python script drives gdb over the program
# (run_printer_test.py adds the shim to what gdb starts), with the printers'
# constants generated for x86-64 from glibc's own list by glibc's own
# generator.
run_printer() {  # name mode run
  local name=$1 mode=$2 r=$3 pre="" rc v
  [ "$mode" = glibc ] || pre=$preload
  # HOME: gdb wants a cache folder (Bazel's test environment has none).
  local -a envv=(LC_ALL=C TIMEOUTFACTOR=30 HOME="$work/home"
    PYTHONPATH="$work/printers:$work/src/scripts")
  [ "$mode" = fixed1 ] && envv+=(PARKLOT_POLICY=fixed:1)
  (cd "$work/src/nptl" && env -u LD_PRELOAD "${envv[@]}" PARKLOT_PRINTER_PRELOAD="$pre" \
    timeout -k 10 600 "$py" "$runner" "$name.py" "$name.c" "$bin/$name" nptl-printers.py) \
    >"$res/$name.$mode.$r.out" 2>&1 </dev/null
  rc=$?
  case $rc in 0) v=pass ;; 77) v=unsupported ;; 124|137) v=hang ;; *) v="fail($rc)" ;; esac
  echo "$v" >"$res/$name.$mode.$r"
}
# The system's Python, which has Debian's python3-pexpect (not a python3
# earlier on PATH, such as pyenv's).
py=/usr/bin/python3
[ -x "$py" ] || py=python3
if [ "$printers" = 1 ]; then
  mkdir -p "$work/printers" "$work/home"
  (cd "$src" && "$py" scripts/gen-as-const.py --python \
    --cc "gcc -D_GNU_SOURCE -I$inc -include $inc/config.h" \
    nptl/nptl_lock_constants.pysym) >"$work/printers/nptl_lock_constants.py" ||
    { echo "FAIL: generating nptl_lock_constants.py"; exit 1; }
fi
runner="$here/run_printer_test.py"
[ -f "$runner" ] || runner="$root/tests/glibc_nptl/run_printer_test.py"
export -f run_one run_printer
export runner py
export work bin res preload

mapfile -t built < <(awk -F'|' '$1 == "test" { print $2 }' "$work/list.txt" |
  while read -r t; do [ -x "$bin/$t" ] && echo "$t"; done |
  { if [ -n "$only" ]; then grep -E "$only"; else cat; fi; })
mapfile -t unbuilt < <(awk -F'|' '$1 == "test" { print $2 }' "$work/list.txt" |
  while read -r t; do [ -x "$bin/$t" ] || echo "$t"; done |
  { if [ -n "$only" ]; then grep -E "$only"; else cat; fi; })
echo "running ${#built[@]} tests x 3 ways x $runs runs with $jobs jobs" \
  "(${#unbuilt[@]} did not build against the installed libc: ${unbuilt[*]:-none})"
for ((r = 1; r <= runs; r++)); do
  for t in "${built[@]}"; do
    for m in glibc shim fixed1; do echo "$t $m $r"; done
  done
done | xargs -P "$jobs" -L 1 bash -c 'case "$1" in test-*-printers) run_printer "$@" ;; *) run_one "$@" ;; esac' _

# --- table ---------------------------------------------------------------------
status=0
gpass=0 spass=0 fpass=0 differ=0 expected=0
printf '%-36s %-14s %-14s %-14s %s\n' test glibc shim fixed:1 ""
for t in "${built[@]}"; do
  for m in glibc shim fixed1; do
    v=""
    for ((r = 1; r <= runs; r++)); do
      x=$(cat "$res/$t.$m.$r" 2>/dev/null || echo missing)
      if [ -z "$v" ]; then v=$x; elif [ "$x" != "${v%%,*}" ]; then v="$v,$x"; fi
    done
    declare "v_$m=$v"
  done
  [ "$v_glibc" = pass ] && gpass=$((gpass + 1))
  [ "$v_shim" = pass ] && spass=$((spass + 1))
  [ "$v_fixed1" = pass ] && fpass=$((fpass + 1))
  note=""
  if [ "$v_glibc" = pass ] && { [ "$v_shim" != pass ] || [ "$v_fixed1" != pass ]; }; then
    if [[ "$private_field_tests" == *" $t "* ]]; then
      note="expected: writes glibc's private fields"
      expected=$((expected + 1))
    else
      note="DIFFERS"
      differ=$((differ + 1))
      status=1
    fi
  elif [ "$v_glibc" != "$v_shim" ] || [ "$v_glibc" != "$v_fixed1" ]; then
    note="differs (fails on glibc)"
  fi
  printf '%-36s %-14s %-14s %-14s %s\n' "$t" "$v_glibc" "$v_shim" "$v_fixed1" "$note"
done
for t in "${built[@]}"; do
  for m in shim fixed1; do
    v=$(cat "$res/$t.glibc.1" 2>/dev/null)
    for ((r = 1; r <= runs; r++)); do
      x=$(cat "$res/$t.$m.$r" 2>/dev/null)
      if [ "$v" = pass ] && [ "$x" != pass ] && [[ "$private_field_tests" != *" $t "* ]]; then
        echo "--- $t under $m, run $r: $x"
        tail -20 "$res/$t.$m.$r.out"
      fi
    done
  done
done
# The printer tests must run (gdb with Python, python3-pexpect), unless
# --no-printers.
for t in "${built[@]}"; do
  [[ "$t" == test-*-printers ]] || continue
  if [ "$(cat "$res/$t.glibc.1" 2>/dev/null)" != pass ]; then
    echo "FAIL: $t did not pass on glibc (gdb, python3-pexpect?):"
    tail -3 "$res/$t.glibc.1.out"
    status=1
  fi
done
echo "glibc's NPTL tests: ${#built[@]} built, passed: glibc $gpass, shim $spass," \
  "shim with fixed:1 $fpass; $differ differ, $expected private-field tests differ as expected"
[ "$status" -eq 0 ] && echo PASS
exit "$status"
