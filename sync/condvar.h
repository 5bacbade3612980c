// parklot::CondVar: a condition variable with wait morphing.
//
// NotifyAll does not wake every waiter only for all but one to block on the
// mutex again: it wakes at most one and requeues the rest onto the mutex's
// parking-lot key (the "thundering herd" fix of Linux's FUTEX_CMP_REQUEUE,
// done in user space), so each is woken by a mutex unlock, one at a time.
// A crowd (more than 32 waiters) is requeued tagged instead, and the first
// of it that an unlock wakes wakes the rest at once (a wake tree), so that
// they pass the mutex one after another without a wake-up per waiter; with
// the mutex free, a crowd is woken at once (docs/design.md section 4, CondVar).
// The mutex is recorded per wait, so one CondVar may be used with different
// mutexes over time. Waiting with two different mutexes at the same time is
// undefined by POSIX; here it works, without requeueing, until the waiters
// drain.
#ifndef PARKLOT_SYNC_CONDVAR_H_
#define PARKLOT_SYNC_CONDVAR_H_

#include "sync/requires_cxx20.h"  // first: one #error before C++20
#if PARKLOT_CXX20

#include <atomic>
#include <chrono>
#include <cstdint>
#include <condition_variable>
#include <mutex>

#include "absl/time/time.h"
#include "runtime/deadline.h"
#include "sync/chrono.h"
#include "sync/condvar_core.h"
#include "sync/mutex.h"

namespace parklot {

// A condition variable for parklot::Mutex. All members are thread-safe.
// Destroying it while threads wait is undefined (as for std); destroying it
// right after the last waiter returned is fine.
class CondVar {
 public:
  constexpr CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Releases `mu` (held by the caller), waits for a notification, re-locks
  // `mu` before returning. May return spuriously: wait in a loop on the
  // predicate.
  void Wait(Mutex& mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    internal::CondVarCore::Wait(&state_, &mu.word_, &mu.meta_, Deadline::Never());
  }
  // As Wait, until `deadline` (either clock). Returns false on timeout; the
  // mutex is held again in every case.
  bool WaitUntil(Mutex& mu, Deadline deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return internal::CondVarCore::Wait(&state_, &mu.word_, &mu.meta_, deadline);
  }
  // As WaitUntil(now + timeout) on CLOCK_MONOTONIC.
  bool WaitFor(Mutex& mu, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return WaitUntil(mu, Deadline::In(timeout));
  }
  // Waits until `pred()` holds (checked under `mu`).
  template <typename Predicate>
  void Wait(Mutex& mu, Predicate pred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    while (!pred()) Wait(mu);
  }

  // Any BasicLockable (std::unique_lock<L>, std::mutex, ...), held by the
  // caller: released by one unlock() after the thread is queued, re-taken
  // by one lock() on every way out (notification, timeout, spurious
  // wake-up). No requeue. A RecursiveMutex held n times is thus held n
  // times again after the wait, and stays held through it if n > 1 (as
  // glibc's pthread_cond_wait treats a recursive mutex). Returns false on
  // timeout. If unlock() or lock() throws, std::terminate is called (as
  // std::condition_variable_any does when it cannot re-lock): a wait left
  // by an exception would leave the thread queued.
  template <typename Lock>
  bool WaitAnyUntil(Lock& lock, Deadline deadline) {
    return internal::CondVarCore::WaitAny(
        &state_, [&lock]() noexcept { lock.unlock(); },
        [&lock]() noexcept { lock.lock(); }, deadline);
  }
  template <typename Lock>
  void WaitAny(Lock& lock) {
    WaitAnyUntil(lock, Deadline::Never());
  }

  // Wakes one waiter (or moves it onto its locked mutex). Returns whether
  // there was one.
  bool NotifyOne() { return internal::CondVarCore::NotifyOne(&state_); }
  // Wakes all waiters: at most one is woken now, the rest requeued onto
  // the mutex (a crowd of more than 32: see internal::CondVarCore::NotifyAll).
  // Returns the number notified.
  size_t NotifyAll() { return internal::CondVarCore::NotifyAll(&state_); }

  // Standard library spellings, for std::unique_lock<parklot::Mutex>.
  void wait(std::unique_lock<Mutex>& lock) { Wait(*lock.mutex()); }
  template <typename Predicate>
  void wait(std::unique_lock<Mutex>& lock, Predicate pred) {
    Wait(*lock.mutex(), pred);
  }
  // The timed waits, as std::condition_variable's: relative timeouts on
  // steady_clock; time points on their own clock, a timeout reported only
  // once that clock reads `t` (sync/chrono.h). no_timeout may be spurious.
  template <class Rep, class Period>
  std::cv_status wait_for(std::unique_lock<Mutex>& lock,
                          const std::chrono::duration<Rep, Period>& d) {
    return WaitUntil(*lock.mutex(), internal::DeadlineAfter(d))
               ? std::cv_status::no_timeout
               : std::cv_status::timeout;
  }
  // Waits until `pred()` or the timeout; returns pred() (std's contract).
  template <class Rep, class Period, typename Predicate>
  bool wait_for(std::unique_lock<Mutex>& lock,
                const std::chrono::duration<Rep, Period>& d, Predicate pred) {
    const Deadline deadline = internal::DeadlineAfter(d);
    while (!pred()) {
      if (!WaitUntil(*lock.mutex(), deadline)) return pred();
    }
    return true;
  }
  template <class Clock, class Duration>
  std::cv_status wait_until(std::unique_lock<Mutex>& lock,
                            const std::chrono::time_point<Clock, Duration>& t) {
    return internal::UntilClock(t,
                                [this, &lock](Deadline d) {
                                  return WaitUntil(*lock.mutex(), d);
                                })
               ? std::cv_status::no_timeout
               : std::cv_status::timeout;
  }
  // Waits until `pred()` or `t`; returns pred() (std's contract).
  template <class Clock, class Duration, typename Predicate>
  bool wait_until(std::unique_lock<Mutex>& lock,
                  const std::chrono::time_point<Clock, Duration>& t,
                  Predicate pred) {
    while (!pred()) {
      if (wait_until(lock, t) == std::cv_status::timeout) return pred();
    }
    return true;
  }
  void notify_one() { NotifyOne(); }
  void notify_all() { NotifyAll(); }

 private:
  std::atomic<uintptr_t> state_{internal::CondVarCore::kNoWaiters};
};

}  // namespace parklot

#endif  // PARKLOT_CXX20

#endif  // PARKLOT_SYNC_CONDVAR_H_
