// The master-lock loop, over millions of rounds across threads:
//
//   lock; while (busy) wait; busy = 1; unlock;
//   work;
//   lock; busy = 0; notify; unlock;
//
// A lost wake-up shows as a stall with the lock free, busy 0 and a waiter
// asleep; the stall detector reports exactly that state before aborting.
// Built twice: as is, and with PARKLOT_POLICY=fixed:1.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "runtime/stats.h"
#include "sync/condvar.h"
#include "sync/mutex.h"
#include "tests/sync/sync_test_util.h"
#include "tests/util/watchdog.h"

namespace parklot::internal::testing {
namespace {

TEST(CondVarTortureTest, TableIsAsBuilt) {
  Mutex mu;
  mu.Lock();
  mu.Unlock();
  EXPECT_TRUE(TableIsAsBuilt()) << DescribeConfig(GetConfig());
}

enum class Notify {
  kOneLocked,    // NotifyOne while holding the lock (requeue path)
  kOneUnlocked,  // NotifyOne after releasing it (wake path)
  kAllLocked,    // NotifyAll while holding it
  kMixed,        // any of the above, at random, and timed waits
};

struct MasterParams {
  int threads;
  Notify notify;
  int64_t rounds;  // total, before sanitizer scaling
};

std::string ParamName(const ::testing::TestParamInfo<MasterParams>& p) {
  const char* n = "";
  switch (p.param.notify) {
    case Notify::kOneLocked:
      n = "NotifyOneLocked";
      break;
    case Notify::kOneUnlocked:
      n = "NotifyOneUnlocked";
      break;
    case Notify::kAllLocked:
      n = "NotifyAllLocked";
      break;
    case Notify::kMixed:
      n = "Mixed";
      break;
  }
  return absl::StrCat(p.param.threads, "threads_", n);
}

class MasterLockLoop : public ::testing::TestWithParam<MasterParams> {};

TEST_P(MasterLockLoop, NoLostWakeup) {
  const MasterParams p = GetParam();
  Watchdog dog(absl::Seconds(300), "master-lock loop");
  Mutex mu;
  CondVar cv;
  bool busy = false;   // guarded by mu
  int sleepers = 0;    // guarded by mu: threads inside cv.Wait
  uint64_t work = 0;   // guarded by the busy token, not by mu
  uint64_t tokens = 0; // guarded by the busy token
  std::atomic<int> violations{0};
  std::atomic<uint64_t> progress{0};
  StallDetector stall(&progress, absl::Seconds(30), [&] {
    if (mu.TryLock()) {
      std::fprintf(stderr,
                   "lock free, busy %d, %d waiter(s) asleep%s\n", busy ? 1 : 0,
                   sleepers,
                   !busy && sleepers > 0 ? ": LOST WAKE-UP" : "");
      mu.Unlock();
    } else {
      std::fprintf(stderr, "lock held (a thread is stuck holding it)\n");
    }
  });
  const int64_t per_thread = Scaled(p.rounds, 2000) / p.threads;
  std::vector<uint64_t> added(p.threads, 0);
  const Stats before = GetStats();
  std::vector<std::thread> threads;
  for (int t = 0; t < p.threads; ++t) {
    threads.emplace_back([&, t] {
      Rng rng(t + 11);
      uint64_t mine = 0;
      for (int64_t i = 0; i < per_thread; ++i) {
        mu.Lock();
        while (busy) {
          ++sleepers;
          if (p.notify == Notify::kMixed && rng.Below(8) == 0) {
            cv.WaitFor(mu, absl::Microseconds(rng.Below(100)));
          } else {
            cv.Wait(mu);
          }
          --sleepers;
        }
        busy = true;
        mu.Unlock();

        // The work, owned through the busy token.
        const uint64_t v = 1 + rng.Below(100);
        if (++tokens != 1) violations.fetch_add(1);
        work += v;
        Delay(rng.Below(32));
        // Now and then the worker loses its CPU while busy: others wait.
        if (rng.Below(32) == 0) std::this_thread::yield();
        --tokens;
        mine += v;

        Notify how = p.notify;
        if (how == Notify::kMixed) how = static_cast<Notify>(rng.Below(3));
        mu.Lock();
        busy = false;
        switch (how) {
          case Notify::kOneLocked:
            cv.NotifyOne();
            mu.Unlock();
            break;
          case Notify::kOneUnlocked:
            mu.Unlock();
            cv.NotifyOne();
            break;
          case Notify::kAllLocked:
          case Notify::kMixed:
            cv.NotifyAll();
            mu.Unlock();
            break;
        }
        progress.fetch_add(1, std::memory_order_relaxed);
        Delay(rng.Below(32));
      }
      added[t] = mine;
    });
  }
  for (auto& th : threads) th.join();
  const Stats after = GetStats();
  std::printf("rounds %llu: parks %llu, unparks %llu, handoffs %llu\n",
              static_cast<unsigned long long>(per_thread * p.threads),
              static_cast<unsigned long long>(after.parks - before.parks),
              static_cast<unsigned long long>(after.unparks - before.unparks),
              static_cast<unsigned long long>(after.handoffs -
                                              before.handoffs));
  EXPECT_EQ(violations.load(), 0);
  uint64_t expect = 0;
  for (uint64_t a : added) expect += a;
  EXPECT_EQ(work, expect);
  EXPECT_FALSE(busy);
  EXPECT_EQ(sleepers, 0);
  EXPECT_EQ(cv.NotifyAll(), 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Rounds, MasterLockLoop,
    ::testing::Values(MasterParams{2, Notify::kOneLocked, 1000000},
                      MasterParams{4, Notify::kOneUnlocked, 1000000},
                      MasterParams{8, Notify::kAllLocked, 500000},
                      MasterParams{16, Notify::kMixed, 500000},
                      MasterParams{64, Notify::kOneLocked, 300000},
                      MasterParams{64, Notify::kMixed, 300000}),
    ParamName);

// A reusable barrier made of a Mutex and a CondVar (generation counter,
// the last arriver broadcasts): every broadcast requeues the other waiters
// onto the mutex, which the broadcaster holds, and the broadcaster goes on
// to the next round's wait while they drain.
TEST(CondVarTorture, GenerationBarrier) {
  Watchdog dog(absl::Seconds(240), "condvar barrier");
  for (const int threads : {2, 5, 16}) {
    Mutex mu;
    CondVar cv;
    int arrived = 0;          // guarded by mu
    uint64_t generation = 0;  // guarded by mu
    std::atomic<uint64_t> progress{0};
    StallDetector stall(&progress, absl::Seconds(30), [&] {
      if (mu.TryLock()) {
        std::fprintf(stderr, "barrier: lock free, generation %llu, %d of %d "
                     "arrived\n", static_cast<unsigned long long>(generation),
                     arrived, threads);
        mu.Unlock();
      }
    });
    const int rounds = static_cast<int>(Scaled(200000, 2000) / threads);
    std::vector<uint64_t> seen(threads, 0);
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&, t] {
        for (int r = 0; r < rounds; ++r) {
          mu.Lock();
          const uint64_t gen = generation;
          if (++arrived == threads) {
            arrived = 0;
            ++generation;
            cv.NotifyAll();
          } else {
            while (generation == gen) cv.Wait(mu);
          }
          // Nobody can be more than one generation ahead.
          if (generation != gen + 1) seen[t] = ~uint64_t{0};
          mu.Unlock();
          progress.fetch_add(1, std::memory_order_relaxed);
        }
      });
    }
    for (auto& th : ts) th.join();
    EXPECT_EQ(generation, static_cast<uint64_t>(rounds));
    for (uint64_t v : seen) EXPECT_EQ(v, 0u);
  }
}

// A bounded queue with two condvars (not full / not empty) and NotifyOne,
// several producers and consumers: every item arrives exactly once.
TEST(CondVarTorture, BoundedQueue) {
  Watchdog dog(absl::Seconds(240), "bounded queue");
  constexpr int kProducers = 4, kConsumers = 4, kCapacity = 4;
  const int64_t per_producer = Scaled(200000, 4000) / kProducers;
  Mutex mu;
  CondVar not_full, not_empty;
  uint64_t ring[kCapacity];  // guarded by mu
  int head = 0, count = 0;   // guarded by mu
  int producers_left = kProducers;  // guarded by mu
  std::atomic<uint64_t> progress{0};
  StallDetector stall(&progress, absl::Seconds(30), [&] {
    if (mu.TryLock()) {
      std::fprintf(stderr, "queue: lock free, count %d, producers left %d\n",
                   count, producers_left);
      mu.Unlock();
    }
  });
  std::vector<uint64_t> consumed_sum(kConsumers, 0), consumed_n(kConsumers, 0);
  std::vector<std::thread> ts;
  for (int p = 0; p < kProducers; ++p) {
    ts.emplace_back([&, p] {
      Rng rng(p + 1000);
      for (int64_t i = 0; i < per_producer; ++i) {
        const uint64_t item = uint64_t(p) << 40 | uint64_t(i);
        mu.Lock();
        while (count == kCapacity) {
          if (rng.Below(8) == 0) {
            not_full.WaitFor(mu, absl::Microseconds(rng.Below(100)));
          } else {
            not_full.Wait(mu);
          }
        }
        ring[(head + count) % kCapacity] = item;
        ++count;
        not_empty.NotifyOne();
        mu.Unlock();
        progress.fetch_add(1, std::memory_order_relaxed);
      }
      mu.Lock();
      if (--producers_left == 0) not_empty.NotifyAll();
      mu.Unlock();
    });
  }
  for (int c = 0; c < kConsumers; ++c) {
    ts.emplace_back([&, c] {
      mu.Lock();
      for (;;) {
        while (count == 0 && producers_left > 0) not_empty.Wait(mu);
        if (count == 0) break;
        const uint64_t item = ring[head];
        head = (head + 1) % kCapacity;
        --count;
        // Notify outside the lock half of the time.
        if (item & 1) {
          mu.Unlock();
          not_full.NotifyOne();
          mu.Lock();
        } else {
          not_full.NotifyOne();
        }
        consumed_sum[c] += item;
        ++consumed_n[c];
      }
      mu.Unlock();
    });
  }
  for (auto& th : ts) th.join();
  uint64_t n = 0, sum = 0, expect = 0;
  for (int c = 0; c < kConsumers; ++c) {
    n += consumed_n[c];
    sum += consumed_sum[c];
  }
  for (int p = 0; p < kProducers; ++p) {
    for (int64_t i = 0; i < per_producer; ++i) {
      expect += uint64_t(p) << 40 | uint64_t(i);
    }
  }
  EXPECT_EQ(n, static_cast<uint64_t>(per_producer) * kProducers);
  EXPECT_EQ(sum, expect);
}

}  // namespace
}  // namespace parklot::internal::testing
