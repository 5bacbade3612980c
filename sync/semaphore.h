// parklot::Semaphore: a counting semaphore (POSIX sem_t semantics, also
// std::counting_semaphore's) in 16 bytes, so it fits in place inside a
// glibc sem_t (32 bytes) under the preload shim.
//
// The word holds the value (low 32 bits) and the number of threads
// registered as waiters (high 32 bits), so that Release learns whether to
// wake anyone from the same atomic operation that publishes the new value:
// it never has to read the semaphore again afterwards. That is what lets a
// waiter destroy and free the semaphore as soon as it returns, even while
// the poster is still inside Release (docs/design.md section 6, invariant 2;
// glibc bug 12674 was this bug in sem_post).
//
// Barging with eventual fairness: a released unit goes to whoever takes it
// first, except that when the bucket's fairness timer has fired (mean
// PARKLOT_FAIR_NS) Release hands units directly to the threads it wakes.
#ifndef PARKLOT_SYNC_SEMAPHORE_H_
#define PARKLOT_SYNC_SEMAPHORE_H_

#include "sync/requires_cxx20.h"  // first: one #error before C++20
#if PARKLOT_CXX20

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "absl/time/time.h"
#include "runtime/deadline.h"
#include "sync/chrono.h"

namespace parklot {

// Every member is thread-safe. No heap allocation. Waiters spin briefly
// only while spinning can pay (runtime/spin.h's SpinWait, with no owner to
// watch), then park on the semaphore's address.
class Semaphore {
 public:
  // SEM_VALUE_MAX on Linux.
  static constexpr uint32_t kMaxValue = 0x7fffffff;

  // A semaphore with `initial` units. Precondition: initial <= kMaxValue
  // (the shim's sem_init returns EINVAL otherwise); larger values are
  // clamped.
  explicit constexpr Semaphore(uint32_t initial = 0)
      : word_(initial <= kMaxValue ? initial : kMaxValue) {}
  Semaphore(const Semaphore&) = delete;
  Semaphore& operator=(const Semaphore&) = delete;

  // Takes one unit, blocking while the value is 0 (sem_wait, acquire()).
  // Acquire ordering: what the releaser did before Release happens-before
  // the return. Uncontended: one compare-and-swap.
  void Acquire() {
    if (!FastAcquire()) AcquireSlowOk(Deadline::Never());
  }
  // Takes one unit if the value is positive; never blocks. Returns false
  // if it was 0 (sem_trywait's EAGAIN; try_acquire()).
  bool TryAcquire();
  // Takes one unit, blocking until the value is positive (true) or
  // `deadline` passes (false: sem_timedwait/sem_clockwait's ETIMEDOUT).
  // The deadline's clock is honoured (CLOCK_REALTIME follows clock jumps).
  // A past deadline still takes an available unit.
  bool AcquireUntil(Deadline deadline) {
    return FastAcquire() || AcquireSlowOk(deadline);
  }

  // sem_wait's and sem_timedwait's full contract, for the preload shim:
  // returns 0 (took a unit), ETIMEDOUT, or EINTR when a signal handler
  // interrupted the wait under the kernel's futex restart rules (only
  // within an InterruptiblePark scope: an untimed wait is restarted after
  // an SA_RESTART handler, a timed one is not). A thread cancelled while
  // waiting (within a CancellationPoint) leaves no trace: its registration
  // is withdrawn and a unit handed to it is passed on.
  int AcquireOrInterrupt(Deadline deadline);
  // As AcquireUntil(now + timeout) on CLOCK_MONOTONIC.
  bool AcquireFor(absl::Duration timeout) {
    return AcquireUntil(Deadline::In(timeout));
  }
  // Adds `n` units and wakes up to `n` waiters (sem_post for n = 1,
  // release(n)). Returns false and changes nothing if the value would
  // exceed kMaxValue (sem_post's EOVERFLOW). Release ordering. After the
  // units are published this touches only the parking lot, never the
  // semaphore (a woken waiter may already have destroyed it).
  // Async-signal-safe, as POSIX makes sem_post: from a handler (or a thread
  // that never used the lot) it wakes through UnparkUpTo, without fair
  // handoff.
  bool Release(uint32_t n = 1);

  // The current value (sem_getvalue; never negative). A snapshot.
  uint32_t value() const {
    return static_cast<uint32_t>(word_.load(std::memory_order_relaxed));
  }
  // Threads registered as waiting now (a snapshot, for tests and stats).
  uint32_t waiters() const {
    return static_cast<uint32_t>(word_.load(std::memory_order_relaxed) >> 32);
  }

  // C++20 std::counting_semaphore spellings; the timed ones wait as
  // libstdc++'s do: relative timeouts on steady_clock, time points on their
  // own clock (sync/chrono.h).
  // The largest value (kMaxValue), as std::counting_semaphore::max().
  static constexpr ptrdiff_t max() { return kMaxValue; }
  void acquire() { Acquire(); }
  bool try_acquire() { return TryAcquire(); }
  void release(uint32_t n = 1) { Release(n); }
  template <class Rep, class Period>
  bool try_acquire_for(const std::chrono::duration<Rep, Period>& d) {
    return AcquireUntil(internal::DeadlineAfter(d));
  }
  template <class Clock, class Duration>
  bool try_acquire_until(const std::chrono::time_point<Clock, Duration>& t) {
    return internal::UntilClock(
        t, [this](Deadline d) { return AcquireUntil(d); });
  }

  // The state word, for the shim and tests.
  std::atomic<uint64_t>* word() { return &word_; }

 private:
  static constexpr uint64_t kOneWaiter = uint64_t{1} << 32;
  static uint32_t ValueOf(uint64_t w) { return static_cast<uint32_t>(w); }
  static uint32_t WaitersOf(uint64_t w) {
    return static_cast<uint32_t>(w >> 32);
  }

  bool FastAcquire() {
    uint64_t w = word_.load(std::memory_order_relaxed);
    return ValueOf(w) != 0 &&
           word_.compare_exchange_strong(w, w - 1, std::memory_order_acquire,
                                         std::memory_order_relaxed);
  }
  // 0, ETIMEDOUT, or (only inside an InterruptiblePark scope) EINTR.
  int AcquireSlow(const Deadline& deadline);
  bool AcquireSlowOk(const Deadline& deadline) {
    return AcquireSlow(deadline) == 0;
  }

  std::atomic<uint64_t> word_;
  std::atomic<int32_t> ema_{0};
};

}  // namespace parklot

#endif  // PARKLOT_CXX20

#endif  // PARKLOT_SYNC_SEMAPHORE_H_
