// parklot::Latch: std::latch semantics, many waiters and count-downers,
// saturation, destruction right after Wait returns, and a torture run.
#include "sync/latch.h"

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/global_table.h"
#include "runtime/thread_data.h"
#include "tests/sync/sync_test_util.h"
#include "tests/util/watchdog.h"

namespace parklot::internal::testing {
namespace {

TEST(LatchTest, Layout) {
  static_assert(sizeof(Latch) == 4, "a Latch is one 32-bit word");
  static constinit Latch global(1);
  EXPECT_EQ(global.count(), 1u);
  EXPECT_EQ(Latch::max(), 0x7fffffffu);
}

TEST(LatchTest, OneBucketBuild) {
  if (!ExpectOneBucket()) GTEST_SKIP() << "default table";
  EXPECT_EQ(GlobalTable().bucket_count(), 1u);
}

TEST(LatchTest, SingleThreadSemantics) {
  Latch zero(0);
  EXPECT_TRUE(zero.TryWait());
  zero.Wait();  // open: returns at once
  zero.CountDown();  // already open: no effect (precondition violation)
  EXPECT_EQ(zero.count(), 0u);

  Latch l(3);
  EXPECT_FALSE(l.TryWait());
  l.CountDown(0);
  EXPECT_EQ(l.count(), 3u);
  l.CountDown();
  EXPECT_EQ(l.count(), 2u);
  EXPECT_FALSE(l.try_wait());
  l.count_down(2);
  EXPECT_EQ(l.count(), 0u);
  EXPECT_TRUE(l.TryWait());
  l.wait();
  l.ArriveAndWait(0);

  Latch big(Latch::kMax + 5u);  // clamped
  EXPECT_EQ(big.count(), Latch::kMax);

  Latch sat(2);
  sat.CountDown(5);  // saturates at zero
  EXPECT_EQ(sat.count(), 0u);
  EXPECT_TRUE(sat.TryWait());
}

TEST(LatchTest, WaitersParkAndAllWake) {
  Watchdog wd(kWatchdogLimit, "LatchTest.WaitersParkAndAllWake");
  constexpr int kWaiters = 8;
  Latch latch(3);
  int payload = 0;  // written before CountDown, read after Wait
  std::atomic<int> done{0};
  std::vector<ThreadRef> refs(kWaiters);
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      refs[i].Publish();
      latch.Wait();
      EXPECT_EQ(payload, 42);
      done.fetch_add(1);
    });
  }
  for (auto& r : refs) ASSERT_TRUE(r.WaitParked());
  payload = 42;
  latch.CountDown();
  latch.CountDown();
  EXPECT_EQ(done.load(), 0);
  latch.CountDown();
  for (auto& t : threads) t.join();
  EXPECT_EQ(done.load(), kWaiters);
}

TEST(LatchTest, ArriveAndWaitManyThreads) {
  Watchdog wd(kWatchdogLimit, "LatchTest.ArriveAndWaitManyThreads");
  for (int threads_n : {2, 7, 64}) {
    const int rounds = static_cast<int>(Scaled(threads_n > 8 ? 40 : 400, 4));
    for (int round = 0; round < rounds; ++round) {
      Latch latch(threads_n);
      std::vector<int> slots(threads_n, 0);
      std::vector<std::thread> threads;
      for (int i = 0; i < threads_n; ++i) {
        threads.emplace_back([&, i] {
          slots[i] = round + 1;  // plain write, published by CountDown
          latch.ArriveAndWait();
          for (int j = 0; j < threads_n; ++j) EXPECT_EQ(slots[j], round + 1);
        });
      }
      for (auto& t : threads) t.join();
    }
  }
}

// A count-downer may still be inside CountDown (waking) when the waiter
// returns, destroys and poisons the latch: it must not touch it after the
// count reached zero (docs/design.md section 6, invariant 2).
TEST(LatchTest, DestroyRightAfterWait) {
  Watchdog wd(kWatchdogLimit, "LatchTest.DestroyRightAfterWait");
  const int iterations = static_cast<int>(Scaled(20000, 500));
  for (int i = 0; i < iterations; ++i) {
    Latch* latch = MallocNew<Latch>(2);
    std::thread a([latch] { latch->CountDown(); });
    std::thread b([latch] { latch->CountDown(); });
    latch->Wait();
    DestroyPoisonFree(latch);
    a.join();
    b.join();
  }
}

TEST(LatchTest, Torture) {
  Watchdog wd(kWatchdogLimit, "LatchTest.Torture");
  // Chained phases: each phase's latch opens after all workers counted it
  // down; workers check the previous phase's total before counting down.
  constexpr int kWorkers = 16;
  const int phases = static_cast<int>(Scaled(2000, 50));
  std::vector<Latch*> latches;
  for (int p = 0; p < phases; ++p) latches.push_back(new Latch(kWorkers));
  std::atomic<int64_t> totals[2] = {};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      for (int p = 0; p < phases; ++p) {
        totals[p & 1].fetch_add(w + 1, std::memory_order_relaxed);
        latches[p]->ArriveAndWait();
        // Everyone added to totals[p & 1] before the latch opened.
        EXPECT_GE(totals[p & 1].load(std::memory_order_relaxed),
                  int64_t{kWorkers} * (kWorkers + 1) / 2 * (p / 2 + 1));
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(totals[0].load() + totals[1].load(),
            int64_t{kWorkers} * (kWorkers + 1) / 2 * phases);
  for (Latch* l : latches) {
    EXPECT_TRUE(l->TryWait());
    delete l;
  }
}

}  // namespace
}  // namespace parklot::internal::testing
