// parklot::Semaphore: sem_t semantics (value, try, timed on both clocks,
// overflow), Release(n) waking n waiters, Release racing the destruction of
// the semaphore by the waiter it woke (docs/design.md section 6, invariant 2),
// and a producer/consumer torture with a conservation checksum.
#include "sync/semaphore.h"

#include <semaphore.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "runtime/deadline.h"
#include "runtime/global_table.h"
#include "runtime/thread_data.h"
#include "tests/sync/sync_test_util.h"
#include "tests/util/watchdog.h"

namespace parklot::internal::testing {
namespace {

constexpr absl::Duration kShort = absl::Milliseconds(30);

TEST(SemaphoreTest, LayoutAndConstantInit) {
  static_assert(sizeof(Semaphore) <= sizeof(sem_t));
  static_assert(alignof(Semaphore) <= alignof(sem_t));
  static_assert(Semaphore::kMaxValue == SEM_VALUE_MAX);
  static constinit Semaphore global(2);
  EXPECT_EQ(global.value(), 2u);
}

TEST(SemaphoreTest, OneBucketBuild) {
  if (!ExpectOneBucket()) GTEST_SKIP() << "default table";
  EXPECT_EQ(GlobalTable().bucket_count(), 1u);
}

TEST(SemaphoreTest, SingleThreadSemantics) {
  Semaphore s;
  EXPECT_EQ(s.value(), 0u);
  EXPECT_FALSE(s.TryAcquire());
  EXPECT_TRUE(s.Release());
  EXPECT_EQ(s.value(), 1u);
  EXPECT_TRUE(s.TryAcquire());
  EXPECT_EQ(s.value(), 0u);
  EXPECT_TRUE(s.Release(5));
  EXPECT_TRUE(s.Release(0));
  EXPECT_EQ(s.value(), 5u);
  s.Acquire();
  s.acquire();
  EXPECT_TRUE(s.try_acquire());
  EXPECT_TRUE(s.AcquireFor(absl::ZeroDuration()));
  EXPECT_TRUE(s.AcquireUntil(Deadline::Realtime(absl::InfinitePast())));
  EXPECT_EQ(s.value(), 0u);
  EXPECT_FALSE(s.try_acquire_for(std::chrono::milliseconds(1)));
  s.release(2);
  EXPECT_TRUE(s.try_acquire_for(std::chrono::milliseconds(1)));
  EXPECT_EQ(s.value(), 1u);
  EXPECT_EQ(s.waiters(), 0u);

  Semaphore clamped(Semaphore::kMaxValue + 10u);
  EXPECT_EQ(clamped.value(), Semaphore::kMaxValue);
}

TEST(SemaphoreTest, OverflowIsRefused) {
  Semaphore s(Semaphore::kMaxValue - 1);
  EXPECT_TRUE(s.Release());
  EXPECT_EQ(s.value(), Semaphore::kMaxValue);
  EXPECT_FALSE(s.Release());  // sem_post's EOVERFLOW
  EXPECT_FALSE(s.Release(Semaphore::kMaxValue));
  EXPECT_EQ(s.value(), Semaphore::kMaxValue);
  EXPECT_TRUE(s.TryAcquire());
  EXPECT_FALSE(s.Release(2));
  EXPECT_TRUE(s.Release(1));
  EXPECT_EQ(s.value(), Semaphore::kMaxValue);
}

// Overflow with a waiter registered goes through the slow path's check.
TEST(SemaphoreTest, OverflowWithWaitersIsRefused) {
  Watchdog wd(kWatchdogLimit, "SemaphoreTest.OverflowWithWaitersIsRefused");
  Semaphore s;
  ThreadRef ref;
  std::thread waiter([&] {
    ref.Publish();
    s.Acquire();
  });
  ASSERT_TRUE(ref.WaitParked());
  EXPECT_EQ(s.waiters(), 1u);
  EXPECT_FALSE(s.Release(Semaphore::kMaxValue + 1u));
  EXPECT_EQ(s.value(), 0u);
  EXPECT_TRUE(s.Release(Semaphore::kMaxValue));
  waiter.join();
  EXPECT_EQ(s.value(), Semaphore::kMaxValue - 1);
  EXPECT_EQ(s.waiters(), 0u);
}

// Timed waits fail after their deadline (lower bound only) on both clocks,
// deregister, and leave the value alone.
TEST(SemaphoreTest, TimeoutsAndDeadlines) {
  Watchdog wd(kWatchdogLimit, "SemaphoreTest.TimeoutsAndDeadlines");
  Semaphore s;
  absl::Time start = MonotonicNow();
  EXPECT_FALSE(s.AcquireFor(kShort));
  EXPECT_GE(MonotonicNow() - start, kShort - absl::Milliseconds(1));
  start = absl::Now();
  EXPECT_FALSE(s.AcquireUntil(Deadline::Realtime(absl::Now() + kShort)));
  EXPECT_GE(absl::Now() - start, kShort - absl::Milliseconds(1));
  EXPECT_FALSE(s.AcquireUntil(Deadline::Monotonic(absl::InfinitePast())));
  EXPECT_FALSE(s.AcquireFor(-absl::Seconds(1)));
  EXPECT_EQ(s.value(), 0u);
  EXPECT_EQ(s.waiters(), 0u);
  // A unit released while a timed waiter sleeps is taken by it.
  std::atomic<bool> got{false};
  ThreadRef ref;
  std::thread waiter([&] {
    ref.Publish();
    got.store(s.AcquireFor(absl::Seconds(30)));
  });
  ASSERT_TRUE(ref.WaitParked());
  EXPECT_TRUE(s.Release());
  waiter.join();
  EXPECT_TRUE(got.load());
  EXPECT_EQ(s.value(), 0u);
  EXPECT_EQ(s.waiters(), 0u);
}

// Release(n) with more parked waiters than n lets exactly n through.
TEST(SemaphoreTest, ReleaseNWakesN) {
  Watchdog wd(kWatchdogLimit, "SemaphoreTest.ReleaseNWakesN");
  constexpr int kWaiters = 6;
  Semaphore s;
  std::atomic<int> through{0};
  std::vector<ThreadRef> refs(kWaiters);
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      refs[i].Publish();
      s.Acquire();
      through.fetch_add(1);
    });
  }
  for (auto& r : refs) ASSERT_TRUE(r.WaitParked());
  EXPECT_EQ(s.waiters(), static_cast<uint32_t>(kWaiters));
  EXPECT_TRUE(s.Release(4));
  ASSERT_TRUE(Eventually([&] { return through.load() == 4; }));
  // The other two stay blocked (parked again or still parked).
  ASSERT_TRUE(Eventually([&] {
    int parked = 0;
    for (auto& r : refs) parked += r.parked();
    return parked == 2;
  }));
  EXPECT_EQ(through.load(), 4);
  EXPECT_EQ(s.value(), 0u);
  EXPECT_EQ(s.waiters(), 2u);
  EXPECT_TRUE(s.Release(3));
  for (auto& t : threads) t.join();
  EXPECT_EQ(through.load(), kWaiters);
  EXPECT_EQ(s.value(), 1u);
  EXPECT_EQ(s.waiters(), 0u);
}

// docs/design.md section 6, invariant 2 for sem_post: a heap object holding a
// Semaphore is destroyed, poisoned and freed by the waiter right after Acquire
// returns, while the poster may still be inside Release. Under ASan any access
// by the poster after publishing the unit is a heap-use-after-free.
struct Message {
  Semaphore ready;
  int payload = 0;
};

TEST(SemaphoreTest, ReleaseRacingDestruction) {
  Watchdog wd(kWatchdogLimit, "SemaphoreTest.ReleaseRacingDestruction");
  const int iterations = static_cast<int>(Scaled(20000, 500));
  for (int i = 0; i < iterations; ++i) {
    Message* m = MallocNew<Message>();
    ThreadRef ref;
    const bool wait_parked = i % 2 == 0;  // exercise the slow path too
    std::thread waiter([m, &ref, i] {
      ref.Publish();
      m->ready.Acquire();
      EXPECT_EQ(m->payload, i);
      DestroyPoisonFree(m);
    });
    if (wait_parked) {
      ASSERT_TRUE(ref.WaitParked());
    }
    m->payload = i;
    m->ready.Release();
    waiter.join();
  }
}

// The same with several waiters and a refcount: the last waiter to return
// destroys; the poster posts n units with one Release(n) or n Releases.
struct Shared {
  explicit Shared(int refs) : refs(refs) {}
  Semaphore sem;
  std::atomic<int> refs;
};

TEST(SemaphoreTest, RefcountedReleaseRacingDestruction) {
  Watchdog wd(kWatchdogLimit,
              "SemaphoreTest.RefcountedReleaseRacingDestruction");
  const int iterations = static_cast<int>(Scaled(5000, 200));
  constexpr int kWaiters = 3;
  for (int i = 0; i < iterations; ++i) {
    Shared* s = MallocNew<Shared>(kWaiters);
    std::vector<std::thread> waiters;
    for (int w = 0; w < kWaiters; ++w) {
      waiters.emplace_back([s] {
        s->sem.Acquire();
        if (s->refs.fetch_sub(1) == 1) DestroyPoisonFree(s);
      });
    }
    if (i % 2) {
      s->sem.Release(kWaiters);
    } else {
      // Only the last Release's units can let the last waiter through.
      for (int k = 0; k < kWaiters; ++k) s->sem.Release();
    }
    for (auto& t : waiters) t.join();
  }
}

// Producers release, consumers acquire (blocking, try and timed, with
// random delays); every unit is accounted for.
TEST(SemaphoreTest, ProducerConsumerTorture) {
  Watchdog wd(kWatchdogLimit, "SemaphoreTest.ProducerConsumerTorture");
  for (int threads_n : {2, 4, 16, 64}) {
    Semaphore s;
    const int producers = threads_n / 2;
    const int consumers = threads_n - producers;
    const int64_t per_producer = Scaled(1000000 / threads_n, 100);
    const int64_t total = per_producer * producers;
    std::atomic<int64_t> consumed{0}, produced{0}, timeouts{0};
    std::atomic<int64_t> checksum_in{0}, checksum_out{0};
    std::vector<std::thread> threads;
    for (int p = 0; p < producers; ++p) {
      threads.emplace_back([&, p] {
        std::minstd_rand rng(p + 1);
        for (int64_t i = 0; i < per_producer;) {
          const uint32_t n = 1 + rng() % 3;
          const int64_t k = std::min<int64_t>(n, per_producer - i);
          ASSERT_TRUE(s.Release(static_cast<uint32_t>(k)));
          produced.fetch_add(k, std::memory_order_relaxed);
          i += k;
          if (rng() % 8 == 0) RandomDelay(rng, 128);
        }
      });
    }
    for (int c = 0; c < consumers; ++c) {
      threads.emplace_back([&, c] {
        std::minstd_rand rng(1000 + c);
        for (;;) {
          // Claim a unit to consume before taking it, so that consumers
          // stop exactly at `total` and never block forever.
          int64_t mine = consumed.fetch_add(1, std::memory_order_relaxed);
          if (mine >= total) return;
          const unsigned how = rng() % 8;
          if (how == 0) {
            while (!s.TryAcquire()) std::this_thread::yield();
          } else if (how == 1) {
            while (!s.AcquireFor(absl::Microseconds(rng() % 300))) {
              timeouts.fetch_add(1, std::memory_order_relaxed);
            }
          } else {
            s.Acquire();
          }
          checksum_out.fetch_add(mine + 1, std::memory_order_relaxed);
          if (rng() % 8 == 0) RandomDelay(rng, 128);
        }
      });
    }
    for (auto& t : threads) t.join();
    checksum_in.store(total * (total + 1) / 2);
    EXPECT_EQ(produced.load(), total);
    EXPECT_EQ(checksum_out.load(), checksum_in.load());
    EXPECT_EQ(s.value(), 0u);
    EXPECT_EQ(s.waiters(), 0u);
  }
}

// Ping-pong between two semaphores: each side waits, the handoff goes back
// and forth; a lost wake-up would hang (the watchdog fires).
TEST(SemaphoreTest, PingPong) {
  Watchdog wd(kWatchdogLimit, "SemaphoreTest.PingPong");
  Semaphore ping, pong;
  const int64_t rounds = Scaled(100000, 2000);
  int64_t ball = 0;  // passed back and forth, protected by the handoff
  std::thread other([&] {
    for (int64_t i = 0; i < rounds; ++i) {
      ping.Acquire();
      ++ball;
      pong.Release();
    }
  });
  for (int64_t i = 0; i < rounds; ++i) {
    ping.Release();
    pong.Acquire();
    ++ball;
  }
  other.join();
  EXPECT_EQ(ball, 2 * rounds);
}

}  // namespace
}  // namespace parklot::internal::testing
