// Helpers shared by the tests of sync/: iteration scaling under sanitizers,
// bounded polling, "is that thread parked (or asleep in a futex call)",
// poisoned frees, a stall detector, and the checks that a build runs on the
// table and settings its target asked for.
//
// The tests are in this namespace (in an unnamed one inside it), so that
// they name the helpers, and parklot::internal's types, as they are.
#ifndef PARKLOT_TESTS_SYNC_SYNC_TEST_UTIL_H_
#define PARKLOT_TESTS_SYNC_SYNC_TEST_UTIL_H_

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <new>
#include <random>
#include <thread>
#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/futex.h"
#include "gtest/gtest.h"
#include "runtime/config.h"
#include "runtime/deadline.h"
#include "runtime/global_table.h"
#include "runtime/registry.h"
#include "runtime/stats.h"
#include "runtime/thread_data.h"
#include "tests/util/watchdog.h"

namespace parklot::internal::testing {

#if defined(__SANITIZE_THREAD__)
inline constexpr int64_t kSanitizerSlowdown = 5;
#elif defined(__SANITIZE_ADDRESS__)
inline constexpr int64_t kSanitizerSlowdown = 2;
#else
inline constexpr int64_t kSanitizerSlowdown = 1;
#endif
// Always-fair builds hand every contended unlock off (lock convoys): much
// slower per operation.
#ifdef PARKLOT_TEST_ALWAYS_FAIR
inline constexpr int64_t kSlowdown = kSanitizerSlowdown * 5;
#else
inline constexpr int64_t kSlowdown = kSanitizerSlowdown;
#endif

// Every concurrency test runs under a Watchdog with this limit: far above
// the few seconds each takes, so that only a hang (not a loaded machine)
// trips it, and below Bazel's "moderate" timeout.
inline constexpr absl::Duration kWatchdogLimit = absl::Seconds(120);

// CLOCK_REALTIME now, read directly (absl::Now() may come from a
// calibrated cycle counter, which need not agree with the clock a
// FUTEX_CLOCK_REALTIME deadline is checked against).
inline absl::Time RealtimeNow() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return absl::TimeFromTimespec(ts);
}

// `n` iterations, divided by the slowdown (at least `min`).
inline int64_t Scaled(int64_t n, int64_t min = 1) {
  const int64_t s = n / kSlowdown;
  return s < min ? min : s;
}

// Polls `pred` (sleeping 50us between tries) until it holds or `limit`
// passes. Returns pred(). Generous limits only: this bounds a wait, it
// never measures one.
template <typename Pred>
bool Eventually(Pred pred, absl::Duration limit = absl::Seconds(20)) {
  const absl::Time end = MonotonicNow() + limit;
  while (!pred()) {
    if (MonotonicNow() > end) return pred();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}

// Until `n` threads are parked in the lot (a snapshot that only grows
// while the caller waits for it); a failed assertion after 60s.
inline void AwaitParked(size_t n) {
  const absl::Time end = absl::Now() + absl::Seconds(60);
  while (registry::ParkedThreads() < n && absl::Now() < end) {
    absl::SleepFor(absl::Microseconds(100));
  }
  ASSERT_GE(registry::ParkedThreads(), n);
}

// A thread's parking-lot identity, published by the thread itself so that
// others can tell when it sleeps in Park (or in a futex call of its own).
// Whether it is parked is read through its slot, which stays valid after
// the thread exits (its ThreadData need not).
class ThreadRef {
 public:
  // Called by the thread itself (registers it with the parking lot).
  void Publish() {
    tid_.store(gettid(), std::memory_order_relaxed);
    td_.store(CurrentThreadData(), std::memory_order_release);
    slot_.store(CurrentSlot(), std::memory_order_release);
  }
  bool published() const {
    return slot_.load(std::memory_order_acquire) != kNoSlot;
  }
  // The thread's data: only while the thread runs.
  ThreadData* td() const { return td_.load(std::memory_order_acquire); }
  // True while the thread sleeps in Park (it is queued on some key).
  bool parked() const {
    const uint32_t slot = slot_.load(std::memory_order_acquire);
    return slot != kNoSlot && registry::StateOf(slot) == ThreadState::kParked;
  }
  // Waits (bounded, generously) until the thread sleeps in Park.
  bool WaitParked(absl::Duration limit = absl::Seconds(20)) const {
    return Eventually([this] { return parked(); }, limit);
  }
  // True while the thread is blocked in a futex system call of its own
  // (primitives that sleep on their own word, not in the lot: Barrier), as
  // /proc/self/task/TID/syscall shows it: the call's number first.
  bool in_futex() const {
    if (!published()) return false;
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
  uint64_t parks() const {
    return td()->counters.parks.load(std::memory_order_relaxed);
  }
  uint64_t timeouts() const {
    return td()->counters.timeouts.load(std::memory_order_relaxed);
  }

 private:
  std::atomic<pid_t> tid_{0};
  std::atomic<ThreadData*> td_{nullptr};
  std::atomic<uint32_t> slot_{kNoSlot};
};

// Heap object from malloc, so that DestroyPoisonFree can free it.
template <typename T, typename... Args>
T* MallocNew(Args&&... args) {
  void* p = std::malloc(sizeof(T));
  if (p == nullptr) std::abort();
  return new (p) T(std::forward<Args>(args)...);
}

// Destroys `p`, fills its memory with 0xAB and frees it: any later access
// by parklot reads garbage (default build) or is a use-after-free (ASan).
template <typename T>
void DestroyPoisonFree(T* p) {
  p->~T();
  std::memset(static_cast<void*>(p), 0xAB, sizeof(T));
  std::free(p);
}

// A small, fast, per-thread PRNG (xorshift64*).
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull | 1) {}
  uint64_t Next() {
    s_ ^= s_ >> 12;
    s_ ^= s_ << 25;
    s_ ^= s_ >> 27;
    return s_ * 0x2545F4914F6CDD1Dull;
  }
  // Uniform in [0, n).
  uint32_t Below(uint32_t n) {
    return static_cast<uint32_t>((Next() >> 32) * n >> 32);
  }

 private:
  uint64_t s_;
};

// Busy work of about `n` iterations the compiler cannot remove.
inline void Delay(uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    __asm__ volatile("" ::: "memory");
  }
}

// A few PAUSEs to a few microseconds of random busy work (a randomized
// delay that does not sleep).
inline void RandomDelay(std::minstd_rand& rng, int max_pauses = 64) {
  const int n = static_cast<int>(rng() % static_cast<unsigned>(max_pauses));
  for (int i = 0; i < n; ++i) CpuRelax();
}

// Aborts with a diagnosis if `progress` stops moving for `limit` (a hang:
// most likely a lost wake-up). Runs on std:: primitives, not parklot's.
class StallDetector {
 public:
  StallDetector(const std::atomic<uint64_t>* progress, absl::Duration limit,
                std::function<void()> diagnose)
      : progress_(progress), limit_(limit), diagnose_(std::move(diagnose)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~StallDetector() {
    {
      std::lock_guard<std::mutex> l(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  StallDetector(const StallDetector&) = delete;
  StallDetector& operator=(const StallDetector&) = delete;

 private:
  void Run() {
    uint64_t last = progress_->load(std::memory_order_relaxed);
    absl::Time last_change = MonotonicNow();
    std::unique_lock<std::mutex> l(mu_);
    while (!done_) {
      cv_.wait_for(l, std::chrono::milliseconds(200));
      if (done_) break;
      const uint64_t now = progress_->load(std::memory_order_relaxed);
      if (now != last) {
        last = now;
        last_change = MonotonicNow();
      } else if (MonotonicNow() - last_change > limit_) {
        std::fprintf(stderr, "STALL: no progress for %s at %llu\n",
                     absl::FormatDuration(limit_).c_str(),
                     static_cast<unsigned long long>(now));
        diagnose_();
        std::fprintf(stderr, "%s\n", FormatStats(GetStats()).c_str());
        std::fflush(stderr);
        std::abort();
      }
    }
  }

  const std::atomic<uint64_t>* progress_;
  absl::Duration limit_;
  std::function<void()> diagnose_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
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

// In the one-bucket build returns false unless the parking lot really runs
// on one fixed bucket. In the always-fair build (PARKLOT_TEST_ALWAYS_FAIR,
// env PARKLOT_FAIR_NS=0 PARKLOT_SPIN=16) likewise checks that every unlock
// hands off and waiters spin a fixed budget. Elsewhere returns true.
inline bool TableIsAsBuilt() {
  bool ok = true;
  if (ExpectOneBucket()) {
    const Config& c = GetConfig();
    ok = ok && c.table.policy == GrowthPolicy::kFixed &&
         c.table.buckets == 1 && GlobalTable().bucket_count() == 1;
  }
#ifdef PARKLOT_TEST_ALWAYS_FAIR
  const Config& f = GetConfig();
  ok = ok && f.fair_mean_ns == 0 && f.spin == SpinMode::kFixed &&
       f.spin_budget == 16;
#endif
  return ok;
}

}  // namespace parklot::internal::testing

#endif  // PARKLOT_TESTS_SYNC_SYNC_TEST_UTIL_H_
