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

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <type_traits>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "runtime/deadline.h"
#include "runtime/parking_lot.h"
#include "runtime/thread_data.h"
#include "sync/chrono.h"

namespace parklot {

// The reader-writer lock algorithm on caller-provided words, so that the
// same code runs on a parklot::SharedMutex and in place inside a glibc
// pthread_rwlock_t (the preload shim). Not for direct use by applications.
//
// `word`: bits 0 and 1 (both set or both clear) a writer holds the lock or
// is pending (waiting for the readers inside to leave), bit 2 threads may be
// parked on the word's address, bits 3..30 the number of read locks held,
// bit 32 the pending writer may be parked on address + 1, bits 40..63 the
// writer's registry slot (0 when no writer). The low 32 bits are where
// glibc keeps an rwlock's __readers and read as glibc's encoding of it
// (write phase and write-locked bits, readers counted from bit 3), so that
// debuggers and glibc's pretty printers read a shim-run rwlock's state
// right (docs/design.md section 5.17). `ema`: moving average of spin rounds
// (runtime/spin.h).
// Both zero-filled = unlocked. Functions return POSIX error numbers (0 on
// success) so that the shim can pass them through; the shim adds the
// misuse checks (EDEADLK, EPERM, EINVAL) around them.
//
// Every function is thread-safe. No function allocates heap memory. The
// unlock functions never touch `word` or `ema` after the point where
// another thread may acquire the lock (and then destroy and free it):
// DESIGN.md invariant 2.
class SharedMutexCore {
 public:
  enum class Kind : uint32_t {
    kPreferWriter = 0,  // see the file comment
    kPreferReader = 1,
    // As kPreferWriter, and readers wait for as long as a writer waits:
    // glibc's PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP (the shim's
    // kind for it). A writer blocked by a writer parks without spinning,
    // and the write unlock (Unlock with writers_first) hands the lock to a
    // parked writer ahead of parked readers, as glibc's hands over to a
    // waiting writer; readers can starve, as under glibc.
    kWritersFirst = 2,
  };

  // A writer holds the lock or is pending: glibc's write-phase and
  // write-locked bits, set and cleared together.
  static constexpr uint64_t kWriter = 3;
  // Readers or writers may be parked on the word's address (waiting to
  // acquire): an unlock must unpark.
  static constexpr uint64_t kWaitersParked = 4;
  static constexpr int kReaderShift = 3;
  static constexpr uint64_t kOneReader = uint64_t{1} << kReaderShift;
  // Read locks that may be held at once; one more is EAGAIN
  // (pthread_rwlock_rdlock's "maximum number of read locks exceeded").
  // glibc 2.36's limit (its reader count has 28 bits), so that the shim
  // says EAGAIN where glibc does.
  static constexpr uint64_t kMaxReaders = (uint64_t{1} << 28) - 1;
  static constexpr uint64_t kReaderMask = kMaxReaders << kReaderShift;
  // The pending writer is parked on address + 1, waiting for the readers
  // inside to leave: the last reader out must unpark it.
  static constexpr uint64_t kWriterParked = uint64_t{1} << 32;
  static constexpr int kOwnerShift = 40;
  static constexpr uint64_t kOwnerMask = uint64_t{0xffffff} << kOwnerShift;

  static uint64_t OwnerBits(uint32_t slot) {
    return uint64_t{slot} << kOwnerShift | kWriter;
  }
  static uint32_t OwnerOf(uint64_t w) {
    return static_cast<uint32_t>((w & kOwnerMask) >> kOwnerShift);
  }
  static uint64_t ReadersOf(uint64_t w) {
    return (w & kReaderMask) >> kReaderShift;
  }

  // Exclusive lock. Blocks until the caller holds the lock (0) or
  // `deadline` passes (ETIMEDOUT; the lock is unchanged). An expired
  // deadline still succeeds if the lock is free, as POSIX requires of
  // pthread_rwlock_timedwrlock. Uncontended: one compare-and-swap.
  static int Lock(std::atomic<uint64_t>* word, std::atomic<int32_t>* ema,
                  Kind kind, const Deadline& deadline = Deadline::Never()) {
    uint64_t expected = 0;
    if (__builtin_expect(
            word->compare_exchange_strong(expected, OwnerBits(CurrentSlot()),
                                          std::memory_order_acquire,
                                          std::memory_order_relaxed),
            1)) {
      return 0;
    }
    return LockSlow(word, ema, kind, deadline);
  }

  // Takes the exclusive lock if no thread holds it in any mode and no
  // writer is pending (barging past parked waiters, as
  // pthread_rwlock_trywrlock does). 0 or EBUSY. Never blocks.
  static int TryLock(std::atomic<uint64_t>* word);

  // Releases the exclusive lock, which the caller must hold. Uncontended:
  // one compare-and-swap. `writers_first` (glibc's
  // PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP, a kPreferWriter lock):
  // a parked writer is handed the lock ahead of parked readers, so readers
  // keep waiting while a writer waits, as glibc's write unlock hands over
  // to a waiting writer; otherwise parked readers get it first (phases
  // alternate, kPreferWriter's default).
  static void Unlock(std::atomic<uint64_t>* word, bool writers_first = false) {
    uint64_t expected = OwnerBits(CurrentSlot());
    if (__builtin_expect(
            word->compare_exchange_strong(expected, 0,
                                          std::memory_order_release,
                                          std::memory_order_relaxed),
            1)) {
      return;
    }
    UnlockSlow(word, writers_first);
  }

  // Shared lock. Blocks while a writer holds the lock or is pending. 0,
  // ETIMEDOUT (deadline passed first; an expired deadline still succeeds if
  // no writer is in the way), or EAGAIN (kMaxReaders read locks are held).
  // Uncontended: one compare-and-swap.
  static int LockShared(std::atomic<uint64_t>* word, std::atomic<int32_t>* ema,
                        const Deadline& deadline = Deadline::Never()) {
    uint64_t w = word->load(std::memory_order_relaxed);
    if (__builtin_expect(!(w & kWriter) && ReadersOf(w) < kMaxReaders, 1) &&
        word->compare_exchange_strong(w, w + kOneReader,
                                      std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
      return 0;
    }
    return LockSharedSlow(word, ema, deadline);
  }

  // Takes a shared lock unless a writer holds the lock or is pending
  // (pthread_rwlock_tryrdlock). 0, EBUSY, or EAGAIN (too many readers).
  // Never blocks.
  static int TryLockShared(std::atomic<uint64_t>* word);

  // Releases one shared lock, which the caller must hold. Uncontended: one
  // compare-and-swap.
  static void UnlockShared(std::atomic<uint64_t>* word) {
    uint64_t w = word->load(std::memory_order_relaxed);
    if (__builtin_expect(ReadersOf(w) > 1 ||
                             (w & (kWaitersParked | kWriterParked)) == 0,
                         1) &&
        word->compare_exchange_strong(w, w - kOneReader,
                                      std::memory_order_release,
                                      std::memory_order_relaxed)) {
      return;
    }
    UnlockSharedSlow(word);
  }

  // Releases whichever lock the caller holds (pthread_rwlock_unlock): the
  // exclusive one if the word names the caller as the writer, else a shared
  // one.
  static void UnlockAny(std::atomic<uint64_t>* word,
                        bool writers_first = false) {
    if (HeldExclusivelyByCurrentThread(word)) {
      Unlock(word, writers_first);
    } else {
      UnlockShared(word);
    }
  }

  // True if the calling thread holds the exclusive lock (for the shim's
  // EDEADLK checks; a relaxed read, exact for the caller's own state).
  static bool HeldExclusivelyByCurrentThread(const std::atomic<uint64_t>* word) {
    const uint64_t w = word->load(std::memory_order_relaxed);
    const ThreadData* td = CurrentThreadDataIfAny();
    return (w & kWriter) && ReadersOf(w) == 0 && td != nullptr &&
           OwnerOf(w) == td->slot;
  }
  // A snapshot of the read locks held (racy unless the caller excludes
  // changes).
  static uint64_t ReaderCount(const std::atomic<uint64_t>* word) {
    return ReadersOf(word->load(std::memory_order_relaxed));
  }
  // A snapshot: a writer holds the lock or is pending.
  static bool WriterActive(const std::atomic<uint64_t>* word) {
    return word->load(std::memory_order_relaxed) & kWriter;
  }

 private:
  static int LockSlow(std::atomic<uint64_t>* word, std::atomic<int32_t>* ema,
                      Kind kind, const Deadline& deadline);
  static int LockSharedSlow(std::atomic<uint64_t>* word,
                            std::atomic<int32_t>* ema,
                            const Deadline& deadline);
  static void UnlockSlow(std::atomic<uint64_t>* word, bool writers_first);
  static void UnlockSharedSlow(std::atomic<uint64_t>* word);
  static int WaitForReaders(std::atomic<uint64_t>* word,
                            std::atomic<int32_t>* ema, uint32_t self,
                            const Deadline& deadline);
  static bool ReleaseAndWake(std::atomic<uint64_t>* word, uint64_t release,
                             bool readers_handoff = true);
  static bool ReleaseToWriter(std::atomic<uint64_t>* word, uint64_t release);
  static bool UnlockSharedToPendingWriter(std::atomic<uint64_t>* word);
};

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
  using Kind = SharedMutexCore::Kind;

  constexpr SharedMutex() = default;
  explicit constexpr SharedMutex(Kind kind) : kind_(kind) {}
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  // --- Exclusive (writer) side ---

  // Blocks until the calling thread holds the lock exclusively.
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    SharedMutexCore::Lock(&word_, &ema_, kind_);
  }
  // Takes the lock exclusively if no thread holds it in either mode and no
  // writer is pending; never blocks. Returns true on success, false if busy
  // (pthread_rwlock_trywrlock's EBUSY).
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    return SharedMutexCore::TryLock(&word_) == 0;
  }
  // Blocks until the lock is held exclusively (true) or `deadline` passes
  // (false, pthread_rwlock_timedwrlock's ETIMEDOUT). The deadline's clock
  // is honoured: CLOCK_REALTIME follows clock jumps, CLOCK_MONOTONIC does
  // not. A past deadline still takes a free lock.
  bool LockUntil(Deadline deadline) ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    return SharedMutexCore::Lock(&word_, &ema_, kind_, deadline) == 0;
  }
  // As LockUntil(now + timeout) on CLOCK_MONOTONIC. A zero or negative
  // timeout behaves as TryLock except that it may briefly spin.
  bool LockFor(absl::Duration timeout) ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    return LockUntil(Deadline::In(timeout));
  }
  // Releases the exclusive lock, which the caller must hold. Parked readers
  // get the lock directly; otherwise a parked writer is woken (and handed
  // the lock if the fairness timer fired).
  void Unlock() ABSL_UNLOCK_FUNCTION() { SharedMutexCore::Unlock(&word_); }

  // --- Shared (reader) side ---

  // Blocks until the calling thread holds a shared lock: while a writer
  // holds the lock, and with kPreferWriter also while one is pending.
  // Aborts if kMaxReaders read locks are already held (unreachable in
  // practice; the shim returns EAGAIN instead).
  void LockShared() ABSL_SHARED_LOCK_FUNCTION();
  // Takes a shared lock if that needs no waiting; never blocks. False when
  // a writer holds the lock or is pending (EBUSY), or on reader overflow.
  bool TryLockShared() ABSL_SHARED_TRYLOCK_FUNCTION(true) {
    return SharedMutexCore::TryLockShared(&word_) == 0;
  }
  // Blocks until a shared lock is held (true) or `deadline` passes (false,
  // pthread_rwlock_timedrdlock's ETIMEDOUT). Clock handling as LockUntil.
  bool LockSharedUntil(Deadline deadline) ABSL_SHARED_TRYLOCK_FUNCTION(true) {
    return SharedMutexCore::LockShared(&word_, &ema_, deadline) == 0;
  }
  // As LockSharedUntil(now + timeout) on CLOCK_MONOTONIC.
  bool LockSharedFor(absl::Duration timeout)
      ABSL_SHARED_TRYLOCK_FUNCTION(true) {
    return LockSharedUntil(Deadline::In(timeout));
  }
  // Releases one shared lock, which the caller must hold. The last reader
  // out hands the lock to a pending writer.
  void UnlockShared() ABSL_UNLOCK_FUNCTION() {
    SharedMutexCore::UnlockShared(&word_);
  }

  // --- Queries (snapshots; exact only for the caller's own holdings) ---

  Kind kind() const { return kind_; }
  // True if the calling thread holds the lock exclusively.
  bool HeldExclusivelyByCurrentThread() const {
    return SharedMutexCore::HeldExclusivelyByCurrentThread(&word_);
  }
  // Read locks held now.
  uint64_t ReaderCount() const { return SharedMutexCore::ReaderCount(&word_); }
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

#endif  // PARKLOT_SYNC_SHARED_MUTEX_H_
