/* What sigaction() reads back is the kernel's answer, as under glibc,
 * whatever the shim keeps in front of the program's handler: the handler,
 * the flags as the kernel filtered them (SA_UNSUPPORTED cleared, glibc's
 * SA_RESTORER and its restorer shown), the mask without SIGKILL and
 * SIGSTOP. After a delivery with
 * SA_RESETHAND the handler reads back as SIG_DFL and the flags and mask as
 * installed. The shim once showed SA_SIGINFO after such a delivery (its
 * wrapper's flag), and with PARKLOT_SYSCALL_FUTEX=1 gave back for SIGSEGV
 * and SIGBUS the action exactly as the program passed it.
 *
 * The kernel's filtering is read with raw rt_sigaction calls on a signal
 * nobody uses, so the expectations hold on any kernel; --glibc-too proves
 * them glibc's. */
#include "tests/preload/shim_test_util.h"  /* first: _GNU_SOURCE */

#ifndef SA_UNSUPPORTED
#define SA_UNSUPPORTED 0x00000400
#endif
#ifndef SA_EXPOSE_TAGBITS
#define SA_EXPOSE_TAGBITS 0x00000800
#endif
#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000
#endif

/* The kernel's struct sigaction for rt_sigaction on x86-64. */
struct kernel_action {
  void* handler;
  unsigned long flags;
  void* restorer;
  uint64_t mask;
};

static volatile sig_atomic_t g_delivered;
static void on_signal(int sig) { g_delivered = sig; }
static void on_signal_info(int sig, siginfo_t* info, void* context) {
  (void)info;
  (void)context;
  g_delivered = sig;
}
static void* g_restorer;  /* glibc's, as read back for SIGUSR2 */

/* The flags and mask the kernel keeps for `flags` and `mask`. */
static void kernel_answer(unsigned flags, uint64_t mask,
                          unsigned long* out_flags, uint64_t* out_mask) {
  const int sig = SIGRTMAX - 1;
  struct kernel_action act = {(void*)SIG_IGN, flags | SA_RESTORER, g_restorer,
                              mask};
  struct kernel_action old, now;
  if (syscall(SYS_rt_sigaction, sig, &act, &old, 8) != 0 ||
      syscall(SYS_rt_sigaction, sig, &old, &now, 8) != 0) {
    FATAL("rt_sigaction: %s", strerror(errno));
  }
  *out_flags = now.flags;
  *out_mask = now.mask;
}

static uint64_t low_mask(const sigset_t* set) {
  uint64_t m;
  memcpy(&m, set, sizeof(m));
  return m;
}

/* Reads `sig`'s action back and compares it with glibc's answer for an
 * action installed with `handler`, `flags` and `mask`. */
static void expect(int sig, const char* what, void* handler,
                   unsigned flags, uint64_t mask) {
  unsigned long want_flags;
  uint64_t want_mask;
  kernel_answer(flags, mask, &want_flags, &want_mask);
  struct sigaction old;
  memset(&old, 0, sizeof(old));
  if (sigaction(sig, NULL, &old) != 0) {
    SHIM_FAIL("%s: sigaction(%d, NULL, &old): %s", what, sig, strerror(errno));
    return;
  }
  const void* got_handler = (old.sa_flags & SA_SIGINFO)
                                ? (void*)old.sa_sigaction
                                : (void*)old.sa_handler;
  printf("signal %d, %s: handler %s, flags %#x, mask %#llx\n", sig, what,
         got_handler == (void*)SIG_DFL ? "SIG_DFL"
         : got_handler == handler      ? "the program's"
                                       : "OTHER",
         (unsigned)old.sa_flags, (unsigned long long)low_mask(&old.sa_mask));
  if (got_handler != handler) {
    SHIM_FAIL("%s: handler %p, want %p", what, got_handler, handler);
  }
  if ((unsigned)old.sa_flags != want_flags) {
    SHIM_FAIL("%s: flags %#x, want glibc's %#lx", what,
              (unsigned)old.sa_flags, want_flags);
  }
  if (low_mask(&old.sa_mask) != want_mask) {
    SHIM_FAIL("%s: mask %#llx, want glibc's %#llx", what,
              (unsigned long long)low_mask(&old.sa_mask),
              (unsigned long long)want_mask);
  }
  if (old.sa_restorer != g_restorer) {
    SHIM_FAIL("%s: sa_restorer %p, want glibc's %p", what,
              (void*)old.sa_restorer, g_restorer);
  }
}

static uint64_t bit(int sig) { return (uint64_t)1 << (sig - 1); }

/* sigaction() with `flags` and a mask of SIGKILL, SIGSTOP and SIGUSR2, then
 * a delivery. */
static void check_sigaction(int sig, unsigned flags, int siginfo) {
  char what[96];
  snprintf(what, sizeof(what), "sigaction flags %#x", flags);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGKILL);
  sigaddset(&sa.sa_mask, SIGSTOP);
  sigaddset(&sa.sa_mask, SIGUSR2);
  void* handler;
  if (siginfo) {
    sa.sa_sigaction = on_signal_info;
    handler = (void*)on_signal_info;
    flags |= SA_SIGINFO;
  } else {
    sa.sa_handler = on_signal;
    handler = (void*)on_signal;
  }
  sa.sa_flags = flags;
  CHECK_RC(sigaction(sig, &sa, NULL), 0);
  const uint64_t mask = bit(SIGKILL) | bit(SIGSTOP) | bit(SIGUSR2);
  expect(sig, what, handler, flags, mask);
  g_delivered = 0;
  raise(sig);
  CHECK(g_delivered == sig);
  strcat(what, ", delivered");
  expect(sig, what, (flags & SA_RESETHAND) ? (void*)SIG_DFL : handler, flags,
         mask);
}

static void check_sysv_signal(int sig) {
  CHECK(sysv_signal(sig, on_signal) != SIG_ERR);
  /* glibc's sysv_signal flags. */
  const unsigned flags = SA_RESETHAND | SA_NODEFER | SA_INTERRUPT;
  expect(sig, "sysv_signal", (void*)on_signal, flags, 0);
  g_delivered = 0;
  raise(sig);
  CHECK(g_delivered == sig);
  expect(sig, "sysv_signal, delivered", (void*)SIG_DFL, flags, 0);
}

int main(void) {
  shim_test_start("sigaction_readback", 30);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  CHECK_RC(sigaction(SIGUSR2, &sa, NULL), 0);
  CHECK_RC(sigaction(SIGUSR2, NULL, &sa), 0);
  g_restorer = (void*)sa.sa_restorer;
  CHECK(g_restorer != NULL);
  /* SIGSEGV and SIGBUS go through the fault handler with
   * PARKLOT_SYSCALL_FUTEX=1; SIGUSR1 through the plain wrapper. */
  const int sigs[] = {SIGUSR1, SIGSEGV, SIGBUS};
  for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); ++i) {
    const int sig = sigs[i];
    check_sigaction(sig, SA_RESTART | SA_UNSUPPORTED | SA_EXPOSE_TAGBITS, 0);
    check_sigaction(sig, SA_RESETHAND, 0);
    check_sigaction(sig, SA_RESETHAND | SA_NODEFER | SA_ONSTACK, 1);
    check_sysv_signal(sig);
    CHECK(signal(sig, SIG_IGN) != SIG_ERR);
    expect(sig, "signal(SIG_IGN)", (void*)SIG_IGN, SA_RESTART, bit(sig));
  }
  return shim_test_finish();
}
