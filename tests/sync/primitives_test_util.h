// Helpers for the SharedMutex / Once / Semaphore / Barrier / Latch tests:
// iteration scaling under sanitizers, bounded polling, "is that thread
// parked", the one-bucket build check, and poisoned frees.
#ifndef PARKLOT_TESTS_SYNC_PRIMITIVES_TEST_UTIL_H_
#define PARKLOT_TESTS_SYNC_PRIMITIVES_TEST_UTIL_H_

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <thread>
#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/futex.h"
#include "runtime/config.h"
#include "runtime/registry.h"
#include "runtime/thread_data.h"

namespace parklot::internal::testing::prim {

#if defined(__SANITIZE_THREAD__)
inline constexpr int64_t kSlowdown = 4;
#elif defined(__SANITIZE_ADDRESS__)
inline constexpr int64_t kSlowdown = 2;
#else
inline constexpr int64_t kSlowdown = 1;
#endif

// Every concurrency test runs under a Watchdog with this limit: far above
// the few seconds each takes, so that only a hang (not a loaded machine)
// trips it, and below Bazel's "moderate" timeout.
inline constexpr absl::Duration kWatchdogLimit = absl::Seconds(120);

// `n` iterations divided by the sanitizer slowdown, at least `min`.
inline int64_t Scaled(int64_t n, int64_t min = 1) {
  const int64_t s = n / kSlowdown;
  return s < min ? min : s;
}

// Polls `pred` until it holds or `limit` passes; returns pred(). Bounds a
// wait; never measures one.
template <typename Pred>
bool Eventually(Pred pred, absl::Duration limit = absl::Seconds(20)) {
  const absl::Time end = absl::Now() + limit;
  while (!pred()) {
    if (absl::Now() > end) return pred();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}

// A thread's parking-lot identity, published by the thread itself so that
// others can tell when it sleeps in Park.
class ThreadRef {
 public:
  // Called by the thread itself (registers it with the parking lot). Only
  // the slot is kept: the thread's ThreadData changes when it exits.
  void Publish() {
    tid_.store(gettid(), std::memory_order_relaxed);
    slot_.store(CurrentSlot(), std::memory_order_release);
  }
  // True while the thread is blocked in a futex system call of its own
  // (primitives that sleep on their own word, not in the lot: Barrier), as
  // /proc/self/task/TID/syscall shows it: the call's number first.
  bool in_futex() const {
    if (slot_.load(std::memory_order_acquire) == kNoSlot) return false;
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/task/%d/syscall",
             static_cast<int>(tid_.load(std::memory_order_relaxed)));
    FILE* f = fopen(path, "r");
    if (f == nullptr) return false;
    long nr = -1;
    const bool read = fscanf(f, "%ld", &nr) == 1;
    fclose(f);
    return read && nr == SYS_futex;
  }
  // Waits (bounded, generously) until the thread sleeps in a futex call.
  bool WaitInFutex(absl::Duration limit = absl::Seconds(20)) const {
    return Eventually([this] { return in_futex(); }, limit);
  }
  bool parked() const {
    const uint32_t slot = slot_.load(std::memory_order_acquire);
    return slot != kNoSlot &&
           registry::StateOf(slot) == ThreadState::kParked;
  }
  // Waits (bounded, generously) until the thread sleeps in Park.
  bool WaitParked(absl::Duration limit = absl::Seconds(20)) const {
    return Eventually([this] { return parked(); }, limit);
  }

 private:
  std::atomic<pid_t> tid_{0};
  std::atomic<uint32_t> slot_{kNoSlot};
};

// True when the test binary must run on the one-bucket table: the
// *_fixed1 targets define PARKLOT_EXPECT_ONE_BUCKET and set
// PARKLOT_POLICY=fixed:1 in the test environment.
inline bool ExpectOneBucket() {
#ifdef PARKLOT_EXPECT_ONE_BUCKET
  return true;
#else
  return false;
#endif
}

// A few PAUSEs to a few microseconds of random busy work (a randomized
// delay that does not sleep).
inline void RandomDelay(std::minstd_rand& rng, int max_pauses = 64) {
  const int n = static_cast<int>(rng() % static_cast<unsigned>(max_pauses));
  for (int i = 0; i < n; ++i) CpuRelax();
}

// Heap storage for one T that is destroyed, poisoned with 0xAB and freed
// by Destroy(): any later access is a use after free (ASan reports it; in
// other builds the poison makes the stale access misbehave visibly).
template <typename T>
class Poisonable {
 public:
  template <typename... Args>
  static T* Make(Args&&... args) {
    void* p = ::operator new(sizeof(T));
    return new (p) T(std::forward<Args>(args)...);
  }
  static void Destroy(T* t) {
    t->~T();
    std::memset(static_cast<void*>(t), 0xAB, sizeof(T));
    ::operator delete(static_cast<void*>(t));
  }
};

}  // namespace parklot::internal::testing::prim

#endif  // PARKLOT_TESTS_SYNC_PRIMITIVES_TEST_UTIL_H_
