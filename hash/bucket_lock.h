// The small lock that guards one bucket of the parking lot's table.
#ifndef PARKLOT_HASH_BUCKET_LOCK_H_
#define PARKLOT_HASH_BUCKET_LOCK_H_

#include <atomic>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "base/futex.h"
#include "base/shared_tls.h"

namespace parklot::internal {

// Contention figures of the bucket locks one thread took (PARKLOT_STATS):
// written only by that thread (relaxed load and store, no read-modify-write,
// so a signal handler's increment may be lost: statistics only), read by
// the statistics code. Only slow paths count, except the hold-time sample,
// which runs only while hold timing is on (BucketLock::EnableHoldTiming).
struct BucketLockCounters {
  std::atomic<uint64_t> contended{0};  // acquisitions that found it held
  std::atomic<uint64_t> spin_won{0};   // ... and got it while spinning
  std::atomic<uint64_t> slept{0};      // ... and slept in the kernel first
  std::atomic<uint64_t> sleeps{0};     // FUTEX_WAITs on bucket locks
  std::atomic<uint64_t> wakes{0};      // FUTEX_WAKEs by unlocks
  // Hold times, one acquisition in kHoldSampleEvery while timing is on.
  std::atomic<uint64_t> hold_samples{0};
  std::atomic<uint64_t> hold_ns{0};  // their sum
  // Sampled holds of kLongHoldNs or more: far beyond a few queue
  // operations, so the holder was descheduled (preempted or interrupted)
  // while holding the lock.
  std::atomic<uint64_t> long_holds{0};

  static constexpr uint32_t kHoldSampleEvery = 16;
  static constexpr uint64_t kLongHoldNs = 20000;

  void Bump(std::atomic<uint64_t>& c, uint64_t n = 1) {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
};

// Where the calling thread's bucket-lock counters go (nullptr: nowhere).
// Set once per thread by the registry; initial-exec, for signal handlers.
extern __attribute__((tls_model("initial-exec"))) thread_local
    BucketLockCounters* t_lock_counters;
extern std::atomic<bool> g_hold_timing;
void HoldSampleStart();
void HoldSampleEnd();

// A futex lock after Drepper ("Futexes Are Tricky", mutex 2): bit 0 held,
// bit 1 sleepers (a FUTEX_WAIT may be in progress: the unlock wakes one).
// Held only for a few queue operations, so it spins briefly before
// sleeping in the kernel. Sleeping (rather than spinning forever) is what
// keeps 64 threads on 2 CPUs moving when a holder is preempted.
//
// Bits 2-31 name the holder when it is a task on another task's TLS
// (base/shared_tls.h: a clone(CLONE_VM) process), 0 for every other
// holder. Such a task can be killed while it holds the lock, which a thread
// cannot (its whole process dies, and the lock is held only inside the
// lot's own code, where signals wait: hash/lock_section.h). A waiter on a
// lock such a task holds sleeps in slices of kDeadHolderCheckNs and, once
// the task has exited (TaskExited), takes the lock over: Lock() then
// returns true and the caller repairs what the lock guards
// (docs/design.md section 2.11).
//
// Thread-safe. Zero-initialized memory is an unlocked BucketLock, so buckets
// live in mmap'ed tables without constructors.
class ABSL_LOCKABLE BucketLock {
 public:
  static constexpr uint32_t kHeld = 1;
  static constexpr uint32_t kSleepers = 2;
  static constexpr int kHolderShift = 2;
  static constexpr int64_t kDeadHolderCheckNs = 10 * 1000 * 1000;

  constexpr BucketLock() = default;

  // Acquires the lock; never fails. Returns true if it was taken over from
  // a task that exited holding it: what it guards may be half-changed.
  // The uncontended path is one compare-and-swap, and one TLS load to
  // know whether the process has tasks on shared TLS.
  bool Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    uint32_t me = kHeld;
    if (__builtin_expect(TlsMayBeShared(), 0)) me = HeldByThisTask();
    uint32_t expected = 0;
    const bool inherited =
        !word_.compare_exchange_strong(expected, me, std::memory_order_acquire,
                                       std::memory_order_relaxed) &&
        LockSlow(me);
    if (__builtin_expect(
            g_hold_timing.load(std::memory_order_relaxed), 0)) {
      HoldSampleStart();
    }
    return inherited;
  }

  // Releases the lock. The caller must hold it.
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    if (__builtin_expect(
            g_hold_timing.load(std::memory_order_relaxed), 0)) {
      HoldSampleEnd();
    }
    if (word_.exchange(0, std::memory_order_release) & kSleepers) {
      if (BucketLockCounters* c = t_lock_counters) c->Bump(c->wakes);
      FutexWakePrivate(&word_, 1);
    }
  }

  // Makes the calling thread's contention figures count into `counters`
  // (nullptr: stop counting). Async-signal-safe; per thread.
  static void CountInto(BucketLockCounters* counters) {
    t_lock_counters = counters;
  }

  // Turns on the sampling of hold times for every thread (a clock read at
  // one acquisition in kHoldSampleEvery, and at its release). Thread-safe;
  // there is no turning it off.
  static void EnableHoldTiming() {
    g_hold_timing.store(true, std::memory_order_relaxed);
  }

 private:
  // The word a task on shared TLS holds the lock with: its id, held.
  static uint32_t HeldByThisTask();
  bool LockSlow(uint32_t me);

  std::atomic<uint32_t> word_{0};
};

}  // namespace parklot::internal

#endif  // PARKLOT_HASH_BUCKET_LOCK_H_
