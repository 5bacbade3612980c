#include "hash/bucket_lock.h"

#include <errno.h>
#include <time.h>

namespace parklot::internal {

__attribute__((tls_model("initial-exec"))) thread_local BucketLockCounters*
    t_lock_counters = nullptr;
std::atomic<bool> g_hold_timing{false};

namespace {
// The sampled hold in progress on this thread: its start (0: none), and
// the acquisition count that picks one in kHoldSampleEvery. Nested holds
// (a bucket pair) time the outer one only.
__attribute__((tls_model("initial-exec"))) thread_local uint64_t t_hold_start;
__attribute__((tls_model("initial-exec"))) thread_local uint32_t t_hold_tick;
__attribute__((tls_model("initial-exec"))) thread_local uint32_t t_hold_depth;

uint64_t NowNs() {
  timespec ts;  // vDSO: async-signal-safe, no system call
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u +
         static_cast<uint64_t>(ts.tv_nsec);
}
}  // namespace

void HoldSampleStart() {
  if (t_hold_depth++ != 0 || t_lock_counters == nullptr) return;
  if (++t_hold_tick % BucketLockCounters::kHoldSampleEvery == 0) {
    t_hold_start = NowNs();
  }
}

void HoldSampleEnd() {
  if (t_hold_depth == 0 || --t_hold_depth != 0 || t_hold_start == 0) return;
  const uint64_t held = NowNs() - t_hold_start;
  t_hold_start = 0;
  BucketLockCounters* c = t_lock_counters;
  if (c == nullptr) return;
  c->Bump(c->hold_samples);
  c->Bump(c->hold_ns, held);
  if (held >= BucketLockCounters::kLongHoldNs) c->Bump(c->long_holds);
}


uint32_t BucketLock::HeldByThisTask() {
  return static_cast<uint32_t>(ForeignTaskId()) << kHolderShift | kHeld;
}

bool BucketLock::LockSlow(uint32_t me) {
  BucketLockCounters* c = t_lock_counters;
  if (c != nullptr) c->Bump(c->contended);
  // Bucket critical sections are a handful of pointer writes: a short spin
  // usually wins; past it the holder is likely preempted, so sleep.
  for (int i = 0; i < 64; ++i) {
    CpuRelax();
    uint32_t expected = 0;
    if (word_.load(std::memory_order_relaxed) == 0 &&
        word_.compare_exchange_weak(expected, me, std::memory_order_acquire,
                                    std::memory_order_relaxed)) {
      if (c != nullptr) c->Bump(c->spin_won);
      return false;
    }
  }
  // From here on the lock is taken with the sleepers bit, as Drepper's
  // exchange(2) does: other waiters may be asleep.
  bool slept = false;
  for (;;) {
    uint32_t v = word_.load(std::memory_order_relaxed);
    if (v == 0) {
      if (word_.compare_exchange_weak(v, me | kSleepers,
                                      std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
        break;
      }
      continue;
    }
    // A compare-and-swap, not an exchange: the holder's id stays.
    if (!(v & kSleepers) &&
        !word_.compare_exchange_weak(v, v | kSleepers,
                                     std::memory_order_relaxed,
                                     std::memory_order_relaxed)) {
      continue;
    }
    v |= kSleepers;
    if (c != nullptr) c->Bump(c->sleeps);
    slept = true;
    const int32_t holder = static_cast<int32_t>(v >> kHolderShift);
    if (holder == 0) {
      FutexWaitPrivate(&word_, v);
      continue;
    }
    // A task on shared TLS holds it: wait in slices, and take the lock
    // over if the task exited (killed) without releasing it. The word
    // still naming it then means nobody else took it since.
    struct timespec slice = {0, kDeadHolderCheckNs};
    if (RawFutex(&word_, FUTEX_WAIT_PRIVATE, v, &slice, nullptr, 0) ==
            -ETIMEDOUT &&
        word_.load(std::memory_order_relaxed) == v && TaskExited(holder) &&
        word_.compare_exchange_strong(v, me | kSleepers,
                                      std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
      if (c != nullptr) c->Bump(c->slept);
      return true;
    }
  }
  if (slept && c != nullptr) c->Bump(c->slept);
  return false;
}

}  // namespace parklot::internal
