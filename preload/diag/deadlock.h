// PARKLOT_DEADLOCK=report|abort: lock-order cycles and actual deadlocks in
// programs run under the shim.
//
// Lock order: each thread's held locks (shim mutexes of every kind, glibc's
// robust/process-shared ones too, rwlocks in both modes, the mutex a
// condvar wait re-takes) and a graph of "held A while taking B" edges over
// lock addresses (Abseil's GraphCycles). The first acquisition that would
// close a cycle is reported once, with the call sites and threads of every
// edge and their stacks; the edge is not added. A trylock adds no edge (it
// cannot wait); re-taking a lock the thread holds (recursive mutex,
// recursive read lock) adds none either. A cycle whose only way through a
// reader-preferring rwlock is read-held to read-wanted cannot deadlock (as
// in glibc, such a reader never waits for readers) and is not reported: an
// rwlock is four graph nodes (wanted for reading or writing, held for
// reading or writing) joined by the three ways of waiting that block.
// Destroying a lock, or initializing an address the graph knows, removes
// its node; a lock made with no call the shim sees (std::mutex in a
// reallocated object, an initializer in recycled or stack memory) is told
// from the dead one at its address by a generation kept in the lock
// (docs/design.md §5.11): a recycled address makes no false cycle.
//
// Actual deadlocks: a thread parked on a lock for kDeadlockCheckAfterNs walks
// the wait-for chain (the thread holding the lock it waits for, the lock
// that one waits for, ...); a chain back to itself is printed once, with
// each thread's wanted lock and call site and where it took the lock it
// holds. In abort mode the process then aborts (a core dump shows it).
// Lock-order cycles are reported, never aborted on: they did not deadlock.
//
// Cost: nothing when off (one predictable branch per lock and one per
// unlock). On: an acquisition with no other lock held updates the thread's
// list only; one with locks held checks a per-thread cache of known edges
// and takes the graph's spinlock only for an edge it has not seen. No
// malloc on any of these paths: the graph lives in Abseil's mmap arena, the
// rest in mmap'ed tables; a report (stack traces, symbolizing) uses
// Abseil's own mmap arena too.
//
// The detector lives in the diagnostics object (diag.h), which the shim
// loads only under PARKLOT_DEADLOCK (or PARKLOT_STATS, for its symbolizer);
// the shim keeps the hooks' call sites and the waits' slicing.
#ifndef PARKLOT_PRELOAD_DIAG_DEADLOCK_H_
#define PARKLOT_PRELOAD_DIAG_DEADLOCK_H_

#include <cstdint>

#include "preload/diag/diag.h"
#include "runtime/config.h"
#include "runtime/deadline.h"

namespace parklot::internal::preload {

// How long a thread waits for a lock before it checks for a deadlock.
inline constexpr int64_t kDeadlockCheckAfterNs = 1000000000;

// Loads the diagnostics object (diag.h) from the shim's directory, once;
// true if it is loaded. Call from the shim's constructor only, after
// InitReportSinks. Not thread-safe.
bool LoadDiagnostics();
// Why the object is not loaded (a line's worth), or nullptr if it is.
const char* DiagnosticsUnavailable();
// The object's functions (zero until LoadDiagnostics succeeds).
extern DiagHooks g_diag;

// Turns detection on: loads the diagnostics object, which maps its tables
// and registers its fork step; sets kHookDeadlock in g_lock_hooks (shim.h:
// DeadlockOn()). Call once from the shim's constructor. Not thread-safe.
// If the object cannot be loaded, or its tables cannot be mapped, it says
// so on the report sink (PARKLOT_REPORT, else stderr) and detection stays
// off.
void EnableDeadlockDetection(const Config& config);

// The hooks, called only while DeadlockOn(). They run in the diagnostics
// object (preload/diag/deadlock.cc).
//
// The calling thread is about to take `lock` in `mode` and may wait for it
// (a lock, timed lock, condvar re-lock; not a trylock), from the call whose
// return address is `site`: adds the order edges from the locks it holds
// and reports the first that closes a cycle. Any thread; no malloc.
inline void DeadlockBeforeLock(const void* lock, LockMode mode,
                               const void* site) {
  g_diag.before_lock(lock, mode, site);
}

// The calling thread now holds `lock` (any way of taking it). Any thread.
inline void DeadlockAcquired(const void* lock, LockMode mode,
                             const void* site) {
  g_diag.acquired(lock, mode, site);
}

// The calling thread releases `lock` (call before the lock word is
// released). Returns the call site that took it (nullptr if not listed).
// Calling thread's list only; no malloc.
inline const void* DeadlockReleased(const void* lock) {
  return g_diag.released(lock);
}

// `lock` was destroyed, or an address is initialized as a new lock: its
// graph node and edges go. Any thread.
inline void DeadlockForget(const void* lock) { g_diag.forget(lock); }

// Marks the calling thread as waiting for `lock` (nullptr: no longer).
// Calling thread only; no malloc.
inline void DeadlockWaiting(const void* lock, LockMode mode,
                            const void* site) {
  g_diag.waiting(lock, mode, site);
}

// Called by a thread that has waited kDeadlockCheckAfterNs for the lock it
// marked with DeadlockWaiting: reports a wait-for cycle through it (once
// per cycle; the report is formatted under the graph's spinlock) and, in
// abort mode, calls abort(). Calling thread only; no malloc.
inline void DeadlockCheckWait() { g_diag.check_wait(); }

// The deadline for the next slice of a wait that checks for deadlocks:
// `user`, or kDeadlockCheckAfterNs from now if that is sooner. Sets
// `*is_user` to whether it is `user`'s.
Deadline DeadlockSlice(const Deadline& user, bool* is_user);

// Acquires by calling `try_until(deadline)` (true: acquired) in slices,
// checking for a deadlock after each slice that ends before `user`.
// Returns false when `user` passed first.
template <typename F>
bool AcquireWatched(const void* lock, LockMode mode, const void* site,
                    const Deadline& user, F try_until) {
  DeadlockWaiting(lock, mode, site);
  bool ok;
  for (;;) {
    bool is_user;
    const Deadline slice = DeadlockSlice(user, &is_user);
    ok = try_until(slice);
    if (ok || is_user) break;
    DeadlockCheckWait();
  }
  DeadlockWaiting(nullptr, mode, nullptr);
  return ok;
}

}  // namespace parklot::internal::preload

#endif  // PARKLOT_PRELOAD_DIAG_DEADLOCK_H_
