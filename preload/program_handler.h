// Running a signal handler of the program from one of the shim's own
// (signal_shim.cc's wrapper, futex_fault.cc's fault handler).
#ifndef PARKLOT_PRELOAD_PROGRAM_HANDLER_H_
#define PARKLOT_PRELOAD_PROGRAM_HANDLER_H_

#include <pthread.h>
#include <signal.h>

#include "hash/lock_section.h"
#include "preload/task_model.h"
#include "runtime/parking_lot.h"
#include "sync/mutex_core.h"

namespace parklot::internal::preload {

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
// when the unwinding meets a noexcept frame.
//
// The thread's own type comes back however the handler leaves. Where it was
// asynchronous, one of glibc's cleanup buffers (_pthread_cleanup_push, the
// list that glibc's longjmp runs for the frames it leaves and its unwinder
// for the frames it unwinds) holds a routine that switches it back on: as
// the handler returns, and as it leaves by siglongjmp, longjmp (also
// __longjmp_chk) or pthread_exit; a jump within the handler runs nothing. A
// cancel sent meanwhile stays pending and acts at that moment: the thread
// unwinds from the interrupted call, or from the jump, as under glibc it
// would have from the handler. A deferred thread pays nothing more. Not
// covered: a handler of an asynchronous thread left by setcontext or by a
// C++ exception (the type stays deferred; after an exception glibc's list
// keeps the dead buffer). No destructor may be added here: a frame with
// one gets an exception table, and an asynchronous cancel that lands on an
// instruction outside its call sites (before the switch to deferred mode)
// then ends in std::terminate.
// Async-signal-safe: pthread_setcanceltype is an atomic update of the
// thread's own cancellation word in glibc, and the cleanup list is the
// thread's own, pushed and popped by one store each.
namespace program_handler_internal {

extern "C" void _pthread_cleanup_push(struct _pthread_cleanup_buffer* buffer,
                                      void (*routine)(void*), void* arg);
extern "C" void _pthread_cleanup_pop(struct _pthread_cleanup_buffer* buffer,
                                     int execute);

inline void RestoreAsynchronous(void*) {
  pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, nullptr);
}

}  // namespace program_handler_internal

// Not instrumented by ASan: the cleanup buffer must lie on the real stack,
// between the handler's frames and the jump's target, where glibc's
// longjmp looks for it (ASan's fake stacks would put it elsewhere).
__attribute__((no_sanitize_address)) inline void RunProgramHandler(
    void (*handler)(int, siginfo_t*, void*), int sig, siginfo_t* info,
    void* context) {
  namespace internal = program_handler_internal;
  // A mutex step the signal interrupted is settled first, so that the
  // handler never finds a lock taken without its holder or a holder
  // cleared from a lock still held (sync/mutex_core.h).
  if (!SignalIsFault(sig, info)) MutexCore::SettleInterruptedStep(context);
  // The cancellation word and cleanup list are those of the task that owns
  // the TLS: a vfork child or a task on another's TLS leaves them alone
  // (task_model.h); pthread_cancel cannot reach such a task.
  bool was_async = false;
  if (TaskOwnsThreadState()) {
    int cancel_type = PTHREAD_CANCEL_DEFERRED;
    pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, &cancel_type);
    was_async = cancel_type == PTHREAD_CANCEL_ASYNCHRONOUS;
  }
  _pthread_cleanup_buffer restore;
  if (was_async) {
    internal::_pthread_cleanup_push(&restore, internal::RestoreAsynchronous,
                                    nullptr);
  }
  SignalHandlerScope scope;
  EnterSignalHandler(&scope);
  handler(sig, info, context);
  // Not reached if the handler leaves by siglongjmp: the mark stays.
  LeaveSignalHandler(scope);
  // Last: a pending cancel unwinds from here, through the signal frame.
  if (was_async) internal::_pthread_cleanup_pop(&restore, /*execute=*/1);
}

}  // namespace parklot::internal::preload

#endif  // PARKLOT_PRELOAD_PROGRAM_HANDLER_H_
