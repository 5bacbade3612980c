// Running a signal handler of the program from one of the shim's own
// (signal_shim.cc's wrapper, futex_ops.cc's fault handler).
#ifndef PARKLOT_PRELOAD_PROGRAM_HANDLER_H_
#define PARKLOT_PRELOAD_PROGRAM_HANDLER_H_

#include <pthread.h>
#include <signal.h>

#include "runtime/parking_lot.h"

namespace parklot::preload {

// Runs the program's handler `handler` (a function, not SIG_DFL or
// SIG_IGN) for signal `sig` with the kernel's `info` and `context`, inside
// EnterSignalHandler/LeaveSignalHandler (a queued thread is marked away
// while the handler may leave by siglongjmp). Always with all three
// arguments, whether or not the program asked for SA_SIGINFO: x86-64 Linux
// passes the siginfo and ucontext addresses to every handler, and handlers
// declared with three parameters but installed without SA_SIGINFO (by
// signal(), say) read them; a one-parameter handler ignores the extra
// argument registers under the x86-64 calling convention.
//
// The handler runs in deferred cancellation mode. A handler interrupts
// blocking calls that run in asynchronous mode (glibc 2.36's read(),
// nanosleep() and other cancellation points switch it on around the system
// call; so does the lot's own cancellable sleep, SleepOnParker), and
// pthread_cancel would unwind the thread from any instruction of the
// handler: from inside a bucket lock or a queue change when the handler
// calls sem_post or, with PARKLOT_SYSCALL_FUTEX=1, a raw FUTEX_WAKE, which
// leaves the bucket locked forever, or ends the process in std::terminate
// when the unwinding meets a noexcept frame. A cancel sent meanwhile stays
// pending and acts when the handler returns, as the asynchronous mode comes
// back: the thread unwinds from the interrupted call, as under glibc. A
// handler that leaves by siglongjmp leaves the thread in deferred mode,
// the mode of every program that never asked for asynchronous mode itself.
// Async-signal-safe: pthread_setcanceltype is an atomic update of the
// thread's own cancellation word in glibc.
inline void RunProgramHandler(void (*handler)(int, siginfo_t*, void*),
                              int sig, siginfo_t* info, void* context) {
  int cancel_type = PTHREAD_CANCEL_DEFERRED;
  pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, &cancel_type);
  SignalHandlerScope scope;
  EnterSignalHandler(&scope);
  handler(sig, info, context);
  // Not reached if the handler leaves by siglongjmp: the mark stays.
  LeaveSignalHandler(scope);
  // Last: a pending cancel unwinds from here, through the signal frame.
  if (cancel_type == PTHREAD_CANCEL_ASYNCHRONOUS) {
    pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, nullptr);
  }
}

}  // namespace parklot::preload

#endif  // PARKLOT_PRELOAD_PROGRAM_HANDLER_H_
