// The small lock that guards one bucket of the parking lot's table.
#ifndef PARKLOT_HASH_BUCKET_LOCK_H_
#define PARKLOT_HASH_BUCKET_LOCK_H_

#include <atomic>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "hash/futex.h"

namespace parklot {

// A three-state futex lock (Drepper, "Futexes Are Tricky", mutex 2):
// 0 unlocked, 1 locked, 2 locked with sleepers. Held only for a few queue
// operations, so it spins briefly before sleeping in the kernel. Sleeping
// (rather than spinning forever) is what keeps 64 threads on 2 CPUs moving
// when a holder is preempted.
//
// Thread-safe. Zero-initialized memory is an unlocked BucketLock, so buckets
// live in mmap'ed tables without constructors.
class ABSL_LOCKABLE BucketLock {
 public:
  constexpr BucketLock() = default;

  // Acquires the lock; never fails.
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    uint32_t expected = 0;
    if (word_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
      return;
    }
    LockSlow();
  }

  // Acquires the lock if it is free: one compare-and-swap, as Lock's fast
  // path. Returns true if acquired.
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    uint32_t expected = 0;
    return word_.compare_exchange_strong(expected, 1,
                                         std::memory_order_acquire,
                                         std::memory_order_relaxed);
  }

  // Releases the lock. The caller must hold it.
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    if (word_.exchange(0, std::memory_order_release) == 2) {
      FutexWakePrivate(&word_, 1);
    }
  }

 private:
  void LockSlow();

  std::atomic<uint32_t> word_{0};
};

}  // namespace parklot

#endif  // PARKLOT_HASH_BUCKET_LOCK_H_
