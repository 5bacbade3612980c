#include "sync/mutex.h"

#include <errno.h>

#include "absl/base/internal/raw_logging.h"
#include "runtime/spin.h"
#include "runtime/thread_data.h"

namespace parklot {

bool MutexCore::TryLock(std::atomic<uint32_t>* word) {
  uint32_t w = word->load(std::memory_order_relaxed);
  while (!(w & kLocked)) {
    if (word->compare_exchange_weak(
            w, (w & (kWaitersParked | kWokenMask)) | OwnerWord(CurrentSlot()),
            std::memory_order_acquire, std::memory_order_relaxed)) {
      return true;
    }
  }
  return false;
}

void MutexCore::TakeHandoff(std::atomic<uint32_t>* word) {
  // The unlocker left the word locked with no owner; only the parked bit
  // may change under us (other waiters setting it).
  const uint32_t me = OwnerWord(CurrentSlot());
  uint32_t w = word->load(std::memory_order_relaxed);
  while (!word->compare_exchange_weak(w, (w & (kWaitersParked | kWokenMask)) | me,
                                      std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
  }
}

bool MutexCore::LockSlow(std::atomic<uint32_t>* word, std::atomic<int32_t>* ema,
                         const Deadline& deadline, bool woken) {
  const uint32_t me = OwnerWord(CurrentSlot());
  SpinWait spin(ema);
  if (woken) spin.Woken();
  for (;;) {
    // A woken waiter takes itself off the woken count as it acquires or
    // parks again.
    const uint32_t mine = woken ? kWokenOne : 0;
    uint32_t w = word->load(std::memory_order_relaxed);
    if (!(w & kLocked)) {
      if (word->compare_exchange_weak(
              w, ((w & (kWaitersParked | kWokenMask)) - mine) | me,
              std::memory_order_acquire, std::memory_order_relaxed)) {
        spin.Acquired();
        if (woken && (w & kWaitersParked)) KeepWaitersWoken(word);
        return true;
      }
      continue;
    }
    // Spin only while nobody is parked (parked waiters mean the lock was
    // held longer than a spin before), or when woken from the queue (the
    // wake-up may have overlapped the holder's section), and the spin
    // policy says it can pay.
    if (!(w & kWaitersParked) || woken) {
      if (spin.Spin(OwnerOf(w))) continue;
      if (!word->compare_exchange_weak(w, (w | kWaitersParked) - mine,
                                       std::memory_order_relaxed,
                                       std::memory_order_relaxed)) {
        continue;
      }
      woken = false;
    }
    const ParkResult r = Park(
        KeyOf(word),
        [word] {
          return (word->load(std::memory_order_relaxed) &
                  (kLocked | kWaitersParked)) == (kLocked | kWaitersParked);
        },
        [] {},
        [word](uintptr_t, bool was_last_thread) {
          // Under the bucket lock: no other thread can be parking now, so
          // if we were the last, nobody is parked any more.
          if (was_last_thread) {
            word->fetch_and(~kWaitersParked, std::memory_order_relaxed);
          }
        },
        kDefaultParkToken, deadline);
    if (r.unparked()) {
      if (r.token == kHandoffToken) {
        TakeHandoff(word);
        return true;
      }
    } else if (r.timed_out()) {
      return false;
    }
    // Woken for barging, or the word changed before we slept: compete
    // again (without spinning: we already know the lock is contended),
    // unless counted as woken (the unlock or a woken holder chose us).
    spin.Parked();
    if (r.unparked() && r.token == kWokenToken) {
      woken = true;
      spin.Woken();
    }
  }
}

void MutexCore::UnlockSlow(std::atomic<uint32_t>* word, bool force_fair) {
  uint32_t w = word->load(std::memory_order_relaxed);
  // Nobody parked, or woken waiters on their way that will take the lock
  // (or park again, taking their count off, before this unlock can miss
  // them: both are compare-and-swaps on the word): release, wake nobody.
  while (!(w & kWaitersParked) || ((w & kWokenMask) != 0 && !force_fair)) {
    if (word->compare_exchange_weak(w, w & (kWaitersParked | kWokenMask),
                                    std::memory_order_release,
                                    std::memory_order_relaxed)) {
      return;
    }
  }
  UnparkOne(KeyOf(word), [word, force_fair](UnparkResult r) -> UnparkToken {
    // Runs under the bucket lock, so no thread can park on the word between
    // our reading the queue and storing the word; woken waiters may take
    // their count off meanwhile, hence the compare-and-swap loops.
    const uint32_t parked = r.have_more_threads ? kWaitersParked : 0;
    uint32_t w = word->load(std::memory_order_relaxed);
    if (r.unparked_threads != 0 && (force_fair || r.be_fair)) {
      while (!word->compare_exchange_weak(
          w, kLocked | parked | (w & kWokenMask), std::memory_order_release,
          std::memory_order_relaxed)) {
      }
      if (ThreadData* td = CurrentThreadDataIfAny()) {
        td->counters.Bump(td->counters.handoffs);
      }
      return kHandoffToken;
    }
    // From this store on another thread may take, unlock and free the
    // mutex: nothing below touches it.
    const uint32_t woken = r.unparked_threads != 0 ? kWokenOne : 0;
    while (!word->compare_exchange_weak(w, parked | ((w & kWokenMask) + woken),
                                        std::memory_order_release,
                                        std::memory_order_relaxed)) {
    }
    return woken != 0 ? kWokenToken : kDefaultUnparkToken;
  });
}

void MutexCore::KeepWaitersWoken(std::atomic<uint32_t>* word) {
  // The chain of a broadcast requeued onto the mutex wakes one waiter per
  // unlock, each link a full wake-up latency after the previous one; with
  // a few woken ahead, their wake-ups overlap the holders' sections. More
  // than the CPUs could not run at once.
  const uint32_t limit = static_cast<uint32_t>(
      registry::AllowedCpus() < 7 ? registry::AllowedCpus() : 7);
  for (;;) {
    const uint32_t w = word->load(std::memory_order_relaxed);
    if (!(w & kWaitersParked) || ((w & kWokenMask) >> 28) >= limit) return;
    bool woke = false;
    UnparkOne(KeyOf(word), [word, &woke](UnparkResult r) -> UnparkToken {
      // Under the bucket lock, the mutex held by us: parkers and woken
      // waiters change the word meanwhile, so only atomic updates.
      if (!r.have_more_threads) {
        word->fetch_and(~kWaitersParked, std::memory_order_relaxed);
      }
      if (r.unparked_threads == 0) return kDefaultUnparkToken;
      word->fetch_add(kWokenOne, std::memory_order_relaxed);
      woke = true;
      return kWokenToken;
    });
    if (!woke) return;
  }
}

void Mutex::AssertHeld() const {
  if (!HeldByCurrentThread()) {
    ABSL_RAW_LOG(FATAL, "parklot::Mutex %p not held by this thread", this);
  }
}

void RecursiveMutex::Lock() {
  if (mu_.HeldByCurrentThread()) {
    ++count_;
    return;
  }
  mu_.Lock();
  count_ = 1;
}

bool RecursiveMutex::TryLock() {
  if (mu_.HeldByCurrentThread()) {
    ++count_;
    return true;
  }
  if (!mu_.TryLock()) return false;
  count_ = 1;
  return true;
}

bool RecursiveMutex::LockUntil(Deadline deadline) {
  if (mu_.HeldByCurrentThread()) {
    ++count_;
    return true;
  }
  if (!mu_.LockUntil(deadline)) return false;
  count_ = 1;
  return true;
}

int RecursiveMutex::Unlock() {
  if (!mu_.HeldByCurrentThread()) return EPERM;
  if (--count_ == 0) mu_.Unlock();
  return 0;
}

int ErrorCheckingMutex::Lock() {
  if (mu_.HeldByCurrentThread()) return EDEADLK;
  mu_.Lock();
  return 0;
}

int ErrorCheckingMutex::LockUntil(Deadline deadline) {
  if (mu_.HeldByCurrentThread()) return EDEADLK;
  return mu_.LockUntil(deadline) ? 0 : ETIMEDOUT;
}

int ErrorCheckingMutex::Unlock() {
  if (!mu_.HeldByCurrentThread()) return EPERM;
  mu_.Unlock();
  return 0;
}

}  // namespace parklot
