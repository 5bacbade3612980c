#!/usr/bin/env bash
# `parklot run` says in one line when the shim cannot serve the program
# (static, 32-bit, setuid to another user) and runs it anyway; a program
# it can serve gets no such line.
#   unserved_programs_test.sh TREE_TAR
set -uo pipefail
tree_tar=$1
work="${TEST_TMPDIR:-$(mktemp -d)}/unserved"
rm -rf "$work" && mkdir -p "$work/tree"
tar -xf "$tree_tar" -C "$work/tree" || { echo "FAIL: unpack $tree_tar"; exit 1; }
launcher="$work/tree/bin/parklot"

printf '#include <stdio.h>\nint main(void) { puts("ran"); return 0; }\n' > "$work/hello.c"
gcc "$work/hello.c" -o "$work/dynamic" || { echo "FAIL: gcc"; exit 1; }
gcc -static "$work/hello.c" -o "$work/static" || { echo "FAIL: gcc -static"; exit 1; }
# 32-bit without a 32-bit libc: write(1, "ran\n"), exit(0) through int $0x80.
cat > "$work/p32.s" <<'S'
.globl _start
_start:
  movl $4, %eax
  movl $1, %ebx
  movl $msg, %ecx
  movl $4, %edx
  int $0x80
  movl $1, %eax
  movl $0, %ebx
  int $0x80
.data
msg: .ascii "ran\n"
S
as --32 "$work/p32.s" -o "$work/p32.o" && ld -m elf_i386 "$work/p32.o" -o "$work/p32" ||
  { echo "FAIL: assemble the 32-bit program"; exit 1; }

status=0
check() {  # label, stderr pattern (empty: no parklot line), program
  local label=$1 want=$2 prog=$3 out lines
  out=$(timeout 60 "$launcher" run -- "$prog" 2>"$work/err")
  local rc=$?
  lines=$(grep -c '^parklot: ' "$work/err")
  if [ "$rc" -ne 0 ] || [ "$out" != ran ]; then
    echo "FAIL: $label: rc $rc, '$out' (want rc 0, 'ran')"; cat "$work/err"; status=1
  elif [ -z "$want" ] && [ "$lines" -ne 0 ]; then
    echo "FAIL: $label: unexpected line:"; cat "$work/err"; status=1
  elif [ -n "$want" ] && { [ "$lines" -ne 1 ] || ! grep -q "^parklot: not serving .*$want" "$work/err"; }; then
    echo "FAIL: $label: want one line saying '$want', got:"; cat "$work/err"; status=1
  else
    echo "ok: $label: ${want:-served}: $(cat "$work/err")"
  fi
}
check "dynamic program" "" "$work/dynamic"
check "static program" "statically linked" "$work/static"
# Whether this kernel runs 32-bit programs at all (some refuse them: no
# IA32 emulation, "Exec format error"). Where it does, the launcher must run
# it; where it does not, the launcher must still say why it does not serve it
# and pass the kernel's refusal through as a shell would (status 126, one
# line naming the error), never run it some other way.
direct=$("$work/p32" 2>/dev/null); direct_rc=$?
if [ "$direct_rc" -eq 0 ] && [ "$direct" = ran ]; then
  echo "checked: this kernel runs 32-bit programs"
  check "32-bit program" "32-bit" "$work/p32"
else
  echo "checked: this kernel refuses 32-bit programs (direct run: rc $direct_rc); checking the launcher passes the refusal through"
  out=$(timeout 60 "$launcher" run -- "$work/p32" 2>"$work/err"); rc=$?
  if [ "$rc" -ne 126 ] || [ -n "$out" ] ||
     [ "$(grep -c '^parklot: not serving .*32-bit' "$work/err")" -ne 1 ] ||
     ! grep -q '^parklot: .*p32: Exec format error$' "$work/err" ||
     [ "$(grep -vc '^parklot: ' "$work/err")" -ne 0 ]; then
    echo "FAIL: 32-bit program on a kernel that refuses it: rc $rc, '$out' (want rc 126, no output, the not-serving line and the kernel's error), stderr:"
    cat "$work/err"; status=1
  else
    echo "ok: 32-bit program, refused by the kernel: $(tr '\n' ' ' < "$work/err")"
  fi
fi
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
  # Run by root, setuid to nobody: AT_SECURE, glibc ignores LD_PRELOAD.
  mkdir -p "$work/suid" && chmod 755 "$work" "$work/suid"
  cp "$work/dynamic" "$work/suid/prog" && chown nobody "$work/suid/prog" && chmod 4755 "$work/suid/prog"
  check "setuid program" "setuid" "$work/suid/prog"
else
  echo "skipped: setuid program (needs root to make one owned by nobody)"
fi
exit $status
