// The reader-writer lock algorithm on caller-provided words
// (SharedMutexCore). Internal: not part of parklot's API; the public type
// and its policy are in sync/shared_mutex.h (installed as
// <parklot/shared_mutex.h>).
#ifndef PARKLOT_SYNC_SHARED_MUTEX_CORE_H_
#define PARKLOT_SYNC_SHARED_MUTEX_CORE_H_

#include <atomic>
#include <cerrno>
#include <cstdint>

#include "runtime/deadline.h"
#include "runtime/parking_lot.h"
#include "runtime/thread_data.h"

namespace parklot::internal {

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
// docs/design.md section 6, invariant 2.
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

}  // namespace parklot::internal

#endif  // PARKLOT_SYNC_SHARED_MUTEX_CORE_H_
