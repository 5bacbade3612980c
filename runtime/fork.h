// fork(): the one owner of what the lot does around fork().
//
// One pthread_atfork registration (made when the library loads, so that it
// runs innermost: after the program's prepare handlers, which may lock
// parklot mutexes, and before its parent and child handlers) runs the
// steps below. Each layer registers its own step at load time, so no layer
// includes one above it; the order is fixed here, not by registration.
//
// Before fork() the prepare parts run in the order of ForkStep; after it
// the parent parts (in the parent) or the child parts (in the child) run in
// the reverse order: what was taken last is released first, and the lot is
// working again before any layer above it runs its child part, so fork()
// leaves the child a working lot (docs/design.md section 3.11) and a fork at
// any moment never hangs the child (section 6, invariant 7).
#ifndef PARKLOT_RUNTIME_FORK_H_
#define PARKLOT_RUNTIME_FORK_H_

namespace parklot::internal {

// The steps, in prepare order.
enum class ForkStep {
  // preload/: PARKLOT_STATS's operation counts. Child: what the parent had
  // served (and futex calls it saw) by the fork is noted, so that a child
  // that serves nothing itself prints no report (its figures would repeat
  // its parent's). Reads only.
  kShimStats,
  // preload/: the stand-in mutexes of process-shared condvar waits.
  // Child: reinitialized (only threads now gone could hold them).
  kShimStandIns,
  // sync/: Once's fork generation. Child: bumped, so that a Once whose
  // function was running in the parent runs again (as pthread_once does).
  kOnceGeneration,
  // runtime/ and hash/, once the lot exists: in this order, the thread
  // registry's lock, and the bucket table's grow lock and every bucket lock.
  // Parent: released in reverse. Child: the registry keeps only the forking
  // thread, the queues are emptied, and the locks are released in reverse.
  kLot,
  // preload/: PARKLOT_DEADLOCK's report and graph locks. Last, because
  // lock taken through the shim runs the detector, which takes these. Child: released, and
  // only the forking thread's held-lock record is kept.
  kDeadlockGraph,
  // hash/ and runtime/, only where the TLS was shared (base/shared_tls.h):
  // prepare notes which task forks (last: it takes nothing). Child, first
  // of all: its one thread takes the forking task's own lock-section state
  // (the owner's, or a task's entry) as its TLS's, frees every foreign
  // entry and guest record, and owns its TLS alone, before any step below
  // can open a lock section (docs/design.md section 3.11).
  kSharedTls,
  kCount,
};

// A step's parts; any may be null. `prepare` returns whether it took
// anything: if it returns false, `parent` and `child` do not run for this
// fork. A step without `prepare` always has its `parent` and `child` run.
// They run on the forking thread, `child` while the child has one thread,
// so they may use only what a fork child may (no malloc, no lock another
// thread could hold).
struct ForkHandlers {
  bool (*prepare)() = nullptr;
  void (*parent)() = nullptr;
  void (*child)() = nullptr;
};

// Registers `handlers` (static storage; must outlive the process) as
// `step`, replacing any earlier registration of it. Call at load time
// (from a constructor), before the process can fork. Thread-safe;
// allocates nothing.
void RegisterForkStep(ForkStep step, const ForkHandlers* handlers);

}  // namespace parklot::internal

#endif  // PARKLOT_RUNTIME_FORK_H_
