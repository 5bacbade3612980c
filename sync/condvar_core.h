// The condvar algorithm on a caller-provided word (CondVarCore).
// Internal: not part of parklot's API; the public types are in
// sync/condvar.h (installed as <parklot/condvar.h>).
#ifndef PARKLOT_SYNC_CONDVAR_CORE_H_
#define PARKLOT_SYNC_CONDVAR_CORE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "runtime/deadline.h"

namespace parklot::internal {

struct MutexMeta;  // sync/mutex_core.h

// The condvar algorithm on a caller-provided word (the address of the
// mutex word its waiters use, or a sentinel), shared by CondVar and the
// preload shim's pthread_cond_t. Not for direct use by applications.
class CondVarCore {
 public:
  // Word values besides a mutex word's address.
  static constexpr uintptr_t kNoWaiters = 0;
  // Waiters use different locks (or a lock parklot cannot requeue onto):
  // notifications wake instead of requeueing.
  static constexpr uintptr_t kNoRequeue = 1;

  // Atomically releases the lock `mutex_word` (a MutexCore word held by the
  // caller), parks until notified or `deadline`, then re-acquires the lock
  // (a handoff from a requeue makes it ours directly). Returns false if the
  // deadline passed. Spurious returns are possible, as in POSIX.
  static bool Wait(std::atomic<uintptr_t>* cv, std::atomic<uint32_t>* mutex_word,
                   MutexMeta* mutex_meta, const Deadline& deadline);

  // As Wait for an arbitrary lock, released by `unlock(lock)` once the
  // thread is queued and re-acquired by `relock(lock)` on every way out (no
  // requeue). Function pointers, not a function-reference type: this is
  // libparklot.so's ABI, which holds no Abseil type (README, "ABI").
  static bool WaitAny(std::atomic<uintptr_t>* cv, void (*unlock)(void*),
                      void (*relock)(void*), void* lock,
                      const Deadline& deadline);
  // The same with callables, each called with no argument.
  template <typename Unlock, typename Relock>
  static bool WaitAny(std::atomic<uintptr_t>* cv, Unlock unlock, Relock relock,
                      const Deadline& deadline) {
    struct Steps {
      Unlock& unlock;
      Relock& relock;
    } steps{unlock, relock};
    return WaitAny(
        cv, [](void* s) { static_cast<Steps*>(s)->unlock(); },
        [](void* s) { static_cast<Steps*>(s)->relock(); }, &steps, deadline);
  }

  // Wakes one waiter, or, if its mutex is locked, moves it to the mutex's
  // queue to be woken by the unlock. Cheap (one load) with no waiters.
  // Returns whether a waiter was notified.
  static bool NotifyOne(std::atomic<uintptr_t>* cv);
  // Wakes one waiter and requeues the rest onto the mutex (all of them if
  // the mutex is locked); more than 32: requeues them all tagged (the first
  // woken by the mutex's unlock wakes the rest) if the mutex is locked,
  // wakes them all if it is free. Returns the number of waiters notified.
  static size_t NotifyAll(std::atomic<uintptr_t>* cv);
};

}  // namespace parklot::internal

#endif  // PARKLOT_SYNC_CONDVAR_CORE_H_
