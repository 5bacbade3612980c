// syscall(): glibc's variadic wrapper, interposed so that private
// SYS_futex operations (and the futex2 calls) can be served by the parking lot
// (PARKLOT_SYSCALL_FUTEX=1; preload/futex_ops.h says what is served and the
// rule at the boundary with code that bypasses this wrapper).
//
// glibc's syscall(number, ...) passes six argument registers whatever the
// number; so does this one, read as longs. Every call not served goes to
// the kernel with those registers untouched (parklot::internal::RawSyscall6), and the
// result takes syscall()'s convention: -1 with errno for -4095..-1. A
// scheduling change made this way is noted as sched_shim.cc notes glibc's.
//
// While futexes are served, the program's SIGSEGV and SIGBUS actions live
// behind the handler that turns a served call's fault into EFAULT
// (futex_ops.h); signal_shim.cc routes the program's sigaction() and
// signal() calls for them to futex::ProgramSigaction.
#include <errno.h>
#include <stdarg.h>
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

extern "C" long syscall(long number, ...) {
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
  if (number == SYS_futex && parklot::internal::preload::g_serve_futex) {
    r = parklot::internal::futex::Futex(a1, a2, a3, a4, a5, a6);
  } else if (parklot::internal::preload::g_serve_futex && parklot::internal::futex::IsFutex2(number)) {
    // futex_wake, futex_wait, futex_requeue, futex_waitv: the same words.
    r = parklot::internal::futex::Futex2(number, a1, a2, a3, a4, a5, a6);
  } else {
    r = parklot::internal::RawSyscall6(number, a1, a2, a3, a4, a5, a6);
    if (r == 0 && parklot::internal::preload::SetsScheduling(number)) {
      parklot::internal::preload::NoteSchedulingSyscall(number, a1, a2, a3);
    }
  }
  if (static_cast<unsigned long>(r) > -4096UL) {
    errno = static_cast<int>(-r);
    return -1;
  }
  return r;
}
