// vfork(): glibc's, with the one difference the process model needs
// (docs/design.md §5.16): the child marks the TLS it shares with its
// suspended parent as a vfork child's (parklot_vfork_depth, task_model.h),
// so that what it does before exec (CPython's subprocess and gdb reset
// every signal's action there) stays its own: the shim's record of signal
// actions is the parent's memory. The parent, when it resumes, sets the
// depth back to what it was before; a child killed before it marked
// anything, and nested vforks, leave it right.
//
// Assembly, as glibc's: the child returns from this function and goes on
// using the stack below the caller's frame, so nothing the parent needs
// after the system call may lie in memory. The return address waits in
// %rdi, the depth's address in %rsi and its value before in %edx (the
// syscall instruction keeps all three). The same system call as glibc's
// vfork makes; under Valgrind too (which runs it as a fork).
#include <errno.h>
#include <sys/syscall.h>

#include "preload/task_model.h"

extern "C" __attribute__((visibility("hidden"), used)) long
ParklotVforkFailed(long error) {
  errno = static_cast<int>(error);
  return -1;
}

#define PARKLOT_STR2(x) #x
#define PARKLOT_STR(x) PARKLOT_STR2(x)

asm(R"(
  .text
  .globl vfork
  .type vfork, @function
  .globl __vfork
  .type __vfork, @function
  .p2align 4
vfork:
__vfork:
  .cfi_startproc
  endbr64
  popq %rdi
  .cfi_adjust_cfa_offset -8
  .cfi_register %rip, %rdi
  movq parklot_vfork_depth@gottpoff(%rip), %rsi
  movl %fs:(%rsi), %edx
  movl $)" PARKLOT_STR(SYS_vfork) R"(, %eax
  syscall
  pushq %rdi
  .cfi_adjust_cfa_offset 8
  .cfi_rel_offset %rip, 0
  testl %eax, %eax
  jz 1f
  movl %edx, %fs:(%rsi)
  cmpl $-4095, %eax
  jae 2f
  ret
1:
  addl $1, %edx
  movl %edx, %fs:(%rsi)
  ret
2:
  negl %eax
  movslq %eax, %rdi
  jmp ParklotVforkFailed
  .cfi_endproc
  .size vfork, .-vfork
  .size __vfork, .-__vfork
)");
