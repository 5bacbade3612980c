#include "sync/latch.h"

#include "runtime/parking_lot.h"

namespace parklot {

using internal::KeyOf;
using internal::Park;
using internal::UnparkAll;

void Latch::CountDown(uint32_t n) {
  if (n == 0) return;
  const uintptr_t key = KeyOf(&word_);
  uint32_t w = word_.load(std::memory_order_relaxed);
  for (;;) {
    const uint32_t count = w & kCountMask;
    if (count == 0) return;  // already open (precondition violated)
    const uint32_t next = (w & kWaiters) | (n >= count ? 0 : count - n);
    if (word_.compare_exchange_weak(w, next, std::memory_order_release,
                                    std::memory_order_relaxed)) {
      // Opened with waiters: wake them. From here on only the parking lot
      // is touched (the waiters may free the latch).
      if ((next & kCountMask) == 0 && (w & kWaiters)) UnparkAll(key);
      return;
    }
  }
}

void Latch::Wait() const {
  const uintptr_t key = KeyOf(&word_);
  uint32_t w = word_.load(std::memory_order_acquire);
  while ((w & kCountMask) != 0) {
    if (!(w & kWaiters)) {
      if (!word_.compare_exchange_weak(w, w | kWaiters,
                                       std::memory_order_acquire,
                                       std::memory_order_acquire)) {
        continue;
      }
    }
    Park(key, [this] {
      const uint32_t v = word_.load(std::memory_order_relaxed);
      return (v & kCountMask) != 0 && (v & kWaiters);
    });
    w = word_.load(std::memory_order_acquire);
  }
}

}  // namespace parklot
