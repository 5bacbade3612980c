// Primitives that release many parked threads at once: a latch
// opening, a once finishing, a write unlock handing the lock to a batch of
// readers, a semaphore release of many units. Each batch is larger than the
// lot's serial maximum (32), so it goes out as a wake tree
// (runtime/parking_lot.cc ReleaseChain); repeated rounds with the same
// threads, each guarded by a watchdog. Built twice (default table, and
// fixed:1 where every key shares one bucket).
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "hash/bucket_table.h"
#include "runtime/global_table.h"
#include "runtime/registry.h"
#include "runtime/thread_data.h"
#include "sync/latch.h"
#include "sync/once.h"
#include "sync/semaphore.h"
#include "sync/shared_mutex.h"
#include "tests/sync/sync_test_util.h"
#include "tests/util/watchdog.h"

namespace parklot::internal::testing {
namespace {

#if defined(__SANITIZE_THREAD__)
constexpr int kThreads = 40;
constexpr int kRounds = 5;
#else
constexpr int kThreads = 80;
constexpr int kRounds = 40;
#endif
const absl::Duration kWatch = absl::Seconds(120);

#ifdef PARKLOT_EXPECT_ONE_BUCKET
TEST(ManyWaitersConfig, OneBucket) {
  EXPECT_EQ(GlobalTable().bucket_count(), 1u);
}
#endif

TEST(ManyWaiters, LatchOpensForAll) {
  Watchdog wd(kWatch, "LatchOpensForAll");
  for (int r = 0; r < kRounds; ++r) {
    auto latch = std::make_unique<Latch>(1);
    std::atomic<int> out{0};
    std::vector<std::thread> t;
    for (int i = 0; i < kThreads; ++i) {
      t.emplace_back([&] {
        latch->Wait();
        out.fetch_add(1);
      });
    }
    AwaitParked(kThreads);
    latch->CountDown();
    for (auto& x : t) x.join();
    EXPECT_EQ(out.load(), kThreads);
  }
}

TEST(ManyWaiters, OnceReleasesItsWaiters) {
  Watchdog wd(kWatch, "OnceReleasesItsWaiters");
  for (int r = 0; r < kRounds; ++r) {
    Once once;
    std::atomic<int> runs{0}, out{0};
    std::atomic<bool> go{false};
    std::thread runner([&] {
      once.Call([&] {
        runs.fetch_add(1);
        while (!go.load()) absl::SleepFor(absl::Microseconds(100));
      });
    });
    while (runs.load() == 0) absl::SleepFor(absl::Microseconds(50));
    std::vector<std::thread> t;
    for (int i = 0; i < kThreads; ++i) {
      t.emplace_back([&] {
        once.Call([&] { runs.fetch_add(1); });
        out.fetch_add(1);
      });
    }
    AwaitParked(kThreads);
    go.store(true);
    runner.join();
    for (auto& x : t) x.join();
    EXPECT_EQ(runs.load(), 1);
    EXPECT_EQ(out.load(), kThreads);
  }
}

TEST(ManyWaiters, WriteUnlockHandsTheLockToAllReaders) {
  Watchdog wd(kWatch, "WriteUnlockHandsTheLockToAllReaders");
  for (int r = 0; r < kRounds; ++r) {
    SharedMutex mu;
    std::atomic<int> inside{0}, max_inside{0}, out{0};
    std::atomic<bool> hold{true};
    mu.Lock();
    std::vector<std::thread> t;
    for (int i = 0; i < kThreads; ++i) {
      t.emplace_back([&] {
        mu.LockShared();
        const int n = inside.fetch_add(1) + 1;
        int m = max_inside.load();
        while (n > m && !max_inside.compare_exchange_weak(m, n)) {
        }
        while (hold.load()) absl::SleepFor(absl::Microseconds(100));
        inside.fetch_sub(1);
        mu.UnlockShared();
        out.fetch_add(1);
      });
    }
    AwaitParked(kThreads);
    mu.Unlock();
    // Every reader holds the lock at once: the release handed it to all.
    const absl::Time end = absl::Now() + absl::Seconds(60);
    while (max_inside.load() < kThreads && absl::Now() < end) {
      absl::SleepFor(absl::Microseconds(100));
    }
    EXPECT_EQ(max_inside.load(), kThreads);
    hold.store(false);
    for (auto& x : t) x.join();
    EXPECT_EQ(out.load(), kThreads);
    EXPECT_TRUE(mu.TryLock());
    mu.Unlock();
  }
}

TEST(ManyWaiters, SemaphoreReleaseOfManyUnits) {
  Watchdog wd(kWatch, "SemaphoreReleaseOfManyUnits");
  for (int r = 0; r < kRounds; ++r) {
    Semaphore sem(0);
    std::atomic<int> out{0};
    std::vector<std::thread> t;
    for (int i = 0; i < kThreads; ++i) {
      t.emplace_back([&] {
        sem.Acquire();
        out.fetch_add(1);
      });
    }
    AwaitParked(kThreads);
    sem.Release(kThreads);
    for (auto& x : t) x.join();
    EXPECT_EQ(out.load(), kThreads);
    EXPECT_FALSE(sem.TryAcquire());
  }
}

}  // namespace
}  // namespace parklot::internal::testing
