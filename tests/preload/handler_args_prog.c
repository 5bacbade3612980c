/* Signal handlers installed without SA_SIGINFO get the kernel's siginfo
 * and ucontext arguments all the same, as x86-64 Linux passes them to
 * every handler: programs declare three-parameter handlers, install them
 * with signal() or a plain sa_handler, and read the ucontext (crash
 * handlers print the faulting address and registers from it). The shim's
 * handler wrapper (and, with PARKLOT_SYSCALL_FUTEX=1, its fault handler)
 * once called such a handler with the signal number alone, so it read
 * garbage registers and crashed with SIGSEGV.
 *
 * Each case installs a three-parameter handler by one of the installing
 * functions, raises the signal, and checks that the ucontext shows the
 * interrupted thread's stack; the fault case reads the faulting address
 * from it (REG_CR2) and leaves by siglongjmp. */
#include "tests/preload/shim_test_util.h"  /* first: _GNU_SOURCE */

#include <setjmp.h>
#include <sys/mman.h>
#include <ucontext.h>

static volatile sig_atomic_t g_signal;
static volatile sig_atomic_t g_context_ok;
static volatile uintptr_t g_fault_address;
static sigjmp_buf g_out;

/* The interrupted stack pointer lies above this handler's frame, within
 * the thread's stack. */
static int context_is_plausible(const void* context, const void* frame) {
  if (context == NULL) return 0;
  const ucontext_t* uc = (const ucontext_t*)context;
  const uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
  return sp > (uintptr_t)frame && sp - (uintptr_t)frame < (1u << 20);
}

static void three_args(int sig, siginfo_t* info, void* context) {
  (void)info;
  g_signal = sig;
  g_context_ok = context_is_plausible(context, &context);
}

static void fault(int sig, siginfo_t* info, void* context) {
  (void)info;
  g_signal = sig;
  g_context_ok = context_is_plausible(context, &context);
  if (context != NULL) {
    g_fault_address =
        (uintptr_t)((const ucontext_t*)context)->uc_mcontext.gregs[REG_CR2];
  }
  siglongjmp(g_out, 1);
}

typedef void (*plain_handler)(int);

static void expect_args(int sig, const char* how) {
  g_signal = 0;
  g_context_ok = 0;
  raise(sig);
  if (g_signal != sig || !g_context_ok) {
    SHIM_FAIL("%s: handler saw signal %d (want %d), ucontext %s", how,
              (int)g_signal, sig, g_context_ok ? "ok" : "wrong");
  }
}

int main(void) {
  shim_test_start("handler_args", 30);
  CHECK(signal(SIGUSR1, (plain_handler)three_args) != SIG_ERR);
  expect_args(SIGUSR1, "signal()");

  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = (plain_handler)three_args;  /* no SA_SIGINFO */
  CHECK_RC(sigaction(SIGUSR2, &sa, NULL), 0);
  expect_args(SIGUSR2, "sigaction without SA_SIGINFO");

  CHECK(sysv_signal(SIGHUP, (plain_handler)three_args) != SIG_ERR);
  expect_args(SIGHUP, "sysv_signal()");

  sa.sa_flags = SA_SIGINFO;
  sa.sa_sigaction = three_args;
  CHECK_RC(sigaction(SIGURG, &sa, NULL), 0);
  expect_args(SIGURG, "sigaction with SA_SIGINFO");

  /* A fault, with the handler installed by signal(). */
  char* page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(page != MAP_FAILED);
  CHECK(signal(SIGSEGV, (plain_handler)fault) != SIG_ERR);
  g_signal = 0;
  g_context_ok = 0;
  g_fault_address = 0;
  if (sigsetjmp(g_out, 1) == 0) {
    *(volatile char*)(page + 8) = 1;
    SHIM_FAIL("the store to a PROT_NONE page did not fault");
  }
  CHECK(g_signal == SIGSEGV);
  CHECK(g_context_ok);
  if (g_fault_address != (uintptr_t)(page + 8)) {
    SHIM_FAIL("fault handler read address %#lx from the ucontext, want %p",
              (unsigned long)g_fault_address, (void*)(page + 8));
  }
  return shim_test_finish();
}
