// The mutex algorithm on caller-provided words (MutexCore).
// Internal: not part of parklot's API; the public types are in
// sync/mutex.h (installed as <parklot/mutex.h>).
#ifndef PARKLOT_SYNC_MUTEX_CORE_H_
#define PARKLOT_SYNC_MUTEX_CORE_H_

#include <atomic>
#include <cstdint>

#include "hash/lock_section.h"
#include "runtime/deadline.h"
#include "runtime/parking_lot.h"
#include "runtime/thread_data.h"

// The one-step lock and unlock (MutexCore::LockFastOneStepAs,
// UnlockOneStep) as instruction regions that a signal handler wrapper
// settles (MutexCore::SettleInterruptedStep), as the kernel's restartable
// sequences do, instead of lock sections: x86-64 only, and not under
// ThreadSanitizer, which sees no atomic in an asm statement.
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define PARKLOT_MUTEX_STEP_REGIONS 1
#else
#define PARKLOT_MUTEX_STEP_REGIONS 0
#endif

// One entry of the section parklot_mutex_step, in the assembler: the first
// instruction after the step's first store (`begin`), the conditional
// branch on the compare-and-swap's result, the step's end, where an unlock
// restarts, and which step (1 lock, 2 unlock); addresses as offsets from
// their field (no relocation).
#define PARKLOT_MUTEX_STEP(begin, branch, end, restart, kind)             \
  ".pushsection parklot_mutex_step, \"a\"\n\t"                           \
  ".balign 4\n\t"                                                         \
  ".long " begin " - ., " branch " - ., " end " - ., " restart " - ., " kind \
  "\n\t"                                                                  \
  ".popsection\n\t"

namespace parklot::internal {

// What a mutex keeps beside its lock word: the spin moving average
// (runtime/spin.h) and the holder's registry slot, which owner checks
// (HeldByCurrentThread) and owner-aware spinning read. Zero-filled memory
// is a valid MutexMeta. Kept out of the lock word so that the word reads as
// glibc's own (see MutexCore): the shim places it in pthread_mutex_t's
// __list, which glibc uses only for robust mutexes (glibc runs those).
struct MutexMeta {
  std::atomic<int32_t> ema{0};
  // The holder's slot; 0 while free, while a handoff is in flight, or
  // between a compare-and-swap that took the word and the store after it.
  // Written only by the holder, after it took the word and before it
  // releases it, so a thread reads its own slot here only while it holds
  // the lock.
  std::atomic<uint32_t> owner{0};
};

// The lock algorithm, on caller-provided words, so that the same code runs
// on a parklot::Mutex and in place inside a glibc pthread_mutex_t (the
// preload shim). Not for direct use by applications.
//
// The lock word holds glibc's values for its states (nptl's lowlevellock:
// 0 free, 1 locked, 2 locked with waiters), so that debuggers, core-file
// readers and glibc's pretty printers read a mutex the shim runs as glibc's
// (docs/design.md section 5.4). One state is the lot's own: 3, free with
// threads still parked (an unlock woke one of several; barging lets any
// thread take it), which glibc's readers take for "locked with waiters".
// Zero-filled words are an unlocked mutex.
class MutexCore {
 public:
  static constexpr uint32_t kFree = 0;
  static constexpr uint32_t kLocked = 1;
  // Locked, and threads may be parked on the word's address: the unlock
  // must unpark. Set by a waiter before it parks, cleared by the last one
  // to leave.
  static constexpr uint32_t kLockedParked = 2;
  // Free, with threads parked.
  static constexpr uint32_t kFreeParked = 3;
  // Unpark token telling a woken waiter that the lock was handed to it.
  static constexpr UnparkToken kHandoffToken = 1;

  static bool IsLockedWord(uint32_t w) { return w - kLocked < 2; }
  static bool HasParked(uint32_t w) { return w >= kLockedParked; }
  // `w` with the parked state set or cleared, locked or not as it was.
  static uint32_t WithParked(uint32_t w) {
    return IsLockedWord(w) ? kLockedParked : kFreeParked;
  }
  static uint32_t WithoutParked(uint32_t w) {
    return IsLockedWord(w) ? kLocked : kFree;
  }

  // Lock: one compare-and-swap when free. Returns false only if `deadline`
  // passed first.
  static bool Lock(std::atomic<uint32_t>* word, MutexMeta* meta,
                   const Deadline& deadline = Deadline::Never()) {
    if (__builtin_expect(LockFast(word, meta), 1)) return true;
    return LockSlow(word, meta, deadline);
  }

  // The uncontended attempt alone: one compare-and-swap from 0 (free, no
  // parked threads), then the holder's slot stored. Returns whether the
  // caller now holds the lock.
  static bool LockFast(std::atomic<uint32_t>* word, MutexMeta* meta) {
    uint32_t expected = kFree;
    if (!word->compare_exchange_weak(expected, kLocked,
                                     std::memory_order_acquire,
                                     std::memory_order_relaxed)) {
      return false;
    }
    meta->owner.store(CurrentSlot(), std::memory_order_relaxed);
    return true;
  }

  // LockFast and the release of Unlock for a process that has one thread
  // (the shim, where glibc takes its single-threaded path): plain loads and
  // stores, no atomic instruction, which no other task can race (a signal
  // handler runs on this thread, between two of them). False, having
  // changed nothing, where the word is not free (LockFastSingleThreaded)
  // or not locked without parked threads (UnlockFastSingleThreaded): the
  // caller takes the ordinary path. Only while no other task shares the
  // process's memory.
  static bool LockFastSingleThreaded(std::atomic<uint32_t>* word,
                                     MutexMeta* meta) {
    if (word->load(std::memory_order_relaxed) != kFree) return false;
    const uint32_t slot = CurrentSlot();  // may register: before the store
    word->store(kLocked, std::memory_order_relaxed);
    meta->owner.store(slot, std::memory_order_relaxed);
    return true;
  }
  static bool UnlockFastSingleThreaded(std::atomic<uint32_t>* word,
                                       MutexMeta* meta) {
    if (word->load(std::memory_order_relaxed) != kLocked) return false;
    meta->owner.store(0, std::memory_order_relaxed);
    // The holder cleared before the release, for a handler on this thread.
    std::atomic_signal_fence(std::memory_order_seq_cst);
    word->store(kFree, std::memory_order_relaxed);
    return true;
  }

  // LockFast, Lock and Unlock as one step for a signal handler on the
  // calling thread: the word's change and the holder's record happen in a
  // step region that the shim's handler runner finishes or takes back
  // (SettleInterruptedStep; x86-64), or inside a lock section
  // (hash/lock_section.h, which defers the handler; the contended paths,
  // other architectures), so a handler that leaves by siglongjmp finds the
  // lock either not taken or taken with its holder recorded, and a redone
  // lock of an error-checking mutex answers EDEADLK rather than waiting on
  // itself (docs/design.md section 4, Mutex). For the mutexes whose holder
  // is checked (the shim's error-checking and recursive kinds, a condvar
  // wait's release and re-take). LockSlow always takes the word so.
  // Thread-safe.
  static bool LockFastOneStep(std::atomic<uint32_t>* word, MutexMeta* meta) {
    // CurrentSlot may register: outside the section.
    return LockFastOneStepAs(word, meta, CurrentSlot());
  }
  // LockFastOneStep for the caller's `slot` (CurrentSlot()).
  static bool LockFastOneStepAs(std::atomic<uint32_t>* word, MutexMeta* meta,
                                uint32_t slot) {
#if PARKLOT_MUTEX_STEP_REGIONS
    // The compare-and-swap, then the holder's slot: a signal that lands
    // between the two finds the store done for it (SettleInterruptedStep).
    uint32_t expected = kFree;
    bool taken;
    asm volatile(
        "lock cmpxchgl %[locked], (%[word])\n"
        "1:\tjne 2f\n\t"
        "movl %%edx, (%%rsi)\n"
        "2:\n\t" PARKLOT_MUTEX_STEP("1b", "1b", "2b", "2b", "1")
        : "+a"(expected), "=@ccz"(taken)
        : [word] "r"(word), [locked] "r"(kLocked), "S"(&meta->owner),
          "d"(slot)
        : "memory");
    return taken;
#else
    SectionScope section;
    uint32_t expected = kFree;
    if (!word->compare_exchange_weak(expected, kLocked,
                                     std::memory_order_acquire,
                                     std::memory_order_relaxed)) {
      return false;
    }
    meta->owner.store(slot, std::memory_order_relaxed);
    return true;
#endif
  }
  // LockFastOneStepAs and UnlockOneStep's release for a process that has
  // one thread (as LockFastSingleThreaded): plain loads and stores, the
  // holder's record in the same step regions. LockFastOneStepSingleThreaded
  // returns whether the caller now holds the lock (false: not free);
  // UnlockOneStepSingleThreaded whether it released it (false, having
  // changed nothing: not locked without parked threads; the caller unlocks
  // with UnlockOneStep). Without step regions, the atomic steps.
  static bool LockFastOneStepSingleThreaded(std::atomic<uint32_t>* word,
                                            MutexMeta* meta, uint32_t slot) {
#if PARKLOT_MUTEX_STEP_REGIONS
    bool taken;
    asm volatile(
        "cmpl $0, (%[word])\n\t"
        "jne 2f\n\t"
        "movl $1, (%[word])\n"
        "1:\tmovl %%edx, (%%rsi)\n"
        "2:\n\t" PARKLOT_MUTEX_STEP("1b", "2b", "2b", "2b", "1")
        : "=@ccz"(taken)
        : [word] "r"(word), "S"(&meta->owner), "d"(slot)
        : "memory");
    return taken;
#else
    return LockFastOneStepAs(word, meta, slot);
#endif
  }
  static bool UnlockOneStepSingleThreaded(std::atomic<uint32_t>* word,
                                          MutexMeta* meta) {
#if PARKLOT_MUTEX_STEP_REGIONS
    bool released;
    [[maybe_unused]] uint32_t slot;  // the holder's, while cleared
    asm volatile(
        "movl (%%rsi), %%edx\n\t"
        "cmpl $1, (%[word])\n\t"
        "jne 2f\n"
        "0:\tmovl $0, (%%rsi)\n"
        "1:\tmovl $0, (%[word])\n"
        "2:\n\t" PARKLOT_MUTEX_STEP("1b", "2b", "2b", "0b", "2")
        : "=@ccz"(released), "=&d"(slot)
        : [word] "r"(word), "S"(&meta->owner)
        : "memory");
    return released;
#else
    UnlockOneStep(word, meta);
    return true;
#endif
  }
  static bool LockOneStep(std::atomic<uint32_t>* word, MutexMeta* meta,
                          const Deadline& deadline = Deadline::Never()) {
    return LockFastOneStep(word, meta) || LockSlow(word, meta, deadline);
  }
  static void UnlockOneStep(std::atomic<uint32_t>* word, MutexMeta* meta) {
#if PARKLOT_MUTEX_STEP_REGIONS
    // The holder's slot cleared, then the compare-and-swap from locked
    // without parked threads to free; where threads are parked the slot is
    // put back and the unlock below redoes both inside a lock section. A
    // signal that lands after the clear and before the word is released
    // finds the slot put back and the step restarted
    // (SettleInterruptedStep).
    uint32_t expected = kLocked;
    bool released;
    [[maybe_unused]] uint32_t slot;  // the holder's, while cleared
    asm volatile(
        "movl (%%rsi), %%edx\n"
        "0:\tmovl $0, (%%rsi)\n"
        "1:\tlock cmpxchgl %[free], (%[word])\n"
        "2:\tje 3f\n\t"
        "movl %%edx, (%%rsi)\n"
        "3:\n\t" PARKLOT_MUTEX_STEP("1b", "2b", "3b", "0b", "2")
        : "+a"(expected), "=@ccz"(released), "=&d"(slot)
        : [word] "r"(word), [free] "r"(kFree), "S"(&meta->owner)
        : "memory");
    if (__builtin_expect(released, 1)) return;
#endif
    SectionScope section;
    Unlock(word, meta);
  }

  // Where a signal handler is about to run on a thread that `ucontext`
  // (the kernel's ucontext_t of the interrupted code) shows stopped inside
  // LockFastOneStepAs's or UnlockOneStep's instructions: completes the lock
  // (the holder's slot stored) or undoes the unlock's clear of the slot
  // and moves the thread back to the clear, in the context, so that the
  // handler finds the mutex free or held with its holder recorded
  // (docs/design.md section 4, Mutex). For the shim's signal-handler wrappers,
  // for asynchronous signals only (a fault belongs to its instruction).
  // Returns whether it changed the context. Async-signal-safe: no system
  // call, no lock. Elsewhere than x86-64 (and under ThreadSanitizer) the
  // steps are lock sections instead, and this does nothing.
  static bool SettleInterruptedStep(void* ucontext);

  // The contended path of Lock: spins while it can pay, then parks.
  // Returns false only if `deadline` passed first.
  static bool LockSlow(std::atomic<uint32_t>* word, MutexMeta* meta,
                       const Deadline& deadline);

  // Takes the lock if it is free (barging past parked waiters, as
  // pthread_mutex_trylock does). Never blocks. Returns whether the caller
  // now holds it. TryLockOneStep as LockFastOneStep.
  static bool TryLock(std::atomic<uint32_t>* word, MutexMeta* meta) {
    return TryLockAs(word, meta, CurrentSlot());
  }
  static bool TryLockOneStep(std::atomic<uint32_t>* word, MutexMeta* meta) {
    const uint32_t slot = CurrentSlot();  // may register: outside the section
    SectionScope section;
    return TryLockAs(word, meta, slot);
  }

  // Unlock: a store and one compare-and-swap when no thread is parked. The
  // caller must hold the lock (a plain pthread mutex may also be unlocked
  // by another thread: the word is released all the same). After the word
  // is released this touches only the parking lot, never the mutex's
  // memory (docs/design.md section 6, invariant 2).
  static void Unlock(std::atomic<uint32_t>* word, MutexMeta* meta,
                     bool force_fair = false) {
    meta->owner.store(0, std::memory_order_relaxed);
    uint32_t expected = kLocked;
    if (__builtin_expect(!force_fair && word->compare_exchange_weak(
                                            expected, kFree,
                                            std::memory_order_release,
                                            std::memory_order_relaxed),
                         1)) {
      return;
    }
    UnlockSlow(word, force_fair);
  }

  // True if the calling thread holds the lock.
  static bool HeldByCurrentThread(const std::atomic<uint32_t>* word,
                                  const MutexMeta* meta) {
    const ThreadData* td = CurrentThreadDataIfAny();
    return td != nullptr &&
           IsLockedWord(word->load(std::memory_order_relaxed)) &&
           meta->owner.load(std::memory_order_relaxed) == td->slot;
  }
  static bool IsLocked(const std::atomic<uint32_t>* word) {
    return IsLockedWord(word->load(std::memory_order_relaxed));
  }

  // For CondVar's wait morphing, with the word's bucket locked (inside an
  // UnparkRequeue validate/callback): mark that threads are parked on it.
  static void MarkWaitersParked(std::atomic<uint32_t>* word) {
    uint32_t w = word->load(std::memory_order_relaxed);
    while (!word->compare_exchange_weak(w, WithParked(w),
                                        std::memory_order_relaxed,
                                        std::memory_order_relaxed)) {
    }
  }
  // As MarkWaitersParked, but only if the lock is held, atomically: a thread
  // requeued onto an unlocked mutex would wait for an unlock that never
  // comes. Returns whether it marked.
  static bool MarkWaitersParkedIfLocked(std::atomic<uint32_t>* word) {
    uint32_t w = word->load(std::memory_order_relaxed);
    while (IsLockedWord(w)) {
      if (word->compare_exchange_weak(w, kLockedParked,
                                      std::memory_order_relaxed,
                                      std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }

  // With the word's bucket locked (inside an unpark's callback), when no
  // thread is parked on it any more: clear the parked state, as the last
  // waiter to leave by a timeout does.
  static void ClearWaitersParked(std::atomic<uint32_t>* word) {
    uint32_t w = word->load(std::memory_order_relaxed);
    while (HasParked(w) &&
           !word->compare_exchange_weak(w, WithoutParked(w),
                                        std::memory_order_relaxed,
                                        std::memory_order_relaxed)) {
    }
  }

  // After a park on `word` ended with kHandoffToken: record the caller as
  // the holder of the lock it was handed (the unlocker left it locked).
  static void TakeHandoff(MutexMeta* meta) {
    meta->owner.store(CurrentSlot(), std::memory_order_relaxed);
  }

 private:
  static bool TryLockAs(std::atomic<uint32_t>* word, MutexMeta* meta,
                        uint32_t slot);
  static void UnlockSlow(std::atomic<uint32_t>* word, bool force_fair);
};

}  // namespace parklot::internal

#endif  // PARKLOT_SYNC_MUTEX_CORE_H_
