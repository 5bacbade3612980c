// parklot::Latch: a single-use downward counter that threads can wait on
// reaching zero (C++20 std::latch semantics) in 4 bytes.
#ifndef PARKLOT_SYNC_LATCH_H_
#define PARKLOT_SYNC_LATCH_H_

#include "sync/requires_cxx20.h"  // first: one #error before C++20
#if PARKLOT_CXX20

#include <atomic>
#include <cstdint>

namespace parklot {

// Thread-safe. No heap allocation. Waiters park on the latch's address at
// once. The thread whose CountDown reaches zero touches only the parking
// lot afterwards, so a waiter may destroy the latch as soon as Wait
// returns.
class Latch {
 public:
  // The largest initial count (std::latch::max()).
  static constexpr uint32_t kMax = 0x7fffffff;

  // A latch that opens after `count` arrivals. Precondition:
  // count <= kMax (clamped).
  explicit constexpr Latch(uint32_t count)
      : word_(count <= kMax ? count : kMax) {}
  Latch(const Latch&) = delete;
  Latch& operator=(const Latch&) = delete;

  // Decrements the counter by `n` (std::latch::count_down) and, if it
  // reaches zero, wakes every waiter. Release ordering: writes before
  // CountDown happen-before the return of Wait in any thread that sees the
  // latch open. Precondition (as std::latch): n <= the current count; a
  // larger n opens the latch (the count saturates at 0). n = 0 does
  // nothing.
  void CountDown(uint32_t n = 1);
  // True if the counter is zero (std::latch::try_wait). Acquire. Never
  // blocks.
  bool TryWait() const {
    return (word_.load(std::memory_order_acquire) & kCountMask) == 0;
  }
  // Blocks until the counter is zero (std::latch::wait).
  void Wait() const;
  // CountDown(n) then Wait() (std::latch::arrive_and_wait).
  void ArriveAndWait(uint32_t n = 1) {
    CountDown(n);
    Wait();
  }
  // The current count (a snapshot).
  uint32_t count() const {
    return word_.load(std::memory_order_relaxed) & kCountMask;
  }

  // std::latch spellings.
  void count_down(uint32_t n = 1) { CountDown(n); }
  bool try_wait() const { return TryWait(); }
  void wait() const { Wait(); }
  void arrive_and_wait(uint32_t n = 1) { ArriveAndWait(n); }
  static constexpr uint32_t max() { return kMax; }

 private:
  static constexpr uint32_t kWaiters = 0x80000000u;  // threads may be parked
  static constexpr uint32_t kCountMask = 0x7fffffffu;

  mutable std::atomic<uint32_t> word_;
};

}  // namespace parklot

#endif  // PARKLOT_CXX20

#endif  // PARKLOT_SYNC_LATCH_H_
