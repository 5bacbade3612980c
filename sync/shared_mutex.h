// parklot::SharedMutex: a reader-writer lock on the parking lot.
//
// State: one 64-bit word (plus a 32-bit spin average), so that the same
// algorithm runs on a parklot::SharedMutex and in place inside a glibc
// pthread_rwlock_t (56 bytes) under the preload shim. Zero-filled memory is
// an unlocked lock of either kind (PTHREAD_RWLOCK_INITIALIZER is all zero).
//
// Two kinds (the lock's policy; fixed for the lifetime of a lock):
//
//  * kPreferWriter (the default): a writer that arrives while readers hold
//    the lock claims it at once ("pending writer"); from then on new readers
//    block, and the writer gets the lock as soon as the readers that were
//    inside leave. So a writer never starves behind a stream of readers.
//    Readers do not starve behind a stream of writers either: a writer's
//    unlock hands the lock directly to every reader parked at that moment
//    (phases alternate). A thread holding a read lock must not take another
//    read lock while a writer may be waiting: it would wait behind that
//    writer, which waits for it (deadlock). This is glibc's
//    PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP and std::shared_mutex's
//    usual behaviour.
//  * kPreferReader: readers get the lock whenever no writer holds it, even
//    while writers wait, so read locks may be taken recursively; writers can
//    starve under a continuous stream of readers. This is glibc's default
//    (PTHREAD_RWLOCK_PREFER_READER_NP, also what it does for
//    PTHREAD_RWLOCK_PREFER_WRITER_NP).
//
// Writers barge (whoever comes first after an unlock gets the lock), with
// eventual fairness: when the bucket's fairness timer has fired (mean
// PARKLOT_FAIR_NS, 0.5 ms) an unlock hands the lock directly to the parked
// writer it wakes. Waiters spin only while that can pay (runtime/spin.h's
// SpinWait: not on a parked exclusive owner, only a short probe when
// runnable threads outnumber CPUs, as long as recent waits needed), then
// park on the word's address (readers and writers waiting
// for the lock) or on address + 1 (a pending writer waiting for the readers
// inside to leave).
#ifndef PARKLOT_SYNC_SHARED_MUTEX_H_
#define PARKLOT_SYNC_SHARED_MUTEX_H_

#include "sync/requires_cxx20.h"  // first: one #error before C++20
#if PARKLOT_CXX20

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <type_traits>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "runtime/deadline.h"
#include "sync/chrono.h"
#include "sync/shared_mutex_core.h"

namespace parklot {

// A reader-writer lock in 16 bytes. Meets the C++ named requirements
// Lockable, TimedLockable, SharedLockable and SharedTimedLockable, so
// std::lock_guard, std::unique_lock, std::shared_lock and std::scoped_lock
// work with it. Not recursive for writers (relocking from the exclusive
// owner deadlocks; the shim checks and returns EDEADLK as glibc does);
// recursive read locks are allowed only with Kind::kPreferReader (see the
// file comment). Releasing a lock the caller does not hold is undefined, as
// for std::shared_mutex. All members are thread-safe.
class ABSL_LOCKABLE SharedMutex
    : public internal::StdTimedLockable<SharedMutex> {
 public:
  using Kind = internal::SharedMutexCore::Kind;

  constexpr SharedMutex() = default;
  explicit constexpr SharedMutex(Kind kind) : kind_(kind) {}
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  // --- Exclusive (writer) side ---

  // Blocks until the calling thread holds the lock exclusively.
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    internal::SharedMutexCore::Lock(&word_, &ema_, kind_);
  }
  // Takes the lock exclusively if no thread holds it in either mode and no
  // writer is pending; never blocks. Returns true on success, false if busy
  // (pthread_rwlock_trywrlock's EBUSY).
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    return internal::SharedMutexCore::TryLock(&word_) == 0;
  }
  // Blocks until the lock is held exclusively (true) or `deadline` passes
  // (false, pthread_rwlock_timedwrlock's ETIMEDOUT). The deadline's clock
  // is honoured: CLOCK_REALTIME follows clock jumps, CLOCK_MONOTONIC does
  // not. A past deadline still takes a free lock.
  bool LockUntil(Deadline deadline) ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    return internal::SharedMutexCore::Lock(&word_, &ema_, kind_, deadline) == 0;
  }
  // As LockUntil(now + timeout) on CLOCK_MONOTONIC. A zero or negative
  // timeout behaves as TryLock except that it may briefly spin.
  bool LockFor(absl::Duration timeout) ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    return LockUntil(Deadline::In(timeout));
  }
  // Releases the exclusive lock, which the caller must hold. Parked readers
  // get the lock directly; otherwise a parked writer is woken (and handed
  // the lock if the fairness timer fired).
  void Unlock() ABSL_UNLOCK_FUNCTION() { internal::SharedMutexCore::Unlock(&word_); }

  // --- Shared (reader) side ---

  // Blocks until the calling thread holds a shared lock: while a writer
  // holds the lock, and with kPreferWriter also while one is pending.
  // Aborts if kMaxReaders read locks are already held (unreachable in
  // practice; the shim returns EAGAIN instead).
  void LockShared() ABSL_SHARED_LOCK_FUNCTION();
  // Takes a shared lock if that needs no waiting; never blocks. False when
  // a writer holds the lock or is pending (EBUSY), or on reader overflow.
  bool TryLockShared() ABSL_SHARED_TRYLOCK_FUNCTION(true) {
    return internal::SharedMutexCore::TryLockShared(&word_) == 0;
  }
  // Blocks until a shared lock is held (true) or `deadline` passes (false,
  // pthread_rwlock_timedrdlock's ETIMEDOUT). Clock handling as LockUntil.
  bool LockSharedUntil(Deadline deadline) ABSL_SHARED_TRYLOCK_FUNCTION(true) {
    return internal::SharedMutexCore::LockShared(&word_, &ema_, deadline) == 0;
  }
  // As LockSharedUntil(now + timeout) on CLOCK_MONOTONIC.
  bool LockSharedFor(absl::Duration timeout)
      ABSL_SHARED_TRYLOCK_FUNCTION(true) {
    return LockSharedUntil(Deadline::In(timeout));
  }
  // Releases one shared lock, which the caller must hold. The last reader
  // out hands the lock to a pending writer.
  void UnlockShared() ABSL_UNLOCK_FUNCTION() {
    internal::SharedMutexCore::UnlockShared(&word_);
  }

  // --- Queries (snapshots; exact only for the caller's own holdings) ---

  Kind kind() const { return kind_; }
  // True if the calling thread holds the lock exclusively.
  bool HeldExclusivelyByCurrentThread() const {
    return internal::SharedMutexCore::HeldExclusivelyByCurrentThread(&word_);
  }
  // Read locks held now.
  uint64_t ReaderCount() const { return internal::SharedMutexCore::ReaderCount(&word_); }
  // Declares to the thread-safety analysis that the lock is held.
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}
  void AssertReaderHeld() const ABSL_ASSERT_SHARED_LOCK() {}

  // --- C++ standard library spellings (std::shared_timed_mutex) ---

  // lock, try_lock, unlock, try_lock_for and try_lock_until come from
  // internal::StdTimedLockable (sync/chrono.h), as for Mutex.
  void lock_shared() ABSL_SHARED_LOCK_FUNCTION() { LockShared(); }
  bool try_lock_shared() ABSL_SHARED_TRYLOCK_FUNCTION(true) {
    return TryLockShared();
  }
  void unlock_shared() ABSL_UNLOCK_FUNCTION() { UnlockShared(); }
  // Relative timeouts are measured on CLOCK_MONOTONIC (std::chrono's
  // steady_clock).
  template <class Rep, class Period>
  bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& d)
      ABSL_SHARED_TRYLOCK_FUNCTION(true) {
    return LockSharedUntil(internal::DeadlineAfter(d));
  }
  // Absolute timeouts: system_clock maps to CLOCK_REALTIME and steady_clock
  // to CLOCK_MONOTONIC exactly; any other clock is waited on in slices of
  // its own `t - Clock::now()` until it reaches `t`, as [thread.req.timing]
  // requires (internal::UntilClock, sync/chrono.h).
  template <class Clock, class Duration>
  bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration>& t)
      ABSL_SHARED_TRYLOCK_FUNCTION(true) {
    return internal::UntilClock(
        t, [this](Deadline d) { return LockSharedUntil(d); });
  }

  // For the shim and tests: the algorithm's words.
  std::atomic<uint64_t>* word() { return &word_; }

 private:
  std::atomic<uint64_t> word_{0};
  std::atomic<int32_t> ema_{0};
  Kind kind_ = Kind::kPreferWriter;
};

}  // namespace parklot

#endif  // PARKLOT_CXX20

#endif  // PARKLOT_SYNC_SHARED_MUTEX_H_
