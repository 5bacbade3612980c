// syscall(): glibc's variadic wrapper, interposed so that private
// SYS_futex operations can be served by the parking lot
// (PARKLOT_SYSCALL_FUTEX=1; preload/futex_ops.h says what is served and the
// rule at the boundary with code that bypasses this wrapper).
//
// glibc's syscall(number, ...) passes six argument registers whatever the
// number; so does this one, read as longs. Every call not served goes to
// the kernel with those registers untouched (parklot::RawSyscall6), and the
// result takes syscall()'s convention: -1 with errno for -4095..-1.
//
// sigaction() and the signal() family, interposed so that while futexes are
// served the program's SIGSEGV and SIGBUS actions go to futex::
// ProgramSigaction, behind the handler that turns a served call's fault
// into EFAULT (futex_ops.h). Every other call, and every call while
// futexes are not served, goes to glibc's own function. glibc's signal(),
// sysv_signal(), sigset() and sigignore() set actions through its internal
// sigaction, which no interposer sees, so each is done here for the two
// signals with glibc 2.36's flags and masks: signal() (= bsd_signal,
// ssignal) SA_RESTART and the signal itself masked; sysv_signal()
// SA_RESETHAND | SA_NODEFER | SA_INTERRUPT; sigset() and sigignore() no
// flags, no mask, sigset() unblocking the signal unless it asks for
// SIG_HOLD.
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/syscall.h>

#include <atomic>

#include "hash/futex.h"
#include "preload/futex_ops.h"
#include "runtime/config.h"

// glibc's exported alias of sigaction: the kernel's side of ours.
extern "C" int __sigaction(int sig, const struct sigaction* act,
                           struct sigaction* old);

namespace parklot::preload {
namespace {

// Set once by the constructor; read on every call (the only cost this
// wrapper adds to other system calls). Calls before the constructor go to
// the kernel, whose waiters served wakes still reach (futex_ops.h, rule 2).
bool g_serve_futex = false;

// glibc's own functions, for the calls not about SIGSEGV/SIGBUS while
// futexes are served. Resolved by the constructor, or on first use by an
// earlier caller (another preloaded library's constructor).
using SignalFn = __sighandler_t (*)(int, __sighandler_t);
std::atomic<SignalFn> g_glibc_signal{nullptr};
std::atomic<SignalFn> g_glibc_sysv_signal{nullptr};
std::atomic<SignalFn> g_glibc_sigset{nullptr};
std::atomic<int (*)(int)> g_glibc_sigignore{nullptr};

template <typename F>
F GlibcFn(std::atomic<F>* slot, const char* name) {
  F f = slot->load(std::memory_order_acquire);
  if (f == nullptr) {
    f = reinterpret_cast<F>(dlvsym(RTLD_NEXT, name, "GLIBC_2.2.5"));
    slot->store(f, std::memory_order_release);
  }
  return f;
}

bool Tracked(int sig) {
  return (sig == SIGSEGV || sig == SIGBUS) && futex::HandlesFaultSignals();
}

// sigaction() for a tracked signal with the handler and flags given and a
// mask of the signal itself (mask_self) or of nothing. Returns the previous
// handler, or SIG_ERR (EINVAL) for a handler of SIG_ERR.
__sighandler_t SetTracked(int sig, __sighandler_t handler, int flags,
                          bool mask_self) {
  if (handler == SIG_ERR) {
    errno = EINVAL;
    return SIG_ERR;
  }
  struct sigaction act = {};
  act.sa_handler = handler;
  act.sa_flags = flags;
  sigemptyset(&act.sa_mask);
  if (mask_self) sigaddset(&act.sa_mask, sig);
  struct sigaction old;
  futex::ProgramSigaction(sig, &act, &old);
  return old.sa_handler;
}

__attribute__((constructor)) void InitFutexShim() {
  GlibcFn(&g_glibc_signal, "signal");
  GlibcFn(&g_glibc_sysv_signal, "sysv_signal");
  GlibcFn(&g_glibc_sigset, "sigset");
  GlibcFn(&g_glibc_sigignore, "sigignore");
  const Config& c = GetConfig();
  if (!c.syscall_futex) return;
  futex::SetKernelSigaction(__sigaction);
  futex::Init();
  if (c.stats) futex::EnableCounting();
  g_serve_futex = true;
}

}  // namespace
}  // namespace parklot::preload

extern "C" __attribute__((visibility("default"))) long syscall(long number,
                                                                ...) {
  va_list ap;
  va_start(ap, number);
  const long a1 = va_arg(ap, long);
  const long a2 = va_arg(ap, long);
  const long a3 = va_arg(ap, long);
  const long a4 = va_arg(ap, long);
  const long a5 = va_arg(ap, long);
  const long a6 = va_arg(ap, long);
  va_end(ap);
  long r;
  if (number == SYS_futex && parklot::preload::g_serve_futex) {
    r = parklot::futex::Futex(a1, a2, a3, a4, a5, a6);
  } else {
    r = parklot::RawSyscall6(number, a1, a2, a3, a4, a5, a6);
  }
  if (static_cast<unsigned long>(r) > -4096UL) {
    errno = static_cast<int>(-r);
    return -1;
  }
  return r;
}

extern "C" {
using parklot::preload::GlibcFn;
using parklot::preload::SetTracked;
using parklot::preload::Tracked;

__attribute__((visibility("default"))) int sigaction(
    int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  if (Tracked(sig)) return parklot::futex::ProgramSigaction(sig, act, old);
  return __sigaction(sig, act, old);
}

__attribute__((visibility("default"))) __sighandler_t signal(
    int sig, __sighandler_t handler) noexcept {
  if (Tracked(sig)) return SetTracked(sig, handler, SA_RESTART, true);
  return GlibcFn(&parklot::preload::g_glibc_signal, "signal")(sig, handler);
}

__attribute__((visibility("default"))) __sighandler_t bsd_signal(
    int sig, __sighandler_t handler) noexcept {
  return signal(sig, handler);
}

__attribute__((visibility("default"))) __sighandler_t ssignal(
    int sig, __sighandler_t handler) noexcept {
  return signal(sig, handler);
}

__attribute__((visibility("default"))) __sighandler_t sysv_signal(
    int sig, __sighandler_t handler) noexcept {
  if (Tracked(sig)) {
    return SetTracked(sig, handler, SA_RESETHAND | SA_NODEFER | SA_INTERRUPT,
                      false);
  }
  return GlibcFn(&parklot::preload::g_glibc_sysv_signal, "sysv_signal")(
      sig, handler);
}

__attribute__((visibility("default"))) __sighandler_t __sysv_signal(
    int sig, __sighandler_t handler) noexcept {
  return sysv_signal(sig, handler);
}

__attribute__((visibility("default"))) int sigignore(int sig) noexcept {
  if (Tracked(sig)) return SetTracked(sig, SIG_IGN, 0, false) == SIG_ERR ? -1 : 0;
  return GlibcFn(&parklot::preload::g_glibc_sigignore, "sigignore")(sig);
}

__attribute__((visibility("default"))) __sighandler_t sigset(
    int sig, __sighandler_t disp) noexcept {
  if (!Tracked(sig)) {
    return GlibcFn(&parklot::preload::g_glibc_sigset, "sigset")(sig, disp);
  }
  sigset_t set, was;
  sigemptyset(&set);
  sigaddset(&set, sig);
  if (disp == SIG_HOLD) {
    // Blocks it; the answer is SIG_HOLD if it was blocked, else the action.
    sigprocmask(SIG_BLOCK, &set, &was);
    if (sigismember(&was, sig)) return SIG_HOLD;
    struct sigaction now;
    parklot::futex::ProgramSigaction(sig, nullptr, &now);
    return now.sa_handler;
  }
  const __sighandler_t old = SetTracked(sig, disp, 0, false);
  if (old == SIG_ERR) return SIG_ERR;
  sigprocmask(SIG_UNBLOCK, &set, &was);
  return sigismember(&was, sig) ? SIG_HOLD : old;
}
}  // extern "C"
