#include "hash/bucket_lock.h"

namespace parklot {

void BucketLock::LockSlow() {
  // Bucket critical sections are a handful of pointer writes: a short spin
  // usually wins; past it the holder is likely preempted, so sleep.
  for (int i = 0; i < 64; ++i) {
    CpuRelax();
    uint32_t expected = 0;
    if (word_.load(std::memory_order_relaxed) == 0 &&
        word_.compare_exchange_weak(expected, 1, std::memory_order_acquire,
                                    std::memory_order_relaxed)) {
      return;
    }
  }
  while (word_.exchange(2, std::memory_order_acquire) != 0) {
    FutexWaitPrivate(&word_, 2);
  }
}

}  // namespace parklot
