#include "sync/mutex.h"

#include <errno.h>
#include <ucontext.h>

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

#if PARKLOT_MUTEX_STEP_REGIONS
// The entries of parklot_mutex_step (PARKLOT_MUTEX_STEP): this object's
// own (hidden), none where nothing inlined a step.
extern "C" {
__attribute__((visibility("hidden"), weak)) extern const int32_t
    __start_parklot_mutex_step[];
__attribute__((visibility("hidden"), weak)) extern const int32_t
    __stop_parklot_mutex_step[];
}

bool MutexCore::SettleInterruptedStep(void* ucontext) {
  auto* uc = static_cast<ucontext_t*>(ucontext);
  greg_t* regs = uc->uc_mcontext.gregs;
  const char* ip = reinterpret_cast<const char*>(regs[REG_RIP]);
  // A linear search: a handful of entries, one per inlined step.
  for (const int32_t* e = __start_parklot_mutex_step;
       e != nullptr && e < __stop_parklot_mutex_step; e += 5) {
    const char* field = reinterpret_cast<const char*>(e);
    const char* begin = field + e[0];
    if (ip < begin || ip >= field + 8 + e[2]) continue;
    const char* branch = field + 4 + e[1];
    const char* end = field + 8 + e[2];
    const char* restart = field + 12 + e[3];
    // The step's registers: %rsi the holder's slot's address, %edx the
    // slot; ZF the compare-and-swap's success once it ran.
    auto* owner = reinterpret_cast<std::atomic<uint32_t>*>(regs[REG_RSI]);
    const auto slot = static_cast<uint32_t>(regs[REG_RDX]);
    const bool cas_succeeded = (regs[REG_EFL] & 0x40) != 0;
    if (e[4] == 1) {
      // Lock: at the branch after a failed compare-and-swap there is
      // nothing to do; otherwise the word is taken and the slot is stored.
      if (ip == branch && !cas_succeeded) return false;
      owner->store(slot, std::memory_order_relaxed);
      regs[REG_RIP] = reinterpret_cast<greg_t>(end);
      return true;
    }
    // Unlock: at the branch after a successful compare-and-swap the word
    // is released and the step done; before the compare-and-swap the slot
    // comes back and the step restarts at its clear; after a failed one
    // the slot comes back and the step ends (the caller unlocks inside a
    // section).
    if (ip == branch && cas_succeeded) return false;
    owner->store(slot, std::memory_order_relaxed);
    regs[REG_RIP] = reinterpret_cast<greg_t>(ip == begin ? restart : end);
    return true;
  }
  return false;
}
#else
bool MutexCore::SettleInterruptedStep(void*) { return false; }
#endif

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
