// clone(): glibc's wrapper, interposed to note tasks that will share the
// caller's thread-local storage (CLONE_VM without CLONE_SETTLS), so that
// the lot keeps their lock sections and parks apart (hash/shared_tls.h).
// glibc's own thread and process creation (pthread_create, fork,
// posix_spawn, vfork) calls its internal clone and never comes here.
// CLONE_VFORK children are not noted: their creator is suspended until they
// exec or exit, so the two never park at once. A clone that then fails
// leaves the TLS noted (a gettid per park from then on, nothing more).
#include <sched.h>
#include <stdarg.h>
#include <sys/types.h>

#include "hash/shared_tls.h"
#include "preload/shim.h"

extern "C" int clone(
    int (*fn)(void*), void* stack, int flags, void* arg, ...) {
  // glibc reads the three optional arguments whatever the flags; so does
  // this wrapper, and passes them on as they came.
  va_list ap;
  va_start(ap, arg);
  pid_t* parent_tid = va_arg(ap, pid_t*);
  void* tls = va_arg(ap, void*);
  pid_t* child_tid = va_arg(ap, pid_t*);
  va_end(ap);
  if ((flags & CLONE_VM) != 0 && (flags & (CLONE_SETTLS | CLONE_VFORK)) == 0) {
    parklot::NoteTlsSharingTask();
  }
  return parklot::preload::RealGlibc().clone(fn, stack, flags, arg, parent_tid,
                                             tls, child_tid);
}
