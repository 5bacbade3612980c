// A broadcast to a crowd (more than 32 waiters: sync/condvar.cc WakeCrowd,
// docs/design.md section 4 CondVar). With the mutex held, the crowd is
// requeued onto the mutex tagged, and the first waiter that the mutex's
// unlock wakes wakes all the others (one wake tree) before it re-takes the
// mutex; with the mutex free, all are woken at once; 32 or fewer are
// requeued and pass the mutex one unlock's wake-up at a time, as before.
// The outcomes are deterministic: which waiter did how many unparks inside
// its Wait. Built twice (default table, and fixed:1 where the condvar's and
// the mutex's keys share one bucket).
#include <algorithm>
#include <atomic>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "runtime/parking_lot.h"
#include "runtime/registry.h"
#include "runtime/thread_data.h"
#include "sync/condvar.h"
#include "sync/mutex.h"
#include "tests/sync/sync_test_util.h"
#include "tests/util/watchdog.h"

namespace parklot::internal::testing {
namespace {

const absl::Duration kWatch = absl::Seconds(120);

uint64_t MyUnparks() {
  return CurrentThreadData()->counters.unparks.load(std::memory_order_relaxed);
}

// `n` waiters block on one condvar; the main thread broadcasts (holding the
// mutex if `held`) and then unlocks. Each waiter records the unparks it
// made inside its Wait (the crowd's wake happens there) and whether it
// returned holding the mutex. Returns the per-waiter unpark counts.
std::vector<uint64_t> Broadcast(int n, bool held, size_t* notified,
                                uint64_t* notifier_unparks = nullptr) {
  Mutex mu;
  CondVar cv;
  int gen = 0;    // under mu
  int passed = 0;  // under mu
  std::vector<uint64_t> unparks(static_cast<size_t>(n));
  std::atomic<int> not_held{0};
  std::vector<std::thread> t;
  const size_t parked_before = registry::ParkedThreads();
  // One at a time, each parked before the next starts: no thread is ever
  // parked on the mutex when a waiter's Wait unlocks it, so the unparks
  // counted inside a Wait are the crowd's wake alone.
  for (int i = 0; i < n; ++i) {
    t.emplace_back([&, i] {
      mu.Lock();
      const int my = gen;
      while (gen == my) {
        const uint64_t u0 = MyUnparks();
        cv.Wait(mu);
        unparks[static_cast<size_t>(i)] += MyUnparks() - u0;
        if (!mu.HeldByCurrentThread()) not_held.fetch_add(1);
      }
      ++passed;
      mu.Unlock();
    });
    AwaitParked(parked_before + static_cast<size_t>(i) + 1);
  }
  const uint64_t u0 = MyUnparks();
  if (held) {
    mu.Lock();
    ++gen;
    *notified = cv.NotifyAll();
    if (notifier_unparks != nullptr) *notifier_unparks = MyUnparks() - u0;
    mu.Unlock();
  } else {
    mu.Lock();
    ++gen;
    mu.Unlock();
    *notified = cv.NotifyAll();
    if (notifier_unparks != nullptr) *notifier_unparks = MyUnparks() - u0;
  }
  for (auto& x : t) x.join();
  EXPECT_EQ(passed, n);
  EXPECT_EQ(not_held.load(), 0);
  // Nothing is left parked on either key: a second broadcast finds no one.
  EXPECT_EQ(cv.NotifyAll(), 0u);
  return unparks;
}

// The crowd, mutex held: exactly one waiter (the first the unlock woke)
// released all the others inside its Wait, nobody else unparked anyone
// there.
TEST(CondVarCrowd, FirstWokenWakesTheRest) {
  Watchdog wd(kWatch, "FirstWokenWakesTheRest");
  for (int n : {33, 64, 200}) {
    for (int round = 0; round < 5; ++round) {
      size_t notified = 0;
      uint64_t by_notifier = 1;
      std::vector<uint64_t> u =
          Broadcast(n, /*held=*/true, &notified, &by_notifier);
      EXPECT_EQ(notified, static_cast<size_t>(n));
      EXPECT_EQ(by_notifier, 0u);  // all requeued, none woken
      std::sort(u.begin(), u.end());
      EXPECT_EQ(u.back(), static_cast<uint64_t>(n - 1)) << "n=" << n;
      EXPECT_EQ(u[u.size() - 2], 0u) << "n=" << n;
    }
  }
}

// 32 waiters or fewer, mutex held: requeued as before; each is woken by an
// unlock outside any Wait, so no waiter unparks anyone inside its Wait.
TEST(CondVarCrowd, SmallBroadcastStillRequeues) {
  Watchdog wd(kWatch, "SmallBroadcastStillRequeues");
  for (int n : {2, 16, 32}) {
    for (int round = 0; round < 5; ++round) {
      size_t notified = 0;
      std::vector<uint64_t> u = Broadcast(n, /*held=*/true, &notified);
      EXPECT_EQ(notified, static_cast<size_t>(n));
      EXPECT_EQ(*std::max_element(u.begin(), u.end()), 0u) << "n=" << n;
    }
  }
}

// The crowd, mutex free: all woken by the notifier (a wake tree; 32 or
// fewer: one woken, the rest requeued), none by a waiter inside its Wait.
TEST(CondVarCrowd, FreeMutexWakesAll) {
  Watchdog wd(kWatch, "FreeMutexWakesAll");
  for (int round = 0; round < 5; ++round) {
    size_t notified = 0;
    uint64_t by_notifier = 0;
    std::vector<uint64_t> u =
        Broadcast(80, /*held=*/false, &notified, &by_notifier);
    EXPECT_EQ(notified, 80u);
    EXPECT_EQ(by_notifier, 80u);
    EXPECT_EQ(*std::max_element(u.begin(), u.end()), 0u);
    u = Broadcast(32, /*held=*/false, &notified, &by_notifier);
    EXPECT_EQ(notified, 32u);
    EXPECT_EQ(by_notifier, 1u);
    EXPECT_EQ(*std::max_element(u.begin(), u.end()), 0u);
  }
}

// Stress: rounds of broadcasts to 40-100 waiters, some with timed waits
// that race the broadcast and the crowd's wake, while other threads lock
// and unlock the mutex (plain mutex waiters queued behind the crowd, where
// the crowd's wake must stop), and the notifier sometimes does not hold
// the mutex. A lost wake-up hangs a round: the deadline below, then the
// watchdog, fail the test.
TEST(CondVarCrowd, StressWithTimeoutsAndLockers) {
  Watchdog wd(absl::Seconds(240), "StressWithTimeoutsAndLockers");
#if defined(__SANITIZE_THREAD__)
  constexpr int kRounds = 15;
#else
  constexpr int kRounds = 150;
#endif
  constexpr int kMaxWaiters = 100;
  Mutex mu;
  CondVar cv;
  int gen = 0;       // under mu
  int passed = 0;    // under mu
  int64_t work = 0;  // under mu
  std::atomic<bool> stop{false};
  std::vector<std::thread> lockers;
  for (int i = 0; i < 3; ++i) {
    lockers.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        mu.Lock();
        ++work;
        mu.Unlock();
      }
    });
  }
  std::mt19937 rng(42);
  for (int round = 0; round < kRounds; ++round) {
    const int n = 40 + static_cast<int>(rng() % (kMaxWaiters - 40 + 1));
    const bool held = rng() % 4 != 0;
    const bool timed = rng() % 2 == 0;
    int my_gen;
    {
      mu.Lock();
      passed = 0;
      my_gen = gen;
      mu.Unlock();
    }
    std::vector<std::thread> t;
    std::atomic<int> started{0};
    for (int i = 0; i < n; ++i) {
      t.emplace_back([&, i] {
        mu.Lock();
        started.fetch_add(1);
        while (gen == my_gen) {
          if (timed && i % 3 == 0) {
            cv.WaitFor(mu, absl::Microseconds(50 + 37 * (i % 7)));
          } else {
            cv.Wait(mu);
          }
        }
        ++passed;
        mu.Unlock();
      });
    }
    while (started.load() < n) absl::SleepFor(absl::Microseconds(50));
    absl::SleepFor(absl::Microseconds(200 + rng() % 800));
    if (held) {
      mu.Lock();
      ++gen;
      cv.NotifyAll();
      mu.Unlock();
    } else {
      mu.Lock();
      ++gen;
      mu.Unlock();
      cv.NotifyAll();
    }
    const absl::Time end = absl::Now() + absl::Seconds(60);
    for (;;) {
      mu.Lock();
      const int p = passed;
      mu.Unlock();
      if (p == n) break;
      ASSERT_LT(absl::Now(), end) << "round " << round << ": " << p << " of "
                                  << n << " passed (lost wake-up?)";
      absl::SleepFor(absl::Microseconds(200));
    }
    for (auto& x : t) x.join();
  }
  stop.store(true);
  for (auto& x : lockers) x.join();
  mu.Lock();
  EXPECT_GT(work, 0);
  mu.Unlock();
}

}  // namespace
}  // namespace parklot::internal::testing
