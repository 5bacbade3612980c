// std::chrono time for parklot's primitives: how every try_*_for,
// try_*_until, wait_for and wait_until spelling (sync/*.h) turns a
// std::chrono duration or time point into a Deadline, so that each behaves
// as the std type it stands in for (std::timed_mutex,
// std::shared_timed_mutex, std::counting_semaphore,
// std::condition_variable) does in libstdc++. One place for all of them.
#ifndef PARKLOT_SYNC_CHRONO_H_
#define PARKLOT_SYNC_CHRONO_H_

#include <chrono>
#include <cstdint>
#include <type_traits>

#include "runtime/deadline.h"

namespace parklot::internal {

// `d` in nanoseconds, rounded up to a whole nanosecond (a timed wait never
// ends early for want of precision). Beyond what int64 nanoseconds hold
// (about 292 years) it saturates to Deadline::kNever or INT64_MIN, so
// duration::max() and time_point::max() of any period mean "no deadline"
// instead of overflowing into the past. Any arithmetic Rep.
template <class Rep, class Period>
int64_t FromChronoDuration(const std::chrono::duration<Rep, Period>& d) {
  // 9e9 s is just inside int64 nanoseconds (9.22e9 s).
  constexpr double kLimitSeconds = 9e9;
  const double seconds = std::chrono::duration<double>(d).count();
  if (seconds >= kLimitSeconds) return Deadline::kNever;
  if (seconds <= -kLimitSeconds) return INT64_MIN;
  return std::chrono::ceil<std::chrono::nanoseconds>(d).count();
}

// `d` from now on CLOCK_MONOTONIC: the relative timeouts (try_lock_for,
// try_acquire_for, wait_for), which the standard measures on steady_clock.
template <class Rep, class Period>
Deadline DeadlineAfter(const std::chrono::duration<Rep, Period>& d) {
  return Deadline::InNanos(FromChronoDuration(d));
}

// Runs `attempt(Deadline) -> bool` (true: done, false: its deadline passed)
// against the time point `t` on Clock, as libstdc++'s timed mutexes do:
// system_clock is CLOCK_REALTIME (the wait follows clock changes) and
// steady_clock is CLOCK_MONOTONIC, each one attempt on the exact deadline;
// any other clock is waited on in slices of its own `t - Clock::now()`,
// again until it reads `t` or later ([thread.req.timing]: a clock that runs
// slower than steady_clock does not end the wait early). Returns false only
// once `t` has passed on Clock. A past `t` still makes one attempt (which
// succeeds if it needs no waiting).
template <class Clock, class Duration, class F>
bool UntilClock(const std::chrono::time_point<Clock, Duration>& t, F attempt) {
  if constexpr (std::is_same_v<Clock, std::chrono::system_clock>) {
    // C++20: system_clock's epoch is the Unix epoch.
    const int64_t ns = FromChronoDuration(t.time_since_epoch());
    return attempt(ns == Deadline::kNever ? Deadline::Never()
                                          : Deadline::RealtimeAt(ns));
  } else if constexpr (std::is_same_v<Clock, std::chrono::steady_clock>) {
    // libstdc++'s steady_clock reads CLOCK_MONOTONIC, which is Deadline's
    // monotonic encoding (time since boot from the epoch).
    const int64_t ns = FromChronoDuration(t.time_since_epoch());
    return attempt(ns == Deadline::kNever ? Deadline::Never()
                                          : Deadline::MonotonicAt(ns));
  } else {
    for (;;) {
      if (attempt(DeadlineAfter(t - Clock::now()))) return true;
      if (Clock::now() >= t) return false;
    }
  }
}

// The standard library spellings (Lockable, TimedLockable: lock, try_lock,
// unlock, try_lock_for, try_lock_until) of a parklot lock `Derived` that
// has Lock(), TryLock() -> bool, Unlock() and LockUntil(Deadline) -> bool
// (false: the deadline passed). Timed as std::timed_mutex's: relative
// timeouts on steady_clock (DeadlineAfter), time points on their own clock
// (UntilClock). Derive as `class M : public StdTimedLockable<M>` (CRTP; no
// data, so it changes neither size nor layout); thread-safety is Derived's.
template <class Derived>
class StdTimedLockable {
 public:
  void lock() { self().Lock(); }
  bool try_lock() { return self().TryLock(); }
  void unlock() { self().Unlock(); }
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return self().LockUntil(DeadlineAfter(d));
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& t) {
    return UntilClock(t, [this](Deadline d) { return self().LockUntil(d); });
  }

 private:
  Derived& self() { return static_cast<Derived&>(*this); }
};

}  // namespace parklot::internal

#endif  // PARKLOT_SYNC_CHRONO_H_
