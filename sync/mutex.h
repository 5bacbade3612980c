// parklot::Mutex and its recursive and error-checking kinds.
//
// A barging lock with eventual fairness (WebKit's and Rust's parking_lot
// design): unlock releases the lock for whoever grabs it first, except when
// the bucket's fairness timer (mean PARKLOT_FAIR_NS, 0.5 ms) has fired, when
// it hands the lock directly to the thread it wakes, so no waiter starves.
// Waiters spin only while the owner runs (runtime/spin.h's SpinWait; a
// short probe when runnable threads outnumber CPUs), then park on the
// lock's address.
#ifndef PARKLOT_SYNC_MUTEX_H_
#define PARKLOT_SYNC_MUTEX_H_

#include "sync/requires_cxx20.h"  // first: one #error before C++20
#if PARKLOT_CXX20

#include <errno.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <system_error>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "runtime/deadline.h"
#include "sync/chrono.h"
#include "sync/mutex_core.h"

namespace parklot {

// A mutual-exclusion lock in 12 bytes: its word, its spin average and its
// holder. Meets Lockable and TimedLockable, so
// std::lock_guard, std::unique_lock and std::scoped_lock work.
// Not recursive: relocking from the owner deadlocks (use RecursiveMutex or
// ErrorCheckingMutex). Unlocking a mutex the caller does not hold is
// undefined, as for std::mutex. All members are thread-safe.
// The standard library spellings (lock, try_lock, unlock, try_lock_for,
// try_lock_until: Lockable and TimedLockable, as std::timed_mutex) come from
// internal::StdTimedLockable (sync/chrono.h).
class ABSL_LOCKABLE Mutex : public internal::StdTimedLockable<Mutex> {
 public:
  constexpr Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  // Blocks until the calling thread holds the lock.
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { internal::MutexCore::Lock(&word_, &meta_); }
  // Takes the lock if free; never blocks. Returns true on success.
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    return internal::MutexCore::TryLock(&word_, &meta_);
  }
  // Blocks until the lock is held (true) or `deadline` passes (false).
  // The deadline's clock is honoured (CLOCK_REALTIME follows clock jumps).
  bool LockUntil(Deadline deadline) ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    return internal::MutexCore::Lock(&word_, &meta_, deadline);
  }
  // As LockUntil(now + timeout) on CLOCK_MONOTONIC.
  bool LockFor(absl::Duration timeout) ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    return LockUntil(Deadline::In(timeout));
  }
  // Releases the lock (barging: the woken waiter competes with newcomers,
  // unless the fairness timer fired).
  void Unlock() ABSL_UNLOCK_FUNCTION() { internal::MutexCore::Unlock(&word_, &meta_); }
  // Releases the lock directly to the longest-parked waiter, if any.
  void UnlockFair() ABSL_UNLOCK_FUNCTION() { internal::MutexCore::Unlock(&word_, &meta_, true); }

  // True if the calling thread holds the lock.
  bool HeldByCurrentThread() const {
    return internal::MutexCore::HeldByCurrentThread(&word_, &meta_);
  }
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK();

 private:
  friend class CondVar;
  std::atomic<uint32_t> word_{0};
  internal::MutexMeta meta_;
};

// A mutex its owner may lock again; it is released after as many unlocks
// as locks (PTHREAD_MUTEX_RECURSIVE). Thread-safe.
// The standard library spellings are std::recursive_timed_mutex's
// (internal::StdTimedLockable, sync/chrono.h).
class ABSL_LOCKABLE RecursiveMutex
    : public internal::StdTimedLockable<RecursiveMutex> {
 public:
  constexpr RecursiveMutex() = default;
  RecursiveMutex(const RecursiveMutex&) = delete;
  RecursiveMutex& operator=(const RecursiveMutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION();
  // Returns false if another thread holds it.
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true);
  // Returns false if `deadline` passed first.
  bool LockUntil(Deadline deadline) ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true);
  // As LockUntil(now + timeout) on CLOCK_MONOTONIC.
  bool LockFor(absl::Duration timeout) ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    return LockUntil(Deadline::In(timeout));
  }
  // Releases one level. Returns EPERM (and changes nothing) if the caller
  // does not hold it, else 0.
  int Unlock() ABSL_UNLOCK_FUNCTION();
  bool HeldByCurrentThread() const { return mu_.HeldByCurrentThread(); }
  // Lock depth held by the caller (0 if it does not hold it).
  uint32_t depth() const { return HeldByCurrentThread() ? count_ : 0; }

 private:
  Mutex mu_;
  uint32_t count_ = 0;  // written by the owner only
};

// A mutex that reports misuse with POSIX error codes instead of deadlocking
// (PTHREAD_MUTEX_ERRORCHECK): Lock returns EDEADLK if the caller already
// holds it; Unlock returns EPERM if the caller does not hold it.
class ABSL_LOCKABLE ErrorCheckingMutex {
 public:
  constexpr ErrorCheckingMutex() = default;
  ErrorCheckingMutex(const ErrorCheckingMutex&) = delete;
  ErrorCheckingMutex& operator=(const ErrorCheckingMutex&) = delete;

  // 0, or EDEADLK if the caller holds it.
  int Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION();
  // 0, EDEADLK if the caller holds it, ETIMEDOUT if `deadline` passed.
  int LockUntil(Deadline deadline) ABSL_EXCLUSIVE_LOCK_FUNCTION();
  // As LockUntil(now + timeout) on CLOCK_MONOTONIC.
  int LockFor(absl::Duration timeout) ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    return LockUntil(Deadline::In(timeout));
  }
  // Returns false if held by anyone (including the caller).
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.TryLock(); }
  // 0, or EPERM if the caller does not hold it (nothing changes).
  int Unlock() ABSL_UNLOCK_FUNCTION();
  bool HeldByCurrentThread() const { return mu_.HeldByCurrentThread(); }

  // Standard library spellings (Lockable, TimedLockable), timed as
  // std::timed_mutex's (sync/chrono.h). Misuse throws std::system_error, as
  // std::mutex may: lock() and the timed forms with EDEADLK
  // (resource_deadlock_would_occur) if the caller holds it, unlock() with
  // EPERM (operation_not_permitted) if it does not.
  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { ThrowIfError(Lock()); }
  bool try_lock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return TryLock(); }
  void unlock() ABSL_UNLOCK_FUNCTION() { ThrowIfError(Unlock()); }
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d)
      ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    return LockOrThrow(internal::DeadlineAfter(d));
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& t)
      ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    return internal::UntilClock(t,
                                [this](Deadline d) { return LockOrThrow(d); });
  }

 private:
  // LockUntil for the timed spellings: false on timeout, EDEADLK thrown.
  bool LockOrThrow(Deadline deadline) ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    const int e = LockUntil(deadline);
    if (e == ETIMEDOUT) return false;
    ThrowIfError(e);
    return true;
  }
  static void ThrowIfError(int e) {
    if (e != 0) {
      throw std::system_error(e, std::generic_category(),
                              "parklot::ErrorCheckingMutex");
    }
  }

  Mutex mu_;
};

}  // namespace parklot

#endif  // PARKLOT_CXX20

#endif  // PARKLOT_SYNC_MUTEX_H_
