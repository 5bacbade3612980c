// Running a signal handler of the program from one of the shim's own
// (signal_shim.cc's wrapper, futex_ops.cc's fault handler).
#ifndef PARKLOT_PRELOAD_PROGRAM_HANDLER_H_
#define PARKLOT_PRELOAD_PROGRAM_HANDLER_H_

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
// Async-signal-safe.
inline void RunProgramHandler(void (*handler)(int, siginfo_t*, void*),
                              int sig, siginfo_t* info, void* context) {
  SignalHandlerScope scope;
  EnterSignalHandler(&scope);
  handler(sig, info, context);
  // Not reached if the handler leaves by siglongjmp: the mark stays.
  LeaveSignalHandler(scope);
}

}  // namespace parklot::preload

#endif  // PARKLOT_PRELOAD_PROGRAM_HANDLER_H_
