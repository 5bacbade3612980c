// The process model (docs/design.md §5.16): which tasks may write the
// shim's process-wide state. A vfork child, and a task made by
// clone(CLONE_VM) that runs on another task's TLS, share the process's
// memory but keep signal actions, a cancellation state and a life of their
// own. The shim's tables of signal handlers (signal_shim.cc, futex_fault.cc)
// and the thread's cancellation word belong to the task that owns the TLS;
// such a task reads them but never writes them.
#ifndef PARKLOT_PRELOAD_TASK_MODEL_H_
#define PARKLOT_PRELOAD_TASK_MODEL_H_

#include "base/shared_tls.h"

// How many vfork children nest on this TLS now: raised by the child of the
// shim's vfork (vfork_shim.cc) and of clone(CLONE_VM | CLONE_VFORK) without
// CLONE_SETTLS (clone_shim.cc), and set back by the parent when it resumes
// (the child has then exec'd or ended). C linkage: the vfork stub, in
// assembly, names it.
extern "C" {
extern constinit __attribute__((tls_model("initial-exec"))) thread_local int
    parklot_vfork_depth;
}

namespace parklot::internal::preload {

// Whether the calling task is a vfork child running on its parent's
// memory and TLS (the parent is suspended until it execs or ends). One TLS
// load. Async-signal-safe.
inline bool InVforkChild() { return parklot_vfork_depth != 0; }

// Whether the calling task owns the TLS it runs on, and with it the
// thread's cancellation state and the process's record of signal actions:
// false in a vfork child and on a task that runs on another's TLS
// (OnForeignTls: one gettid there, a TLS load elsewhere).
// Async-signal-safe.
inline bool TaskOwnsThreadState() {
  return !InVforkChild() && !OnForeignTls();
}

}  // namespace parklot::internal::preload

#endif  // PARKLOT_PRELOAD_TASK_MODEL_H_
