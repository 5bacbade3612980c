// The mutex algorithm on caller-provided words (MutexCore).
// Internal: not part of parklot's API; the public types are in
// sync/mutex.h (installed as <parklot/mutex.h>).
#ifndef PARKLOT_SYNC_MUTEX_CORE_H_
#define PARKLOT_SYNC_MUTEX_CORE_H_

#include <atomic>
#include <cstdint>

#include "runtime/deadline.h"
#include "runtime/parking_lot.h"
#include "runtime/thread_data.h"

namespace parklot::internal {

// The lock algorithm, on caller-provided words, so that the same code runs
// on a parklot::Mutex and in place inside a glibc pthread_mutex_t (the
// preload shim). Not for direct use by applications.
//
// The lock word: bit 0 locked, bit 1 threads may be parked on the word's
// address, bits 2..31 the owner's registry slot (0 while a handoff is in
// flight). `ema` holds the moving average of spin rounds acquisitions
// needed (runtime/spin.h). Zero-filled words are an unlocked mutex.
class MutexCore {
 public:
  static constexpr uint32_t kLocked = 1;
  // Threads may be parked on the word's address: an unlock must unpark.
  // Set by a waiter before it parks, cleared by the last one to leave.
  static constexpr uint32_t kWaitersParked = 2;
  // Unpark token telling a woken waiter that the lock was handed to it.
  static constexpr UnparkToken kHandoffToken = 1;

  static uint32_t OwnerWord(uint32_t slot) { return slot << 2 | kLocked; }
  static uint32_t OwnerOf(uint32_t word) { return word >> 2; }

  // Lock: one compare-and-swap when free. Returns false only if `deadline`
  // passed first.
  static bool Lock(std::atomic<uint32_t>* word, std::atomic<int32_t>* ema,
                   const Deadline& deadline = Deadline::Never()) {
    if (__builtin_expect(LockFast(word), 1)) return true;
    return LockSlow(word, ema, deadline);
  }

  // The uncontended attempt alone: one compare-and-swap from 0 (free, no
  // parked threads). Returns whether the caller now holds the lock.
  static bool LockFast(std::atomic<uint32_t>* word) {
    uint32_t expected = 0;
    return word->compare_exchange_weak(expected, OwnerWord(CurrentSlot()),
                                       std::memory_order_acquire,
                                       std::memory_order_relaxed);
  }

  // The contended path of Lock: spins while it can pay, then parks.
  // Returns false only if `deadline` passed first.
  static bool LockSlow(std::atomic<uint32_t>* word, std::atomic<int32_t>* ema,
                       const Deadline& deadline);

  // Takes the lock if it is free (barging past parked waiters, as
  // pthread_mutex_trylock does). Never blocks.
  static bool TryLock(std::atomic<uint32_t>* word);

  // Unlock: one compare-and-swap when no thread is parked. The caller must
  // hold the lock. After the word is released this touches only the
  // parking lot, never the mutex's memory (docs/design.md section 6, invariant
  // 2).
  static void Unlock(std::atomic<uint32_t>* word, bool force_fair = false) {
    uint32_t expected = OwnerWord(CurrentSlot());
    if (__builtin_expect(!force_fair && word->compare_exchange_weak(
                                            expected, 0,
                                            std::memory_order_release,
                                            std::memory_order_relaxed),
                         1)) {
      return;
    }
    UnlockSlow(word, force_fair);
  }

  // True if the calling thread holds the lock.
  static bool HeldByCurrentThread(const std::atomic<uint32_t>* word) {
    const uint32_t w = word->load(std::memory_order_relaxed);
    const ThreadData* td = CurrentThreadDataIfAny();
    return (w & kLocked) && td != nullptr && OwnerOf(w) == td->slot;
  }
  static bool IsLocked(const std::atomic<uint32_t>* word) {
    return word->load(std::memory_order_relaxed) & kLocked;
  }

  // For CondVar's wait morphing, with the word's bucket locked (inside an
  // UnparkRequeue validate/callback): mark that threads are parked on it.
  static void MarkWaitersParked(std::atomic<uint32_t>* word) {
    word->fetch_or(kWaitersParked, std::memory_order_relaxed);
  }
  // As MarkWaitersParked, but only if the lock is held, atomically: a thread
  // requeued onto an unlocked mutex would wait for an unlock that never
  // comes. Returns whether it marked.
  static bool MarkWaitersParkedIfLocked(std::atomic<uint32_t>* word) {
    uint32_t w = word->load(std::memory_order_relaxed);
    while (w & kLocked) {
      if (word->compare_exchange_weak(w, w | kWaitersParked,
                                      std::memory_order_relaxed,
                                      std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }

  // With the word's bucket locked (inside an unpark's callback), when no
  // thread is parked on it any more: clear the parked bit, as the last
  // waiter to leave by a timeout does.
  static void ClearWaitersParked(std::atomic<uint32_t>* word) {
    word->fetch_and(~kWaitersParked, std::memory_order_relaxed);
  }

  // After a park on `word` ended with kHandoffToken: record the caller as
  // the owner of the lock it was handed.
  static void TakeHandoff(std::atomic<uint32_t>* word);

 private:
  static void UnlockSlow(std::atomic<uint32_t>* word, bool force_fair);
};

}  // namespace parklot::internal

#endif  // PARKLOT_SYNC_MUTEX_CORE_H_
