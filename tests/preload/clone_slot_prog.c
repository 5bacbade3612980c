/* clone() called with its four fixed arguments leaves the caller's stack
 * alone. The shim's clone() takes the three optional arguments as fixed
 * parameters (preload/surface.h); the seventh is read from the stack slot
 * above the return address, which belongs to the caller when it passed
 * fewer. glibc's clone only reads it. The shim's, built at -O2, once tail-
 * called glibc's and stored the value it had read back into that slot, so
 * a write the caller's side made to it meanwhile was lost.
 *
 * CloneLoop (assembly: the slot must be the caller's own memory at the
 * call) calls clone(NULL, NULL, 0, NULL) (EINVAL at once, no task made)
 * again and again (at least 200,000 times, and until the counter
 * reached 100,000) with a counter at that slot, which another thread
 * increments atomically meanwhile; at the end the slot must hold every
 * increment. Runs against glibc too (--glibc-too). */
#include "tests/preload/shim_test_util.h" /* first: _GNU_SOURCE */

#include <sched.h>
#include <stdatomic.h>

/* The slot's address while CloneLoop runs; the incrementer stops and sets
 * g_stopped once g_done is set, and CloneLoop waits for that before its
 * frame goes. */
_Atomic(long*) g_slot;
atomic_int g_done, g_stopped;

long CloneLoop(long calls);
__asm__(
    ".text\n"
    ".globl CloneLoop\n"
    ".type CloneLoop, @function\n"
    "CloneLoop:\n"
    "  push %rbx\n"
    "  push %r12\n"
    "  sub $24, %rsp\n"          /* 16-byte aligned; the slot is (%rsp) */
    "  movq $0, (%rsp)\n"
    "  mov %rdi, %r12\n"
    "  mov %rsp, g_slot(%rip)\n"
    "1:\n"
    "  xor %edi, %edi\n"
    "  xor %esi, %esi\n"
    "  xor %edx, %edx\n"
    "  xor %ecx, %ecx\n"
    "  xor %eax, %eax\n"
    "  call clone@PLT\n"
    "  dec %r12\n"
    "  jg 1b\n"
    "  cmpq $100000, (%rsp)\n"   /* and until the incrementer ran a while */
    "  jb 1b\n"
    "  movl $1, g_done(%rip)\n"
    "2:\n"
    "  pause\n"
    "  cmpl $0, g_stopped(%rip)\n"
    "  je 2b\n"
    "  mov (%rsp), %rax\n"
    "  add $24, %rsp\n"
    "  pop %r12\n"
    "  pop %rbx\n"
    "  ret\n"
    ".size CloneLoop, .-CloneLoop\n");

static long g_increments;

static void* Incrementer(void* arg) {
  (void)arg;
  long* slot;
  while ((slot = atomic_load(&g_slot)) == NULL) {
  }
  while (!atomic_load(&g_done)) {
    __atomic_fetch_add(slot, 1, __ATOMIC_RELAXED);
    ++g_increments;
  }
  atomic_store(&g_stopped, 1);
  return NULL;
}

int main(void) {
  shim_test_start("clone_slot_prog", 60);
  const pthread_t t = shim_spawn(Incrementer, NULL);
  const long slot = CloneLoop(200000);
  pthread_join(t, NULL);
  printf("increments %ld, in the slot %ld\n", g_increments, slot);
  CHECK(g_increments > 0);
  CHECK(slot == g_increments);
  return shim_test_finish();
}
