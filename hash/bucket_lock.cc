#include "hash/bucket_lock.h"

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


void BucketLock::LockSlow() {
  BucketLockCounters* c = t_lock_counters;
  if (c != nullptr) c->Bump(c->contended);
  // Bucket critical sections are a handful of pointer writes: a short spin
  // usually wins; past it the holder is likely preempted, so sleep.
  for (int i = 0; i < 64; ++i) {
    CpuRelax();
    uint32_t expected = 0;
    if (word_.load(std::memory_order_relaxed) == 0 &&
        word_.compare_exchange_weak(expected, 1, std::memory_order_acquire,
                                    std::memory_order_relaxed)) {
      if (c != nullptr) c->Bump(c->spin_won);
      return;
    }
  }
  bool slept = false;
  while (word_.exchange(2, std::memory_order_acquire) != 0) {
    if (c != nullptr) c->Bump(c->sleeps);
    slept = true;
    FutexWaitPrivate(&word_, 2);
  }
  if (slept && c != nullptr) c->Bump(c->slept);
}

}  // namespace parklot::internal
