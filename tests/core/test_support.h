// Helpers shared by the core tests: sanitizer-aware scaling, bounded waits,
// randomized small delays and threads with small stacks.
#ifndef PARKLOT_TESTS_CORE_TEST_SUPPORT_H_
#define PARKLOT_TESTS_CORE_TEST_SUPPORT_H_

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>
#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/futex.h"

#if defined(__SANITIZE_THREAD__)
#define PARKLOT_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PARKLOT_TEST_TSAN 1
#endif
#endif

#if defined(__SANITIZE_ADDRESS__)
#define PARKLOT_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PARKLOT_TEST_ASAN 1
#endif
#endif

namespace parklot::internal::coretest {

#if defined(PARKLOT_TEST_TSAN)
inline constexpr bool kTsan = true;
#else
inline constexpr bool kTsan = false;
#endif
#if defined(PARKLOT_TEST_ASAN)
inline constexpr bool kAsan = true;
#else
inline constexpr bool kAsan = false;
#endif
inline constexpr bool kSanitized = kTsan || kAsan;

// Iteration counts are sized for the optimized build on 2 shared cores;
// sanitizers slow the code down ~5-15x (TSan) or ~2-4x (ASan), so loops
// shrink to keep every test well under a minute while still racing.
inline int64_t Scaled(int64_t optimized, int64_t tsan_divisor = 20,
                      int64_t asan_divisor = 4) {
  int64_t n = optimized;
  if (kTsan) n /= tsan_divisor;
  if (kAsan) n /= asan_divisor;
  return n > 0 ? n : 1;
}

// The watchdog limit for a test: generous, since a hang is the only thing it
// must catch, and a loaded sanitized run is slow.
inline absl::Duration WatchdogLimit(absl::Duration optimized) {
  return kSanitized ? optimized * 4 : optimized;
}

// Polls `pred` (sleeping between polls) until it holds or `limit` passes.
// Returns its final value. Used for "wait until the thread is parked"; the
// limit is far beyond any plausible scheduling delay, so a false return is
// a real failure, never a timing flake.
template <typename Pred>
bool WaitFor(Pred pred, absl::Duration limit = absl::Seconds(120)) {
  const absl::Time end = absl::Now() + limit;
  while (!pred()) {
    if (absl::Now() > end) return pred();
    absl::SleepFor(absl::Microseconds(50));
  }
  return true;
}

// A tiny per-thread PRNG (xorshift64*) for randomized delays: tests need
// varied interleavings, not statistical quality.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t Next() {
    s_ ^= s_ >> 12;
    s_ ^= s_ << 25;
    s_ ^= s_ >> 27;
    return s_ * 0x2545F4914F6CDD1Dull;
  }
  // Uniform-ish in [0, n).
  uint64_t Below(uint64_t n) { return Next() % n; }

 private:
  uint64_t s_;
};

// A random short delay: usually nothing, sometimes a few PAUSEs, rarely a
// yield, so that each side of a race wins in some rounds.
inline void RandomDelay(Rng& rng) {
  const uint64_t r = rng.Below(16);
  if (r < 8) return;
  if (r < 15) {
    const uint64_t n = rng.Below(64);
    for (uint64_t i = 0; i < n; ++i) CpuRelax();
    return;
  }
  std::this_thread::yield();
}

// A joinable thread with an explicit (small) stack, for tests that keep
// a thousand threads alive at once.
class SmallThread {
 public:
  SmallThread() = default;
  SmallThread(std::function<void()> fn, size_t stack_bytes = 256 << 10) {
    Start(std::move(fn), stack_bytes);
  }
  SmallThread(SmallThread&& o) noexcept
      : tid_(o.tid_), started_(std::exchange(o.started_, false)) {}
  SmallThread& operator=(SmallThread&&) = delete;
  ~SmallThread() {
    if (started_) {
      std::fprintf(stderr, "SmallThread destroyed without Join\n");
      std::abort();
    }
  }

  void Start(std::function<void()> fn, size_t stack_bytes = 256 << 10) {
    // Sanitizers need more stack per frame.
    if (kSanitized && stack_bytes < (1 << 20)) stack_bytes = 1 << 20;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, stack_bytes);
    auto* heap_fn = new std::function<void()>(std::move(fn));
    const int rc = pthread_create(&tid_, &attr, &Trampoline, heap_fn);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
      std::fprintf(stderr, "pthread_create failed: %d\n", rc);
      std::abort();
    }
    started_ = true;
  }
  void Join() {
    if (started_) pthread_join(tid_, nullptr);
    started_ = false;
  }

 private:
  static void* Trampoline(void* arg) {
    auto* fn = static_cast<std::function<void()>*>(arg);
    (*fn)();
    delete fn;
    return nullptr;
  }
  pthread_t tid_{};
  bool started_ = false;
};

}  // namespace parklot::internal::coretest

#endif  // PARKLOT_TESTS_CORE_TEST_SUPPORT_H_
