#include "sync/mutex.h"

#include <errno.h>

#include "base/text.h"
#include "runtime/spin.h"

namespace parklot::internal {

namespace {
// Takes the free word `*w` (0 or 3) for `slot`: free (0) becomes locked
// (1), free with parked threads (3) locked with parked threads (2), so that
// the unlock still wakes one. On failure `*w` is the word's value.
bool TakeFree(std::atomic<uint32_t>* word, MutexMeta* meta, uint32_t* w,
              uint32_t slot) {
  if (!word->compare_exchange_weak(
          *w, *w == MutexCore::kFree ? MutexCore::kLocked
                                     : MutexCore::kLockedParked,
          std::memory_order_acquire, std::memory_order_relaxed)) {
    return false;
  }
  meta->owner.store(slot, std::memory_order_relaxed);
  return true;
}
}  // namespace

bool MutexCore::TryLockAs(std::atomic<uint32_t>* word, MutexMeta* meta,
                          uint32_t slot) {
  uint32_t w = word->load(std::memory_order_relaxed);
  while (!IsLockedWord(w)) {
    if (TakeFree(word, meta, &w, slot)) return true;
  }
  return false;
}

bool MutexCore::LockSlow(std::atomic<uint32_t>* word, MutexMeta* meta,
                         const Deadline& deadline) {
  const uint32_t slot = CurrentSlot();
  SpinWait spin(&meta->ema);
  for (;;) {
    uint32_t w = word->load(std::memory_order_relaxed);
    if (!IsLockedWord(w)) {
      bool took;
      {
        // The compare-and-swap and the holder's record as one step for a
        // signal handler on this thread (LockFastOneStep): the shim's
        // owner-checked kinds come here when contended.
        SectionScope section;
        took = TakeFree(word, meta, &w, slot);
      }
      if (took) {
        spin.Acquired();
        return true;
      }
      continue;
    }
    // Spin only while nobody is parked (parked waiters mean the lock was
    // held longer than a spin before) and the spin policy says it can pay.
    if (w == kLocked) {
      if (spin.Spin(meta->owner.load(std::memory_order_relaxed))) continue;
      if (!word->compare_exchange_weak(w, kLockedParked,
                                       std::memory_order_relaxed,
                                       std::memory_order_relaxed)) {
        continue;
      }
    }
    const ParkResult r = Park(
        KeyOf(word),
        [word] {
          return word->load(std::memory_order_relaxed) == kLockedParked;
        },
        [] {},
        [word](uintptr_t, bool was_last_thread) {
          // Under the bucket lock: no other thread can be parking now, so
          // if we were the last, nobody is parked any more.
          if (was_last_thread) ClearWaitersParked(word);
        },
        kDefaultParkToken, deadline);
    if (r.unparked()) {
      if (r.token == kHandoffToken) {
        TakeHandoff(meta);
        return true;
      }
    } else if (r.timed_out()) {
      return false;
    }
    // Woken for barging, or the word changed before we slept: compete
    // again (without spinning: we already know the lock is contended).
    spin.Parked();
  }
}

void MutexCore::UnlockSlow(std::atomic<uint32_t>* word, bool force_fair) {
  uint32_t w = word->load(std::memory_order_relaxed);
  while (!HasParked(w)) {
    if (word->compare_exchange_weak(w, kFree, std::memory_order_release,
                                    std::memory_order_relaxed)) {
      return;
    }
  }
  UnparkOne(KeyOf(word), [word, force_fair](UnparkResult r) -> UnparkToken {
    // Runs under the bucket lock, so no thread can park on the word between
    // our reading the queue and storing the word.
    if (r.unparked_threads != 0 && (force_fair || r.be_fair)) {
      // Handed over: locked, with no holder recorded until the woken
      // thread's TakeHandoff.
      word->store(r.have_more_threads ? kLockedParked : kLocked,
                  std::memory_order_release);
      if (ThreadData* td = CurrentThreadDataIfAny()) {
        td->counters.Bump(td->counters.handoffs);
      }
      return kHandoffToken;
    }
    // From this store on another thread may take, unlock and free the
    // mutex: nothing below touches it.
    word->store(r.have_more_threads ? kFreeParked : kFree,
                std::memory_order_release);
    return kDefaultUnparkToken;
  });
}

}  // namespace parklot::internal

namespace parklot {

using internal::SayLine;

void Mutex::AssertHeld() const {
  if (!HeldByCurrentThread()) {
    SayLine("parklot::Mutex %p not held by this thread", static_cast<const void*>(this));
    abort();
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
