// Helpers for the Mutex / CondVar tests: iteration scaling under sanitizers,
// "is that thread parked yet", poisoned frees, a stall detector, and a
// check that the one-bucket build really runs on one bucket.
#ifndef PARKLOT_TESTS_SYNC_MUTEX_TEST_UTIL_H_
#define PARKLOT_TESTS_SYNC_MUTEX_TEST_UTIL_H_

#include <time.h>

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
#include <thread>
#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runtime/config.h"
#include "runtime/deadline.h"
#include "runtime/global_table.h"
#include "runtime/registry.h"
#include "runtime/stats.h"
#include "runtime/thread_data.h"

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

// CLOCK_REALTIME now, read directly (absl::Now() may come from a
// calibrated cycle counter, which need not agree with the clock a
// FUTEX_CLOCK_REALTIME deadline is checked against).
inline absl::Time RealtimeNow() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return absl::TimeFromTimespec(ts);
}

// `n` iterations, divided by the sanitizer slowdown (at least `min`).
inline int64_t Scaled(int64_t n, int64_t min = 1) {
  const int64_t s = n / kSlowdown;
  return s < min ? min : s;
}

// Polls `pred` (yielding) until it holds or `limit` passes. Returns pred().
// Generous limits only: this bounds a wait, it never measures one.
template <typename Pred>
bool Eventually(Pred pred, absl::Duration limit = absl::Seconds(10)) {
  const absl::Time end = MonotonicNow() + limit;
  while (!pred()) {
    if (MonotonicNow() > end) return pred();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}

// A thread's parklot identity, published so that others can see whether it
// is parked.
class ThreadRef {
 public:
  // Called by the thread itself (registers it with the parking lot).
  void Publish() {
    td_.store(CurrentThreadData(), std::memory_order_release);
  }
  ThreadData* td() const { return td_.load(std::memory_order_acquire); }
  bool published() const { return td() != nullptr; }
  // True while the thread sleeps in Park (it is queued on some key).
  bool parked() const {
    ThreadData* t = td();
    return t != nullptr && registry::StateOf(t->slot) == ThreadState::kParked;
  }
  // Waits until the thread is parked (false after 10 s).
  bool WaitParked(absl::Duration limit = absl::Seconds(10)) const {
    return Eventually([this] { return parked(); }, limit);
  }
  uint64_t parks() const {
    return td()->counters.parks.load(std::memory_order_relaxed);
  }
  uint64_t timeouts() const {
    return td()->counters.timeouts.load(std::memory_order_relaxed);
  }

 private:
  std::atomic<ThreadData*> td_{nullptr};
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

// In the one-bucket build (local define PARKLOT_TEST_ONE_BUCKET, env
// PARKLOT_POLICY=fixed:1) returns false unless the parking lot really runs
// on one fixed bucket; elsewhere returns true.
// In the always-fair build (PARKLOT_TEST_ALWAYS_FAIR, env PARKLOT_FAIR_NS=0
// PARKLOT_SPIN=16) likewise checks that every unlock hands off and waiters
// spin a fixed budget.
inline bool TableIsAsBuilt() {
  bool ok = true;
#ifdef PARKLOT_TEST_ONE_BUCKET
  const Config& c = GetConfig();
  ok = ok && c.table.policy == GrowthPolicy::kFixed && c.table.buckets == 1 &&
       GlobalTable().bucket_count() == 1;
#endif
#ifdef PARKLOT_TEST_ALWAYS_FAIR
  const Config& f = GetConfig();
  ok = ok && f.fair_mean_ns == 0 && f.spin == SpinMode::kFixed &&
       f.spin_budget == 16;
#endif
  return ok;
}

}  // namespace parklot::internal::testing

#endif  // PARKLOT_TESTS_SYNC_MUTEX_TEST_UTIL_H_
