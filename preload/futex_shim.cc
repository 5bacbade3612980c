// syscall(): glibc's variadic wrapper, interposed so that private
// SYS_futex operations (and the futex2 calls) can be served by the parking lot
// (PARKLOT_SYSCALL_FUTEX=1; preload/futex_ops.h says what is served and the
// rule at the boundary with code that bypasses this wrapper).
//
// glibc's syscall(number, ...) passes six argument registers whatever the
// number; so does this one, taken as fixed parameters (surface.h). Every
// call not served goes to the kernel with those registers untouched (parklot::internal::RawSyscall6), and the
// result takes syscall()'s convention: -1 with errno for -4095..-1. A
// scheduling change made this way is noted as sched_shim.cc notes glibc's.
//
// While futexes are served, the program's SIGSEGV and SIGBUS actions live
// behind the handler that turns a served call's fault into EFAULT
// (futex_ops.h); signal_shim.cc routes the program's sigaction() and
// signal() calls for them to futex::ProgramSigaction.
#include <errno.h>
#include <sys/syscall.h>

#include "base/futex.h"
#include "preload/futex_ops.h"
#include "preload/shim.h"
#include "runtime/config.h"

namespace parklot::internal::preload {
namespace {

// Set once by the constructor; read on every call (the only cost this
// wrapper adds to other system calls). Calls before the constructor go to
// the kernel, whose waiters served wakes still reach (futex_ops.h, rule 2).
bool g_serve_futex = false;

__attribute__((constructor)) void InitFutexShim() {
  // Under Valgrind syscall() is glibc's (surface.h): nothing to serve.
  if (SteppingAside()) return;
  const Config& c = GetConfig();
  if (!c.syscall_futex) return;
  futex::SetKernelSigaction(RealGlibc().sigaction);
  futex::SetCurrentTid(CurrentTid);
  futex::Init();
  if (c.stats) futex::EnableCounting();
  g_serve_futex = true;
}

}  // namespace
}  // namespace parklot::internal::preload

namespace parklot::internal::preload {
namespace {

// Every call but a served SYS_futex: out of line, so that the served
// call's path through syscall() saves no registers.
__attribute__((noinline)) long OtherSyscall(long number, long a1, long a2,
                                            long a3, long a4, long a5,
                                            long a6) {
  if (g_serve_futex && futex::IsFutex2(number)) {
    // futex_wake, futex_wait, futex_requeue, futex_waitv: the same words.
    return futex::Futex2(number, a1, a2, a3, a4, a5, a6);
  }
  const long r = RawSyscall6(number, a1, a2, a3, a4, a5, a6);
  if (r == 0 && SetsScheduling(number)) {
    NoteSchedulingSyscall(number, a1, a2, a3);
  }
  return r;
}

}  // namespace
}  // namespace parklot::internal::preload

// syscall(number, ...), its six argument registers as fixed parameters
// (preload/surface.h).
extern "C" long parklot_serve_syscall(long number, long a1, long a2, long a3,
                                      long a4, long a5, long a6) {
  namespace p = parklot::internal::preload;
  const long r = number == SYS_futex && p::g_serve_futex
                     ? parklot::internal::futex::Futex(a1, a2, a3, a4, a5, a6)
                     : p::OtherSyscall(number, a1, a2, a3, a4, a5, a6);
  if (static_cast<unsigned long>(r) > -4096UL) {
    errno = static_cast<int>(-r);
    return -1;
  }
  return r;
}
