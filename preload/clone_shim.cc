// clone(): glibc's wrapper, interposed to note tasks that will share the
// caller's thread-local storage (CLONE_VM without CLONE_SETTLS), so that
// the lot keeps their lock sections and parks apart (base/shared_tls.h),
// and tasks that share its memory at all (CLONE_VM), which end the
// single-threaded mutex path (shim.h, kHookSingleThreaded).
// glibc's own thread and process creation (pthread_create, fork,
// posix_spawn, vfork) calls its internal clone and never comes here.
// CLONE_VFORK children are not noted: their creator is suspended until they
// exec or exit, so the two never park at once; they are vfork children
// instead (parklot_vfork_depth, task_model.h), raised around the call, so
// that the child, which runs on the creator's TLS, never writes the
// creator's record of signal actions or cancellation state
// (docs/design.md §5.16). A clone that then fails leaves the TLS noted (a
// gettid per park from then on, nothing more).
#include <sched.h>
#include <sys/types.h>

#include "base/shared_tls.h"
#include "preload/shim.h"
#include "preload/task_model.h"

// clone(fn, stack, flags, arg, ...), with its three optional arguments as
// fixed parameters (preload/surface.h): glibc reads them whatever the
// flags; so does this wrapper, and passes them on as they came.
extern "C" int parklot_serve_clone(int (*fn)(void*), void* stack, int flags,
                                   void* arg, pid_t* parent_tid, void* tls,
                                   pid_t* child_tid) {
  const bool shares_tls = (flags & (CLONE_VM | CLONE_SETTLS)) == CLONE_VM;
  if (shares_tls && (flags & CLONE_VFORK) == 0) parklot::internal::NoteTlsSharingTask();
  // A task on this memory that glibc does not count as a thread: the
  // single-threaded mutex path ends (a vfork child's creator waits).
  if ((flags & (CLONE_VM | CLONE_VFORK)) == CLONE_VM) {
    parklot::internal::preload::SharedMemoryTaskMade();
  }
  const bool vfork_child = shares_tls && (flags & CLONE_VFORK) != 0;
  const int depth = parklot_vfork_depth;
  if (vfork_child) parklot_vfork_depth = depth + 1;
  int rc = parklot::internal::preload::RealGlibc().clone(
      fn, stack, flags, arg, parent_tid, tls, child_tid);
  // Never a tail call: one would store child_tid back into the stack slot
  // of the seventh argument, which is the caller's own memory when it
  // passed fewer (at -O2 GCC did).
  asm volatile("" : "+r"(rc));
  // The creator resumes once the child has exec'd or ended.
  if (vfork_child) parklot_vfork_depth = depth;
  return rc;
}
