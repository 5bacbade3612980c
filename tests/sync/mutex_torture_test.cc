// Torture for Mutex, RecursiveMutex and ErrorCheckingMutex: millions of
// operations over 2..64 threads with tiny critical sections and randomized
// delays, every acquisition path (Lock, TryLock, LockFor, LockUntil on both
// clocks) and both unlocks (Unlock, UnlockFair); the protected data are
// plain, non-atomic counters whose checksum must come out exact.
//
// Built twice: as is, and with PARKLOT_POLICY=fixed:1 (every key in one
// bucket of the parking lot).
#include <errno.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "runtime/deadline.h"
#include "runtime/stats.h"
#include "sync/mutex.h"
#include "tests/sync/sync_test_util.h"
#include "tests/util/watchdog.h"

namespace parklot::internal::testing {
namespace {

TEST(MutexTortureTest, TableIsAsBuilt) {
  Mutex mu;
  mu.Lock();
  mu.Unlock();
  EXPECT_TRUE(TableIsAsBuilt()) << DescribeConfig(GetConfig());
}

// Holds threads until all are started, so that they really overlap.
class StartGate {
 public:
  void Wait() {
    while (!open_.load(std::memory_order_acquire)) std::this_thread::yield();
  }
  void Open() { open_.store(true, std::memory_order_release); }

 private:
  std::atomic<bool> open_{false};
};

void PrintStatsDelta(const Stats& a, const Stats& b) {
  std::printf(
      "parks %llu (timeouts %llu, invalid %llu), unparks %llu, spins %llu "
      "(won %llu), handoffs %llu, buckets %zu\n",
      static_cast<unsigned long long>(b.parks - a.parks),
      static_cast<unsigned long long>(b.timeouts - a.timeouts),
      static_cast<unsigned long long>(b.invalid - a.invalid),
      static_cast<unsigned long long>(b.unparks - a.unparks),
      static_cast<unsigned long long>(b.spins - a.spins),
      static_cast<unsigned long long>(b.spin_acquired - a.spin_acquired),
      static_cast<unsigned long long>(b.handoffs - a.handoffs), b.buckets);
}

// One lock and the data it protects, on its own cache lines.
template <typename M>
struct alignas(64) Guarded {
  M mu;
  uint64_t sum = 0;      // plain: protected by mu
  uint64_t triple = 0;   // always 3 * sum
  uint64_t ops = 0;
  // Mutual-exclusion detector, independent of the data.
  std::atomic<int> inside{0};
};

struct TortureParams {
  int threads;
  int locks;
  int64_t total_ops;  // before sanitizer scaling
};

std::string ParamName(const ::testing::TestParamInfo<TortureParams>& p) {
  return absl::StrCat(p.param.threads, "threads_", p.param.locks, "locks");
}

class MutexTorture : public ::testing::TestWithParam<TortureParams> {};

// Takes `g.mu` by a path chosen at random. Returns after it holds it.
void AcquireAnyWay(Guarded<Mutex>& g, Rng& rng) {
  switch (rng.Below(8)) {
    case 0: {  // TryLock until it works (barging)
      int fails = 0;
      while (!g.mu.TryLock()) {
        if (++fails % 64 == 0) std::this_thread::yield();
      }
      return;
    }
    case 1:  // short monotonic timeouts, retried
      while (!g.mu.LockFor(absl::Microseconds(rng.Below(50)))) {
      }
      return;
    case 2:  // realtime deadlines, retried
      while (!g.mu.LockUntil(
          Deadline::Realtime(absl::Now() + absl::Microseconds(rng.Below(200))))) {
      }
      return;
    case 3:  // long deadline: never expires
      ASSERT_TRUE(g.mu.LockFor(absl::Hours(1)));
      return;
    default:
      g.mu.Lock();
      return;
  }
}

TEST_P(MutexTorture, ChecksumHolds) {
  const TortureParams p = GetParam();
  Watchdog dog(absl::Seconds(240), "mutex torture");
  std::vector<Guarded<Mutex>> locks(p.locks);
  const int64_t per_thread = Scaled(p.total_ops, 2000) / p.threads;
  std::atomic<uint64_t> progress{0};
  StallDetector stall(&progress, absl::Seconds(30), [&] {
    for (int i = 0; i < p.locks; ++i) {
      const bool free = locks[i].mu.TryLock();
      if (free) locks[i].mu.Unlock();
      std::fprintf(stderr, "lock %d: %s, inside=%d\n", i,
                   free ? "free" : "held", locks[i].inside.load());
    }
  });
  std::vector<uint64_t> added(p.threads, 0);
  std::atomic<int> violations{0};
  const Stats before = GetStats();
  StartGate gate;
  std::vector<std::thread> threads;
  for (int t = 0; t < p.threads; ++t) {
    threads.emplace_back([&, t] {
      Rng rng(t + 1);
      uint64_t mine = 0;
      gate.Wait();
      for (int64_t i = 0; i < per_thread; ++i) {
        Guarded<Mutex>& g = locks[rng.Below(p.locks)];
        AcquireAnyWay(g, rng);
        if (g.inside.fetch_add(1, std::memory_order_relaxed) != 0) {
          violations.fetch_add(1);
        }
        const uint64_t v = 1 + rng.Below(1000);
        g.sum += v;
        Delay(rng.Below(16));
        // Now and then the holder loses its CPU: waiters must park.
        if (rng.Below(128) == 0) std::this_thread::yield();
        g.triple += 3 * v;
        ++g.ops;
        g.inside.fetch_sub(1, std::memory_order_relaxed);
        if (rng.Below(16) == 0) {
          g.mu.UnlockFair();
        } else {
          g.mu.Unlock();
        }
        mine += v;
        if ((i & 255) == 0) progress.fetch_add(1, std::memory_order_relaxed);
        Delay(rng.Below(64));
        if (rng.Below(512) == 0) std::this_thread::yield();
      }
      added[t] = mine;
    });
  }
  gate.Open();
  for (auto& th : threads) th.join();
  PrintStatsDelta(before, GetStats());
  EXPECT_EQ(violations.load(), 0);
  uint64_t expect_sum = 0, sum = 0, triple = 0, ops = 0;
  for (uint64_t a : added) expect_sum += a;
  for (auto& g : locks) {
    EXPECT_TRUE(g.mu.TryLock()) << "a lock was left held";
    g.mu.Unlock();
    EXPECT_EQ(g.triple, 3 * g.sum);
    sum += g.sum;
    triple += g.triple;
    ops += g.ops;
  }
  EXPECT_EQ(sum, expect_sum);
  EXPECT_EQ(ops, static_cast<uint64_t>(per_thread) * p.threads);
}

INSTANTIATE_TEST_SUITE_P(
    Threads, MutexTorture,
    ::testing::Values(TortureParams{2, 1, 2000000},
                      TortureParams{4, 1, 2000000},
                      TortureParams{8, 3, 2000000},
                      TortureParams{16, 1, 1000000},
                      TortureParams{64, 1, 1000000},
                      TortureParams{64, 8, 1000000}),
    ParamName);

// Recursive and error-checking kinds under contention: depth and codes
// stay right, the counters exact.
TEST(MutexTortureKinds, RecursiveAndErrorChecking) {
  Watchdog dog(absl::Seconds(240), "kinds torture");
  constexpr int kThreads = 8;
  const int64_t per_thread = Scaled(1000000, 2000) / kThreads;
  Guarded<RecursiveMutex> rec;
  Guarded<ErrorCheckingMutex> chk;
  std::atomic<int> violations{0};
  std::atomic<uint64_t> progress{0};
  StallDetector stall(&progress, absl::Seconds(30), [] {});
  StartGate gate;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Rng rng(100 + t);
      gate.Wait();
      for (int64_t i = 0; i < per_thread; ++i) {
        if (rng.Below(2) == 0) {
          const uint32_t depth = 1 + rng.Below(4);
          for (uint32_t d = 0; d < depth; ++d) {
            if (rng.Below(4) == 0) {
              while (!rec.mu.TryLock()) std::this_thread::yield();
            } else if (rng.Below(4) == 0) {
              while (!rec.mu.LockFor(absl::Microseconds(20))) {
              }
            } else {
              rec.mu.Lock();
            }
          }
          if (rec.inside.fetch_add(1, std::memory_order_relaxed) != 0 ||
              rec.mu.depth() != depth) {
            violations.fetch_add(1);
          }
          ++rec.sum;
          Delay(rng.Below(16));
          rec.triple += 3;
          rec.inside.fetch_sub(1, std::memory_order_relaxed);
          for (uint32_t d = 0; d < depth; ++d) {
            if (rec.mu.Unlock() != 0) violations.fetch_add(1);
          }
          if (rec.mu.Unlock() != EPERM) violations.fetch_add(1);
        } else {
          int rc = rng.Below(4) == 0
                       ? chk.mu.LockUntil(Deadline::In(absl::Seconds(100)))
                       : chk.mu.Lock();
          if (rc != 0) violations.fetch_add(1);
          if (chk.inside.fetch_add(1, std::memory_order_relaxed) != 0) {
            violations.fetch_add(1);
          }
          if (chk.mu.Lock() != EDEADLK) violations.fetch_add(1);
          ++chk.sum;
          Delay(rng.Below(16));
          chk.triple += 3;
          chk.inside.fetch_sub(1, std::memory_order_relaxed);
          if (chk.mu.Unlock() != 0) violations.fetch_add(1);
          if (chk.mu.Unlock() != EPERM) violations.fetch_add(1);
        }
        if ((i & 255) == 0) progress.fetch_add(1, std::memory_order_relaxed);
        Delay(rng.Below(64));
      }
    });
  }
  gate.Open();
  for (auto& th : threads) th.join();
  EXPECT_EQ(violations.load(), 0);
  EXPECT_EQ(rec.sum + chk.sum, static_cast<uint64_t>(per_thread) * kThreads);
  EXPECT_EQ(rec.triple, 3 * rec.sum);
  EXPECT_EQ(chk.triple, 3 * chk.sum);
}

}  // namespace
}  // namespace parklot::internal::testing
