// parklot::Barrier: pthread_barrier_t semantics: reuse over many cycles
// with exactly one serial thread per cycle and full visibility of every
// participant's writes, surplus callers, and destruction by a participant
// right after its Wait returns.
#include "sync/barrier.h"

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/global_table.h"
#include "runtime/thread_data.h"
#include "tests/sync/sync_test_util.h"
#include "tests/util/watchdog.h"

namespace parklot::internal::testing {
namespace {

TEST(BarrierTest, LayoutAndConstantInit) {
  static_assert(sizeof(Barrier) <= sizeof(pthread_barrier_t));
  static_assert(alignof(Barrier) <= alignof(pthread_barrier_t));
  static constinit Barrier global(1);
  EXPECT_EQ(global.count(), 1u);
  EXPECT_EQ(Barrier(0).count(), 1u);  // the shim rejects 0 with EINVAL
  EXPECT_EQ(Barrier(0xffffffffu).count(), Barrier::kMaxCount);
}

TEST(BarrierTest, OneBucketBuild) {
  if (!ExpectOneBucket()) GTEST_SKIP() << "default table";
  EXPECT_EQ(GlobalTable().bucket_count(), 1u);
}

TEST(BarrierTest, CountOneIsAlwaysSerial) {
  Barrier b(1);
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(b.Wait());
}

TEST(BarrierTest, BlocksUntilAllArrive) {
  Watchdog wd(kWatchdogLimit, "BarrierTest.BlocksUntilAllArrive");
  Barrier b(3);
  std::atomic<int> passed{0}, serial{0};
  std::vector<ThreadRef> refs(2);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      refs[i].Publish();
      if (b.Wait()) serial.fetch_add(1);
      passed.fetch_add(1);
    });
  }
  // Barrier waiters sleep on the barrier's own word (one wake for all).
  for (auto& r : refs) ASSERT_TRUE(r.WaitInFutex());
  EXPECT_EQ(passed.load(), 0);
  const bool me_serial = b.Wait();  // the last to arrive
  EXPECT_TRUE(me_serial);
  for (auto& t : threads) t.join();
  EXPECT_EQ(passed.load(), 2);
  EXPECT_EQ(serial.load(), 0);
}

// T threads run C cycles. In each cycle every thread writes its slot, waits,
// checks everyone's slot for this cycle, and waits again (so that nobody
// overwrites a slot while another still checks it). Exactly one serial
// thread per Wait cycle.
TEST(BarrierTest, ReuseManyCyclesExactlyOneSerial) {
  Watchdog wd(kWatchdogLimit, "BarrierTest.ReuseManyCyclesExactlyOneSerial");
  for (int threads_n : {2, 3, 8, 64}) {
    const int cycles =
        static_cast<int>(Scaled(threads_n >= 64 ? 1000 : 10000, 50));
    Barrier b(threads_n);
    std::vector<int> slots(threads_n, -1);
    // Two Waits per cycle: serial counts per Wait cycle.
    std::vector<std::atomic<int>> serials(2 * cycles);
    std::vector<std::thread> threads;
    for (int t = 0; t < threads_n; ++t) {
      threads.emplace_back([&, t] {
        std::minstd_rand rng(t + 1);
        for (int c = 0; c < cycles; ++c) {
          slots[t] = c;
          if (rng() % 16 == 0) RandomDelay(rng, 256);
          if (b.Wait()) serials[2 * c].fetch_add(1, std::memory_order_relaxed);
          for (int j = 0; j < threads_n; ++j) ASSERT_EQ(slots[j], c);
          if (b.Wait()) {
            serials[2 * c + 1].fetch_add(1, std::memory_order_relaxed);
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int i = 0; i < 2 * cycles; ++i) {
      ASSERT_EQ(serials[i].load(), 1) << "cycle " << i << " threads "
                                      << threads_n;
    }
  }
}

// More callers than the count: each cycle takes `count` of them; surplus
// arrivals wait for the next cycle and take part in it. The threads share
// a budget of count * cycles arrivals (a thread claims one before each
// Wait), so every cycle fills whatever the threads' relative progress:
// every Wait returns, and there is one serial result per cycle.
TEST(BarrierTest, SurplusCallersJoinLaterCycles) {
  Watchdog wd(kWatchdogLimit, "BarrierTest.SurplusCallersJoinLaterCycles");
  constexpr int kCount = 3;
  constexpr int kThreads = 9;
  const int64_t cycles = Scaled(6000, 100);
  const int64_t arrivals = kCount * cycles;
  Barrier b(kCount);
  std::atomic<int64_t> tickets{0}, serials{0}, returns{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      while (tickets.fetch_add(1) < arrivals) {
        if (b.Wait()) serials.fetch_add(1);
        returns.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(returns.load(), arrivals);
  EXPECT_EQ(serials.load(), cycles);
}

// pthread_barrier_destroy right after the wait (glibc allows it): one
// participant — the serial thread in odd iterations, a fixed non-serial-
// or-serial one in even ones — destroys, poisons and frees the barrier as
// soon as its own Wait returns, while the others may still be on their way
// out of Wait and the last arrival may still be waking them.
TEST(BarrierTest, DestroyRightAfterWait) {
  Watchdog wd(kWatchdogLimit, "BarrierTest.DestroyRightAfterWait");
  const int iterations = static_cast<int>(Scaled(10000, 300));
  constexpr int kThreads = 3;
  for (int i = 0; i < iterations; ++i) {
    Barrier* b = MallocNew<Barrier>(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([b, i, t] {
        const bool serial = b->Wait();
        const bool destroy = (i % 2) ? serial : t == 0;
        if (destroy) DestroyPoisonFree(b);
      });
    }
    for (auto& t : threads) t.join();
  }
}

// WaitForExits (the destructor) returns at once on a fresh or quiescent
// barrier, and the barrier stays usable afterwards (in-place use).
TEST(BarrierTest, WaitForExitsOnQuiescentBarrier) {
  Watchdog wd(kWatchdogLimit, "BarrierTest.WaitForExitsOnQuiescentBarrier");
  Barrier b(2);
  b.WaitForExits();
  for (int round = 0; round < 100; ++round) {
    std::thread other([&] { b.Wait(); });
    b.Wait();
    b.WaitForExits();
    other.join();
  }
}

}  // namespace
}  // namespace parklot::internal::testing
