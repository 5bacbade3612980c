// Signal handler installation: every handler the program installs runs
// inside a wrapper that brackets it with EnterSignalHandler and
// LeaveSignalHandler (runtime/parking_lot.h), so that a thread whose
// handler leaves a wait by siglongjmp is never handed a lock, a semaphore
// unit or a notification it cannot take (docs/design.md section 6, invariant
// 6).
//
// The shim's one place for signal actions. Interposed: sigaction
// (__sigaction), signal
// (bsd_signal, ssignal), siginterrupt, sysv_signal (__sysv_signal), sigset
// and sigignore (glibc's set actions through its internal sigaction, which
// no interposer sees, so each is done here with glibc 2.36's flags and
// masks). The
// program sees its own handlers: the old action reported is the program's,
// never the wrapper, with the kernel's flags and mask as glibc reports them
// (also after the kernel reset an SA_RESETHAND action). While the shim
// serves raw futexes, SIGSEGV and SIGBUS actions go to
// futex::ProgramSigaction instead (futex_ops.h), whose fault
// handler runs the program's handler in the same brackets. Not interposed:
// sigvec and raw rt_sigaction system calls; their handlers run unwrapped,
// as under glibc alone, and only the siglongjmp case above is unprotected
// for them.
#include <errno.h>
#include <signal.h>

#include <atomic>
#include <cstdint>

#include "hash/lock_section.h"
#include "preload/futex_ops.h"
#include "preload/program_handler.h"
#include "preload/shim.h"
#include "preload/task_model.h"
#include "runtime/parking_lot.h"

namespace parklot::internal::preload {
namespace {

// The program's handler per signal, with its SA_SIGINFO choice in the top
// bit (user-space addresses never use it), in one word so that a wrapper
// running while another thread installs a handler reads a consistent pair.
// The action's SA_RESETHAND in the next bit: the kernel has made such an
// action SIG_DFL by the time the wrapper runs, so its signal is never
// deferred (delivered again, it would take the default action).
constexpr uintptr_t kSigInfoBit = uintptr_t{1} << 63;
constexpr uintptr_t kResetBit = uintptr_t{1} << 62;
constexpr uintptr_t kFlagBits = kSigInfoBit | kResetBit;
std::atomic<uintptr_t> g_handlers[NSIG];

// A signal that interrupts its thread inside one of the lot's lock sections
// is kept for the section's end (DeferSignalToSectionEnd): the program's
// handler then runs as if the signal had come a few instructions later,
// and cannot wait for a bucket lock, the registry or the start-up its own
// thread holds (docs/design.md section 5.8, invariant 11).
void Wrapper(int sig, siginfo_t* info, void* context) {
  const uintptr_t word = g_handlers[sig].load(std::memory_order_acquire);
  const uintptr_t h = word & ~kFlagBits;
  if (h > reinterpret_cast<uintptr_t>(SIG_IGN)) {
    // InLockSection first, inline: a handler outside every section pays
    // no call (and no signal-stack frame) for the deferral.
    if ((word & kResetBit) == 0 && InLockSection() &&
        DeferSignalToSectionEnd(sig, info, context)) {
      return;
    }
    RunProgramHandler(
        reinterpret_cast<void (*)(int, siginfo_t*, void*)>(h), sig, info,
        context);
  }
}

bool IsFunction(uintptr_t h) {
  return h != reinterpret_cast<uintptr_t>(SIG_DFL) &&
         h != reinterpret_cast<uintptr_t>(SIG_IGN) &&
         h != reinterpret_cast<uintptr_t>(SIG_ERR);
}

uintptr_t HandlerOf(const struct sigaction& act) {
  const uintptr_t reset = (act.sa_flags & SA_RESETHAND) != 0 ? kResetBit : 0;
  if ((act.sa_flags & SA_SIGINFO) != 0) {
    return reinterpret_cast<uintptr_t>(act.sa_sigaction) | kSigInfoBit | reset;
  }
  return reinterpret_cast<uintptr_t>(act.sa_handler) | reset;
}

// Rewrites an action the kernel reported so that it shows what glibc alone
// would: the program's handler (`program`, as stored in g_handlers) instead
// of the wrapper, and the program's SA_SIGINFO choice also once the kernel
// has reset an SA_RESETHAND action to SIG_DFL (it keeps the flags, the
// wrapper's SA_SIGINFO among them). The mask and the other flags are the
// kernel's own (it drops SIGKILL, SIGSTOP and flags it does not know).
void ShowProgramHandler(struct sigaction* act, uintptr_t program) {
  const uintptr_t handler = program & ~kFlagBits;
  if ((act->sa_flags & SA_SIGINFO) == 0 || !IsFunction(handler)) return;
  const bool siginfo = (program & kSigInfoBit) != 0;
  if (act->sa_sigaction == &Wrapper) {
    if (siginfo) {
      act->sa_sigaction =
          reinterpret_cast<void (*)(int, siginfo_t*, void*)>(handler);
    } else {
      act->sa_flags &= ~SA_SIGINFO;
      act->sa_handler = reinterpret_cast<void (*)(int)>(handler);
    }
  } else if (!siginfo && act->sa_handler == SIG_DFL &&
             (act->sa_flags & SA_RESETHAND) != 0) {
    act->sa_flags &= ~SA_SIGINFO;  // the kernel reset our wrapper
  }
}

int Install(int sig, const struct sigaction* act, struct sigaction* oact) {
  if (sig <= 0 || sig >= NSIG) return RealGlibc().sigaction(sig, act, oact);
  const uintptr_t previous = g_handlers[sig].load(std::memory_order_acquire);
  if (act == nullptr || !IsFunction(HandlerOf(*act) & ~kFlagBits)) {
    const int rc = RealGlibc().sigaction(sig, act, oact);
    if (rc == 0 && oact != nullptr) ShowProgramHandler(oact, previous);
    // Recorded after the kernel's change, so that a wrapper run meanwhile
    // still finds the old handler; a SIG_DFL left by a reset is then known
    // to be the program's own.
    if (rc == 0 && act != nullptr) {
      g_handlers[sig].store(HandlerOf(*act), std::memory_order_release);
    }
    return rc;
  }
  struct sigaction wrapped = *act;
  wrapped.sa_flags |= SA_SIGINFO;
  wrapped.sa_sigaction = &Wrapper;
  // Published before the kernel can call the wrapper for it.
  g_handlers[sig].store(HandlerOf(*act), std::memory_order_release);
  const int rc = RealGlibc().sigaction(sig, &wrapped, oact);
  if (rc != 0) {
    g_handlers[sig].store(previous, std::memory_order_release);
    return rc;
  }
  if (oact != nullptr) ShowProgramHandler(oact, previous);
  return 0;
}

// On a task that does not own the record of actions (a vfork child, a
// task on another's TLS; task_model.h): the kernel's action alone,
// unwrapped, and the record only read, to show the old action as the
// program's. Its handlers then run as under glibc alone; only the
// siglongjmp case (program_handler.h) is unprotected for them.
int InstallForTaskOnly(int sig, const struct sigaction* act,
                       struct sigaction* oact) {
  const uintptr_t recorded =
      sig > 0 && sig < NSIG ? g_handlers[sig].load(std::memory_order_acquire)
                            : 0;
  const int rc = RealGlibc().sigaction(sig, act, oact);
  if (rc == 0 && oact != nullptr) ShowProgramHandler(oact, recorded);
  return rc;
}

// Every action the program sets or asks for comes here.
int Sigaction(int sig, const struct sigaction* act, struct sigaction* oact) {
  if ((sig == SIGSEGV || sig == SIGBUS) && futex::HandlesFaultSignals()) {
    return futex::ProgramSigaction(sig, act, oact);
  }
  if (act != nullptr && !TaskOwnsThreadState()) {
    return InstallForTaskOnly(sig, act, oact);
  }
  return Install(sig, act, oact);
}

// The signals siginterrupt() made interrupting: glibc's signal() installs
// them without SA_RESTART, reading a set (_sigintr) that glibc keeps
// hidden, so siginterrupt is interposed to keep this copy. Bit sig - 1.
std::atomic<uint64_t> g_interrupting{0};
static_assert(NSIG - 1 <= 64, "one bit per signal");

bool Interrupting(int sig) {
  return sig > 0 && sig < NSIG &&
         (g_interrupting.load(std::memory_order_relaxed) >> (sig - 1) & 1);
}

// glibc's signal(), sysv_signal(), sigset(): the same checks, flags and
// mask. Returns the previous handler, or SIG_ERR with errno EINVAL.
sighandler_t InstallSimple(int sig, sighandler_t handler, int flags,
                           bool mask_self) {
  if (handler == SIG_ERR || sig <= 0 || sig >= NSIG) {
    errno = EINVAL;
    return SIG_ERR;
  }
  struct sigaction act = {};
  act.sa_handler = handler;
  sigemptyset(&act.sa_mask);
  if (mask_self) sigaddset(&act.sa_mask, sig);
  act.sa_flags = flags;
  struct sigaction old;
  if (Sigaction(sig, &act, &old) != 0) return SIG_ERR;
  return old.sa_handler;
}

}  // namespace
}  // namespace parklot::internal::preload

using parklot::internal::preload::g_interrupting;
using parklot::internal::preload::InstallSimple;
using parklot::internal::preload::Interrupting;
using parklot::internal::preload::Sigaction;

extern "C" {

int sigaction(int sig, const struct sigaction* act, struct sigaction* oact) {
  return Sigaction(sig, act, oact);
}
// glibc's exported alias (__sigaction@@GLIBC_2.2.5), which a program can
// link against as it does sigaction.
int __sigaction(int sig, const struct sigaction* act,
                struct sigaction* oact) {
  return Sigaction(sig, act, oact);
}

// BSD semantics, as glibc's signal(): restart (unless siginterrupt made
// the signal interrupting), block the signal meanwhile.
sighandler_t signal(int sig, sighandler_t handler) {
  return InstallSimple(sig, handler, Interrupting(sig) ? 0 : SA_RESTART,
                       /*mask_self=*/true);
}

// As glibc's: records the choice for later signal() calls and sets or
// clears SA_RESTART in the signal's current action. 0, or -1 with errno
// EINVAL for an invalid signal (nothing recorded).
int siginterrupt(int sig, int interrupt) {
  struct sigaction act;
  if (Sigaction(sig, nullptr, &act) != 0) return -1;
  const uint64_t bit = uint64_t{1} << (sig - 1);
  if (interrupt) {
    g_interrupting.fetch_or(bit, std::memory_order_relaxed);
    act.sa_flags &= ~SA_RESTART;
  } else {
    g_interrupting.fetch_and(~bit, std::memory_order_relaxed);
    act.sa_flags |= SA_RESTART;
  }
  return Sigaction(sig, &act, nullptr) != 0 ? -1 : 0;
}
sighandler_t bsd_signal(int sig, sighandler_t handler) {
  return signal(sig, handler);
}
sighandler_t ssignal(int sig, sighandler_t handler) {
  return signal(sig, handler);
}

// System V semantics: one-shot, not blocked, no restart (glibc also sets
// the historical no-op SA_INTERRUPT, which sigaction then reports).
sighandler_t sysv_signal(int sig, sighandler_t handler) {
  return InstallSimple(sig, handler, SA_RESETHAND | SA_NODEFER | SA_INTERRUPT,
                       /*mask_self=*/false);
}
sighandler_t __sysv_signal(int sig, sighandler_t handler) {
  return sysv_signal(sig, handler);
}

// System V: no flags, no mask; sigset() also unblocks the signal, unless
// it asks for SIG_HOLD, which only blocks it. Both answer SIG_HOLD for a
// signal that was blocked.
int sigignore(int sig) {
  return InstallSimple(sig, SIG_IGN, 0, /*mask_self=*/false) == SIG_ERR ? -1
                                                                         : 0;
}

sighandler_t sigset(int sig, sighandler_t disp) {
  if (sig <= 0 || sig >= NSIG) {
    errno = EINVAL;
    return SIG_ERR;
  }
  sigset_t set, was;
  sigemptyset(&set);
  sigaddset(&set, sig);
  if (disp == SIG_HOLD) {
    if (sigprocmask(SIG_BLOCK, &set, &was) != 0) return SIG_ERR;
    if (sigismember(&was, sig)) return SIG_HOLD;
    struct sigaction now;
    if (Sigaction(sig, nullptr, &now) != 0) return SIG_ERR;
    return now.sa_handler;
  }
  const sighandler_t old = InstallSimple(sig, disp, 0, /*mask_self=*/false);
  if (old == SIG_ERR) return SIG_ERR;
  if (sigprocmask(SIG_UNBLOCK, &set, &was) != 0) return SIG_ERR;
  return sigismember(&was, sig) ? SIG_HOLD : old;
}

}  // extern "C"
