// parklot::Once: exactly one init among 64 racing threads, waiters park
// rather than spin, a throwing init and a cancelled (forced-unwound) init
// leave the Once callable again, and destruction right after Call returns.
#include "sync/once.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/thread_data.h"
#include "tests/sync/primitives_test_util.h"
#include "tests/util/watchdog.h"

namespace parklot {
namespace {

using ::parklot::testing::Watchdog;
using ::parklot::testing::prim::kWatchdogLimit;
using ::parklot::testing::prim::Eventually;
using ::parklot::testing::prim::ExpectOneBucket;
using ::parklot::testing::prim::Poisonable;
using ::parklot::testing::prim::Scaled;
using ::parklot::testing::prim::ThreadRef;

TEST(OnceTest, LayoutAndConstantInit) {
  static_assert(sizeof(Once) == 4 && sizeof(Once) == sizeof(pthread_once_t));
  static_assert(alignof(Once) <= alignof(pthread_once_t));
  static constinit Once once;
  EXPECT_FALSE(once.done());
  EXPECT_EQ(once.word()->load(), 0u);  // PTHREAD_ONCE_INIT
  int runs = 0;
  once.Call([&] { ++runs; });
  once.Call([&] { ++runs; });
  EXPECT_EQ(runs, 1);
  EXPECT_TRUE(once.done());
}

TEST(OnceTest, OneBucketBuild) {
  if (!ExpectOneBucket()) GTEST_SKIP() << "default table";
  EXPECT_EQ(GlobalTable().bucket_count(), 1u);
}

TEST(OnceTest, ForwardsArgumentsAndCallables) {
  Once once;
  int sum = 0;
  struct Adder {
    void Add(int a, int b, int* out) const { *out = a + b; }
  };
  Adder adder;
  CallOnce(once, &Adder::Add, adder, 2, 3, &sum);
  EXPECT_EQ(sum, 5);
  CallOnce(once, &Adder::Add, adder, 10, 10, &sum);
  EXPECT_EQ(sum, 5);

  Once once2;
  auto moved = std::make_unique<int>(7);
  once2.Call([](std::unique_ptr<int> p, int* out) { *out = *p; },
             std::move(moved), &sum);
  EXPECT_EQ(sum, 7);
}

// 64 threads race on one Once whose init takes 10 ms: exactly one init;
// everyone returns after it and sees its (plain, non-atomic) writes.
TEST(OnceTest, SixtyFourRacersExactlyOneInit) {
  Watchdog wd(kWatchdogLimit, "OnceTest.SixtyFourRacersExactlyOneInit");
  const int rounds = static_cast<int>(Scaled(10, 3));
  for (int round = 0; round < rounds; ++round) {
    Once once;
    std::atomic<int> inits{0};
    int payload[16] = {};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int i = 0; i < 64; ++i) {
      threads.emplace_back([&] {
        while (!go.load(std::memory_order_acquire)) {
          std::this_thread::yield();
        }
        once.Call([&] {
          inits.fetch_add(1);
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
          for (int& p : payload) p = 42;
        });
        EXPECT_TRUE(once.done());
        for (int p : payload) EXPECT_EQ(p, 42);
      });
    }
    go.store(true, std::memory_order_release);
    for (auto& t : threads) t.join();
    EXPECT_EQ(inits.load(), 1);
  }
}

// Waiters park while the init runs (they neither spin nor return early).
TEST(OnceTest, WaitersParkWhileInitRuns) {
  Watchdog wd(kWatchdogLimit, "OnceTest.WaitersParkWhileInitRuns");
  Once once;
  std::atomic<bool> finish{false}, started{false};
  std::thread initializer([&] {
    once.Call([&] {
      started.store(true);
      ASSERT_TRUE(Eventually([&] { return finish.load(); }));
    });
  });
  ASSERT_TRUE(Eventually([&] { return started.load(); }));
  constexpr int kWaiters = 4;
  std::vector<ThreadRef> refs(kWaiters);
  std::atomic<int> returned{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.emplace_back([&, i] {
      refs[i].Publish();
      once.Call([] { ADD_FAILURE() << "second init"; });
      returned.fetch_add(1);
    });
  }
  for (auto& r : refs) ASSERT_TRUE(r.WaitParked());
  EXPECT_EQ(returned.load(), 0);
  EXPECT_EQ(once.word()->load(), Once::kRunningWithWaiters);
  finish.store(true);
  initializer.join();
  for (auto& t : waiters) t.join();
  EXPECT_EQ(returned.load(), kWaiters);
}

TEST(OnceTest, ThrowingInitIsRetried) {
  Once once;
  int calls = 0;
  EXPECT_THROW(once.Call([&] {
    ++calls;
    throw std::runtime_error("init failed");
  }),
               std::runtime_error);
  EXPECT_FALSE(once.done());
  EXPECT_EQ(once.word()->load(), Once::kNotRun);
  once.Call([&] { ++calls; });
  EXPECT_EQ(calls, 2);
  EXPECT_TRUE(once.done());
  once.Call([&] { ++calls; });
  EXPECT_EQ(calls, 2);
}

// The init throws while other threads are parked on the Once: one of them
// runs its own init, successfully; all return.
TEST(OnceTest, ThrowingInitWithParkedWaiters) {
  Watchdog wd(kWatchdogLimit, "OnceTest.ThrowingInitWithParkedWaiters");
  const int rounds = static_cast<int>(Scaled(20, 4));
  for (int round = 0; round < rounds; ++round) {
    Once once;
    std::atomic<int> attempts{0}, successes{0};
    std::atomic<bool> release_thrower{false};
    std::thread thrower([&] {
      try {
        once.Call([&] {
          attempts.fetch_add(1);
          ASSERT_TRUE(Eventually([&] { return release_thrower.load(); }));
          throw std::runtime_error("first init fails");
        });
        ADD_FAILURE() << "exception lost";
      } catch (const std::runtime_error&) {
      }
    });
    ASSERT_TRUE(Eventually([&] { return attempts.load() == 1; }));
    constexpr int kWaiters = 8;
    std::vector<ThreadRef> refs(kWaiters);
    std::vector<std::thread> waiters;
    for (int i = 0; i < kWaiters; ++i) {
      waiters.emplace_back([&, i] {
        refs[i].Publish();
        once.Call([&] {
          attempts.fetch_add(1);
          successes.fetch_add(1);
        });
        EXPECT_TRUE(once.done());
      });
    }
    for (auto& r : refs) ASSERT_TRUE(r.WaitParked());
    release_thrower.store(true);
    thrower.join();
    for (auto& t : waiters) t.join();
    EXPECT_EQ(attempts.load(), 2);
    EXPECT_EQ(successes.load(), 1);
  }
}

// pthread_once semantics under cancellation: the init routine is a
// cancellation point's victim; the forced unwind resets the Once, and a
// parked waiter then runs the init itself.
struct CancelCtx {
  Once* once;
  std::atomic<bool>* in_init;
};

void* CancelledInit(void* arg) {
  auto* ctx = static_cast<CancelCtx*>(arg);
  ctx->once->Call([ctx] {
    ctx->in_init->store(true);
    for (;;) {
      pthread_testcancel();  // the cancellation point
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  });
  return nullptr;
}

TEST(OnceTest, CancelledInitLeavesOnceCallable) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer does not support pthread_cancel's unwind";
#endif
  Watchdog wd(kWatchdogLimit, "OnceTest.CancelledInitLeavesOnceCallable");
  Once once;
  std::atomic<bool> in_init{false};
  CancelCtx ctx{&once, &in_init};
  pthread_t victim;
  ASSERT_EQ(pthread_create(&victim, nullptr, CancelledInit, &ctx), 0);
  ASSERT_TRUE(Eventually([&] { return in_init.load(); }));
  ThreadRef ref;
  std::atomic<int> runs{0};
  std::thread waiter([&] {
    ref.Publish();
    once.Call([&] { runs.fetch_add(1); });
  });
  ASSERT_TRUE(ref.WaitParked());
  ASSERT_EQ(pthread_cancel(victim), 0);
  void* result = nullptr;
  ASSERT_EQ(pthread_join(victim, &result), 0);
  EXPECT_EQ(result, PTHREAD_CANCELED);
  waiter.join();
  EXPECT_EQ(runs.load(), 1);
  EXPECT_TRUE(once.done());
}

// The initializer may still be waking waiters when one of them returns and
// destroys, poisons and frees the Once (DESIGN.md invariant 2).
TEST(OnceTest, DestroyRightAfterCallReturns) {
  Watchdog wd(kWatchdogLimit, "OnceTest.DestroyRightAfterCallReturns");
  const int iterations = static_cast<int>(Scaled(10000, 300));
  for (int i = 0; i < iterations; ++i) {
    Once* once = Poisonable<Once>::Make();
    std::atomic<bool> started{false};
    std::thread initializer([once, &started] {
      once->Call([&started] {
        started.store(true);
        std::this_thread::yield();
      });
    });
    while (!started.load()) std::this_thread::yield();
    once->Call([] { ADD_FAILURE() << "second init"; });
    Poisonable<Once>::Destroy(once);
    initializer.join();
  }
}

}  // namespace
}  // namespace parklot
