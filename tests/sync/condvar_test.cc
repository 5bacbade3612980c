// Semantics of parklot::CondVar: waits and timeouts on both clocks, the std
// spellings, WaitAny with std::mutex, no stolen signal, broadcasts (wait
// morphing: requeue onto the mutex), timeouts while requeued, one condvar
// with different mutexes, and destruction right after the last waiter.
#include "sync/condvar.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "runtime/deadline.h"
#include "runtime/parking_lot.h"
#include "runtime/stats.h"
#include "runtime/thread_data.h"
#include "sync/mutex.h"
#include "tests/sync/sync_test_util.h"
#include "tests/util/watchdog.h"

namespace parklot::internal::testing {
namespace {

TEST(CondVarTest, TableIsAsBuilt) {
  Mutex mu;
  mu.Lock();
  mu.Unlock();
  EXPECT_TRUE(TableIsAsBuilt()) << DescribeConfig(GetConfig());
}

TEST(CondVarTest, LayoutAndConstantInit) {
  static_assert(sizeof(CondVar) == 8, "one word");
  static constinit CondVar global;
  EXPECT_FALSE(global.NotifyOne());
}

TEST(CondVarTest, NotifyWithoutWaitersIsANoOp) {
  CondVar cv;
  EXPECT_FALSE(cv.NotifyOne());
  EXPECT_EQ(cv.NotifyAll(), 0u);
  cv.notify_one();
  cv.notify_all();
}

TEST(CondVarTest, TimedWaitsTimeOutHoldingTheMutex) {
  Watchdog dog(absl::Seconds(30), "timed waits");
  Mutex mu;
  CondVar cv;
  mu.Lock();
  // Past deadlines, both clocks.
  const Deadline past[] = {
      Deadline::In(-absl::Seconds(1)), Deadline::In(absl::ZeroDuration()),
      Deadline::Realtime(absl::InfinitePast()),
      Deadline::Realtime(RealtimeNow() - absl::Seconds(1)),
      Deadline::Monotonic(absl::InfinitePast()),
      Deadline::Monotonic(MonotonicNow() - absl::Seconds(1))};
  for (const Deadline& d : past) {
    EXPECT_FALSE(cv.WaitUntil(mu, d));
    EXPECT_TRUE(mu.HeldByCurrentThread());
  }
  // Future deadlines: no earlier than the deadline on its own clock.
  const Deadline rt = Deadline::Realtime(RealtimeNow() + absl::Milliseconds(20));
  EXPECT_FALSE(cv.WaitUntil(mu, rt));
  EXPECT_GE(RealtimeNow(), rt.when());
  EXPECT_TRUE(mu.HeldByCurrentThread());
  const Deadline mono =
      Deadline::Monotonic(MonotonicNow() + absl::Milliseconds(20));
  EXPECT_FALSE(cv.WaitUntil(mu, mono));
  EXPECT_GE(MonotonicNow(), mono.when());
  EXPECT_TRUE(mu.HeldByCurrentThread());
  const absl::Time t0 = MonotonicNow();
  EXPECT_FALSE(cv.WaitFor(mu, absl::Milliseconds(20)));
  EXPECT_GE(MonotonicNow() - t0, absl::Milliseconds(20));
  EXPECT_TRUE(mu.HeldByCurrentThread());
  mu.Unlock();
  // The condvar is left with no waiters recorded.
  EXPECT_FALSE(cv.NotifyOne());
  EXPECT_EQ(cv.NotifyAll(), 0u);
}

TEST(CondVarTest, StdUniqueLockSpellings) {
  Watchdog dog(absl::Seconds(30), "std spellings");
  Mutex mu;
  CondVar cv;
  int stage = 0;  // guarded by mu
  std::thread t([&] {
    std::unique_lock<Mutex> l(mu);
    cv.wait(l, [&] { return stage == 1; });
    EXPECT_TRUE(mu.HeldByCurrentThread());
    stage = 2;
    cv.notify_all();
    while (stage != 3) cv.wait(l);
    stage = 4;
    cv.notify_one();
  });
  {
    std::unique_lock<Mutex> l(mu);
    EXPECT_EQ(cv.wait_for(l, std::chrono::milliseconds(1)),
              std::cv_status::timeout);
    EXPECT_TRUE(l.owns_lock());
    stage = 1;
    cv.notify_one();
    while (stage != 2) {
      cv.wait_for(l, std::chrono::seconds(1));
    }
    stage = 3;
    cv.notify_one();
    cv.wait(l, [&] { return stage == 4; });
  }
  t.join();
}

TEST(CondVarTest, WaitAnyWithStdMutex) {
  Watchdog dog(absl::Seconds(60), "WaitAny");
  std::mutex mu;
  CondVar cv;
  {
    std::unique_lock<std::mutex> l(mu);
    EXPECT_FALSE(cv.WaitAnyUntil(l, Deadline::In(absl::Milliseconds(5))));
    EXPECT_TRUE(l.owns_lock());
    EXPECT_FALSE(
        cv.WaitAnyUntil(l, Deadline::Realtime(absl::InfinitePast())));
    EXPECT_TRUE(l.owns_lock());
  }
  EXPECT_FALSE(cv.NotifyOne());
  // Producer / consumer through std::mutex.
  const int items = static_cast<int>(Scaled(20000, 500));
  std::vector<int> queue;  // guarded by mu
  int64_t consumed_sum = 0;
  std::thread consumer([&] {
    std::unique_lock<std::mutex> l(mu);
    for (int got = 0; got < items;) {
      while (queue.empty()) cv.WaitAny(l);
      for (int v : queue) consumed_sum += v;
      got += static_cast<int>(queue.size());
      queue.clear();
    }
  });
  for (int i = 0; i < items; ++i) {
    std::lock_guard<std::mutex> g(mu);
    queue.push_back(i);
    cv.NotifyOne();
  }
  consumer.join();
  EXPECT_EQ(consumed_sum, int64_t{items} * (items - 1) / 2);
  // Plain BasicLockable objects work too.
  std::mutex raw;
  raw.lock();
  EXPECT_FALSE(cv.WaitAnyUntil(raw, Deadline::In(absl::Milliseconds(1))));
  raw.unlock();
}

// A notify with one waiter parked must wake that waiter, not a thread that
// starts waiting after the notify (a "stolen" signal would leave the first
// one asleep forever).
TEST(CondVarTest, NotifyOneIsNotStolenByLaterWaiter) {
  Watchdog dog(absl::Seconds(120), "stolen signal");
  const int rounds = static_cast<int>(Scaled(300, 30));
  for (int round = 0; round < rounds; ++round) {
    // Alternate: notify holding the mutex (requeue path) or not (wake).
    const bool notify_locked = round % 2 == 0;
    Mutex mu;
    CondVar cv;
    int first_waiting = 0, second_waiting = 0;  // guarded by mu
    bool first_woke = false, second_woke = false;
    std::thread first([&] {
      mu.Lock();
      first_waiting = 1;
      cv.Wait(mu);  // exactly one Wait: no spurious return expected here
      first_woke = true;
      mu.Unlock();
    });
    // Once we hold mu after first_waiting was set, the first thread is
    // queued on cv (it queues before releasing mu).
    ASSERT_TRUE(Eventually([&] {
      std::lock_guard<Mutex> g(mu);
      return first_waiting == 1;
    }));
    // The second thread starts after the notify (the mutex held over both
    // if notify_locked).
    if (notify_locked) mu.Lock();
    EXPECT_TRUE(cv.NotifyOne());
    std::thread second([&] {
      mu.Lock();
      second_waiting = 1;
      while (!second_woke) cv.Wait(mu);
      mu.Unlock();
    });
    if (notify_locked) mu.Unlock();
    first.join();  // the watchdog catches a stolen signal
    {
      std::lock_guard<Mutex> g(mu);
      EXPECT_TRUE(first_woke);
    }
    ASSERT_TRUE(Eventually([&] {
      std::lock_guard<Mutex> g(mu);
      return second_waiting == 1;
    }));
    {
      std::lock_guard<Mutex> g(mu);
      second_woke = true;
      cv.NotifyAll();
    }
    second.join();
  }
}

// NotifyOne N times to N parked waiters wakes each exactly once.
TEST(CondVarTest, NotifyOnePerWaiterWakesEachOnce) {
  Watchdog dog(absl::Seconds(60), "NotifyOne each");
  constexpr int kWaiters = 16;
  for (const bool locked : {true, false}) {
    Mutex mu;
    CondVar cv;
    int waiting = 0;        // guarded by mu
    int tickets = 0;        // guarded by mu
    int woken = 0;          // guarded by mu
    std::vector<std::thread> threads;
    for (int i = 0; i < kWaiters; ++i) {
      threads.emplace_back([&] {
        mu.Lock();
        ++waiting;
        cv.Wait(mu);  // one Wait per notify: each returns once
        ++woken;
        --tickets;
        mu.Unlock();
      });
    }
    ASSERT_TRUE(Eventually([&] {
      std::lock_guard<Mutex> g(mu);
      return waiting == kWaiters;
    }));
    for (int i = 0; i < kWaiters; ++i) {
      if (locked) mu.Lock();
      EXPECT_TRUE(cv.NotifyOne());
      if (locked) mu.Unlock();
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(woken, kWaiters);
    EXPECT_FALSE(cv.NotifyOne());
  }
}

// NotifyAll to 32 parked waiters (the most that are requeued as a chain;
// more are a crowd: condvar_crowd_test): each is woken exactly once, in the
// order they waited, and the mutex is handed through them (wait morphing):
// none of them parks a second time.
TEST(CondVarTest, NotifyAllRequeuesAndHandsTheMutexThroughAllWaiters) {
  Watchdog dog(absl::Seconds(120), "NotifyAll 32");
  constexpr int kWaiters = static_cast<int>(kWakeSerialMax);
  for (const bool locked : {true, false}) {
    SCOPED_TRACE(locked ? "NotifyAll holding the mutex"
                        : "NotifyAll with the mutex free");
    Mutex mu;
    CondVar cv;
    std::vector<int> wait_order, wake_order;  // guarded by mu
    int generation = 0;                       // guarded by mu
    std::atomic<int> extra_parks{0}, spurious{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < kWaiters; ++i) {
      threads.emplace_back([&, i] {
        ThreadData* td = CurrentThreadData();
        mu.Lock();
        wait_order.push_back(i);
        const uint64_t parks_before = td->counters.parks.load();
        cv.Wait(mu);
        const uint64_t parks = td->counters.parks.load() - parks_before;
        if (generation != 1) spurious.fetch_add(1);
        if (parks != 1) extra_parks.fetch_add(1);
        wake_order.push_back(i);
        mu.Unlock();
      });
    }
    ASSERT_TRUE(Eventually([&] {
      std::lock_guard<Mutex> g(mu);
      return wait_order.size() == kWaiters;
    }));
    mu.Lock();
    generation = 1;
    if (!locked) mu.Unlock();
    EXPECT_EQ(cv.NotifyAll(), static_cast<size_t>(kWaiters));
    if (locked) mu.Unlock();
    for (auto& t : threads) t.join();
    EXPECT_EQ(spurious.load(), 0);
    EXPECT_EQ(extra_parks.load(), 0)
        << "woken waiters parked again on the mutex: no hand-through";
    EXPECT_EQ(wake_order, wait_order);
    EXPECT_EQ(cv.NotifyAll(), 0u);
    EXPECT_TRUE(mu.TryLock());
    mu.Unlock();
  }
}

// The broadcast chain (waiters requeued onto the mutex, each unlock waking
// the next) under stress: rounds of many waiters broadcast to while
// holding the mutex, random delays inside and outside the lock, and
// barging threads taking the mutex meanwhile. Every waiter wakes exactly
// once per round, the mutex stays exclusive, and no wake-up is lost (the
// watchdog).
TEST(CondVarTest, BroadcastChainTorture) {
  Watchdog dog(absl::Seconds(150), "broadcast chain torture");
  constexpr int kWaiters = 24;
  constexpr int kBargers = 3;
  const int rounds = static_cast<int>(Scaled(150, 10));
  Mutex mu;
  CondVar cv;
  CondVar all_waiting;  // the broadcaster's own condvar
  int round = 0;      // guarded by mu
  int waiting = 0;    // guarded by mu
  int woken = 0;      // guarded by mu
  bool inside = false;  // guarded by mu
  std::atomic<int> overlaps{0}, wrong_round{0};
  std::atomic<bool> stop{false};
  auto delay = [](Rng& rng) {
    const uint64_t r = rng.Next() % 16;
    if (r < 2) {
      std::this_thread::yield();
    } else if (r < 4) {
      std::atomic<int> n{0};
      while (n.fetch_add(1, std::memory_order_relaxed) < 2000) {
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      Rng rng(i + 1);
      for (int r = 1; r <= rounds; ++r) {
        mu.Lock();
        ++waiting;
        all_waiting.NotifyOne();
        while (round < r) cv.Wait(mu);
        if (inside) overlaps.fetch_add(1);
        inside = true;
        if (round != r) wrong_round.fetch_add(1);
        ++woken;
        delay(rng);
        inside = false;
        mu.Unlock();
        delay(rng);
      }
    });
  }
  for (int i = 0; i < kBargers; ++i) {
    threads.emplace_back([&, i] {
      Rng rng(1000 + i);
      while (!stop.load(std::memory_order_relaxed)) {
        mu.Lock();
        if (inside) overlaps.fetch_add(1);
        inside = true;
        delay(rng);
        inside = false;
        mu.Unlock();
        delay(rng);
      }
    });
  }
  for (int r = 1; r <= rounds; ++r) {
    mu.Lock();
    while (waiting < kWaiters * r) all_waiting.Wait(mu);
    round = r;
    cv.NotifyAll();  // holding the mutex: the waiters are requeued
    mu.Unlock();
  }
  mu.Lock();
  while (woken < kWaiters * rounds) {
    mu.Unlock();
    std::this_thread::yield();
    mu.Lock();
  }
  mu.Unlock();
  stop.store(true);
  for (auto& t : threads) t.join();
  EXPECT_EQ(woken, kWaiters * rounds);
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(wrong_round.load(), 0);
  EXPECT_TRUE(mu.TryLock());
  mu.Unlock();
}

// Broadcast while the mutex is free, the first woken waiter re-locking at
// once (and holding it, and others barging in): every waiter still wakes.
TEST(CondVarTest, BroadcastWithMutexFreeAndImmediatelyRelockedWakesAll) {
  Watchdog dog(absl::Seconds(120), "broadcast unlocked");
  constexpr int kWaiters = 12;
  const int rounds = static_cast<int>(Scaled(200, 20));
  for (int round = 0; round < rounds; ++round) {
    Mutex mu;
    CondVar cv;
    int waiting = 0;  // guarded by mu
    bool go = false;  // guarded by mu
    int woken = 0;    // guarded by mu
    std::vector<std::thread> threads;
    for (int i = 0; i < kWaiters; ++i) {
      threads.emplace_back([&, round] {
        mu.Lock();
        ++waiting;
        while (!go) cv.Wait(mu);
        if (++woken == 1) {
          // The first one keeps the mutex a while: the others queue behind.
          mu.Unlock();
          mu.Lock();
          if (round % 3 == 0) std::this_thread::yield();
        }
        mu.Unlock();
      });
    }
    ASSERT_TRUE(Eventually([&] {
      std::lock_guard<Mutex> g(mu);
      return waiting == kWaiters;
    }));
    mu.Lock();
    go = true;
    mu.Unlock();
    EXPECT_EQ(cv.NotifyAll(), static_cast<size_t>(kWaiters));
    // Barge on the mutex right away, the way a busy program would.
    switch (round % 3) {
      case 0:
        break;
      case 1:
        for (int i = 0; i < 100; ++i) {
          mu.Lock();
          mu.Unlock();
        }
        break;
      case 2:
        for (int i = 0; i < 100; ++i) {
          if (mu.TryLock()) mu.Unlock();
        }
        break;
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(woken, kWaiters);
  }
}

// A waiter whose timed wait expires after NotifyAll moved it onto the
// mutex's queue: it leaves that queue, waits for the mutex like any
// locker, and returns holding it (and reports a wake-up, not a timeout).
TEST(CondVarTest, TimedWaitTimesOutWhileRequeuedOntoMutex) {
  Watchdog dog(absl::Seconds(60), "timeout while requeued");
  for (const bool notify_all : {true, false}) {
    Mutex mu;
    CondVar cv;
    ThreadRef waiter;
    bool waiting = false;         // guarded by mu
    bool main_released = false;   // guarded by mu
    std::atomic<int> result{-1};
    std::atomic<bool> held_after{false};
    std::thread t([&] {
      waiter.Publish();
      mu.Lock();
      waiting = true;
      const bool r = cv.WaitFor(mu, absl::Milliseconds(50));
      held_after = mu.HeldByCurrentThread();
      result = r ? 1 : 0;
      EXPECT_TRUE(main_released) << "returned while main held the mutex";
      mu.Unlock();
    });
    ASSERT_TRUE(Eventually([&] {
      std::lock_guard<Mutex> g(mu);
      return waiting;
    }));
    mu.Lock();
    const uint64_t timeouts_before = waiter.timeouts();
    // The mutex is held, so the waiter is requeued onto it, not woken.
    if (notify_all) {
      EXPECT_EQ(cv.NotifyAll(), 1u);
    } else {
      EXPECT_TRUE(cv.NotifyOne());
    }
    // Its deadline passes while it sits in the mutex's queue.
    ASSERT_TRUE(Eventually([&] { return waiter.timeouts() > timeouts_before; }));
    EXPECT_EQ(result.load(), -1);
    main_released = true;
    mu.Unlock();
    t.join();
    EXPECT_TRUE(held_after);
    EXPECT_EQ(result.load(), 1);
    EXPECT_FALSE(cv.NotifyOne());
    // The mutex is sound afterwards.
    EXPECT_TRUE(mu.TryLock());
    mu.Unlock();
  }
}

// Many timed waiters, timeouts racing notifies and requeues.
TEST(CondVarTest, TimeoutsRacingNotifies) {
  Watchdog dog(absl::Seconds(120), "timeouts vs notifies");
  constexpr int kWaiters = 8;
  Mutex mu;
  CondVar cv;
  int64_t tokens = 0;  // guarded by mu
  int64_t taken = 0;   // guarded by mu
  std::atomic<int> inside{0}, violations{0};
  std::atomic<bool> stop{false};
  const int64_t produce = Scaled(100000, 2000);
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      Rng rng(i + 7);
      mu.Lock();
      while (!stop.load(std::memory_order_relaxed) || tokens > 0) {
        if (tokens > 0) {
          --tokens;
          ++taken;
          continue;
        }
        if (stop.load(std::memory_order_relaxed)) break;
        const Deadline d =
            rng.Below(2) ? Deadline::In(absl::Microseconds(rng.Below(300)))
                         : Deadline::Realtime(RealtimeNow() +
                                              absl::Microseconds(rng.Below(300)));
        cv.WaitUntil(mu, d);
        if (!mu.HeldByCurrentThread()) violations.fetch_add(1);
        if (inside.fetch_add(1) != 0) violations.fetch_add(1);
        inside.fetch_sub(1);
      }
      mu.Unlock();
    });
  }
  Rng rng(99);
  for (int64_t i = 0; i < produce; ++i) {
    const uint32_t how = rng.Below(4);
    if (how == 0) {
      mu.Lock();
      ++tokens;
      cv.NotifyAll();
      mu.Unlock();
    } else if (how == 1) {
      mu.Lock();
      ++tokens;
      mu.Unlock();
      cv.NotifyOne();
    } else {
      mu.Lock();
      ++tokens;
      cv.NotifyOne();
      mu.Unlock();
    }
  }
  mu.Lock();
  stop = true;
  cv.NotifyAll();
  mu.Unlock();
  for (auto& t : threads) t.join();
  EXPECT_EQ(violations.load(), 0);
  EXPECT_EQ(taken, produce);
  EXPECT_EQ(tokens, 0);
}

// After a test's threads are done with them, both mutexes are sound: free,
// and each can be taken.
void ExpectFree(Mutex& a, Mutex& b) {
  EXPECT_TRUE(a.TryLock());
  EXPECT_TRUE(b.TryLock());
  a.Unlock();
  b.Unlock();
}

// One condvar, used with one mutex, then another, then both at once.
TEST(CondVarTest, DifferentMutexesOverTime) {
  Watchdog dog(absl::Seconds(60), "different mutexes");
  CondVar cv;
  Mutex m1, m2;
  auto run_phase = [&](std::vector<Mutex*> mus, bool notify_all) {
    const int per = 4;
    int waiting = 0;  // guarded by a std::mutex below
    std::mutex count_mu;
    std::vector<int> go(mus.size(), 0);  // go[i] guarded by *mus[i]
    std::vector<std::thread> threads;
    for (size_t m = 0; m < mus.size(); ++m) {
      for (int i = 0; i < per; ++i) {
        threads.emplace_back([&, m] {
          mus[m]->Lock();
          {
            std::lock_guard<std::mutex> g(count_mu);
            ++waiting;
          }
          while (!go[m]) cv.Wait(*mus[m]);
          mus[m]->Unlock();
        });
      }
    }
    const int total = static_cast<int>(mus.size()) * per;
    ASSERT_TRUE(Eventually([&] {
      std::lock_guard<std::mutex> g(count_mu);
      return waiting == total;
    }));
    // Each waiter queued before it released its mutex: once we have held
    // every mutex after the count was complete, all are on the condvar.
    for (Mutex* m : mus) {
      m->Lock();
      m->Unlock();
    }
    for (size_t m = 0; m < mus.size(); ++m) {
      mus[m]->Lock();
      go[m] = 1;
      mus[m]->Unlock();
    }
    if (notify_all) {
      EXPECT_EQ(cv.NotifyAll(), static_cast<size_t>(total));
    } else {
      for (int i = 0; i < total; ++i) EXPECT_TRUE(cv.NotifyOne());
    }
    for (auto& t : threads) t.join();
    EXPECT_FALSE(cv.NotifyOne());
  };
  for (int rep = 0; rep < 3; ++rep) {
    run_phase({&m1}, true);
    run_phase({&m2}, true);
    run_phase({&m1}, false);
    run_phase({&m2}, false);
    run_phase({&m1, &m2}, true);
    run_phase({&m1, &m2}, false);
    run_phase({&m2}, true);
  }
  ExpectFree(m1, m2);
}

// The condvar switches mutexes while waiters of the old one still sit in
// that mutex's queue (requeued, not yet woken), and while some still wait
// on the condvar itself.
TEST(CondVarTest, SwitchesMutexWhileOldWaitersAreRequeued) {
  Watchdog dog(absl::Seconds(60), "mutex switch during requeue");
  for (const bool notify_one_first : {false, true}) {
    CondVar cv;
    Mutex m1, m2;
    constexpr int kPer = 3;
    int waiting1 = 0, waiting2 = 0;  // guarded by m1 / m2
    bool go1 = false, go2 = false;   // guarded by m1 / m2
    std::atomic<int> done{0};
    std::vector<std::thread> threads;
    // kPer waiters on cv with `m` until `go`; true once all have counted
    // themselves in `waiting`.
    auto add_waiters = [&](Mutex& m, int& waiting, bool& go) {
      for (int i = 0; i < kPer; ++i) {
        threads.emplace_back([&] {
          m.Lock();
          ++waiting;
          while (!go) cv.Wait(m);
          m.Unlock();
          done.fetch_add(1);
        });
      }
      return Eventually([&] {
        std::lock_guard<Mutex> g(m);
        return waiting == kPer;
      });
    };
    ASSERT_TRUE(add_waiters(m1, waiting1, go1));
    m1.Lock();
    go1 = true;
    if (notify_one_first) {
      EXPECT_TRUE(cv.NotifyOne());  // one requeued onto m1, two still on cv
    } else {
      EXPECT_EQ(cv.NotifyAll(), static_cast<size_t>(kPer));  // all on m1
    }
    // m1 stays held: its waiters cannot leave. Now waiters of m2 arrive.
    ASSERT_TRUE(add_waiters(m2, waiting2, go2));
    m2.Lock();
    go2 = true;
    const size_t notified = cv.NotifyAll();
    EXPECT_EQ(notified, notify_one_first ? static_cast<size_t>(kPer + 2)
                                         : static_cast<size_t>(kPer));
    EXPECT_EQ(done.load(), 0);
    m2.Unlock();
    EXPECT_TRUE(Eventually([&] { return done.load() == kPer; }));
    m1.Unlock();
    for (auto& t : threads) t.join();
    EXPECT_EQ(done.load(), 2 * kPer);
    EXPECT_FALSE(cv.NotifyOne());
    ExpectFree(m1, m2);
  }
}

// Same condvar used with std::mutex (WaitAny) and parklot::Mutex (Wait) at
// the same time: notifications still reach everybody.
TEST(CondVarTest, WaitAndWaitAnyMixed) {
  Watchdog dog(absl::Seconds(60), "Wait + WaitAny");
  CondVar cv;
  Mutex pm;
  std::mutex sm;
  bool go_p = false;  // guarded by pm
  bool go_s = false;  // guarded by sm
  std::atomic<int> waiting{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      pm.Lock();
      waiting.fetch_add(1);
      while (!go_p) cv.Wait(pm);
      pm.Unlock();
    });
    threads.emplace_back([&] {
      std::unique_lock<std::mutex> l(sm);
      waiting.fetch_add(1);
      while (!go_s) cv.WaitAny(l);
    });
  }
  ASSERT_TRUE(Eventually([&] { return waiting.load() == 8; }));
  pm.Lock();
  go_p = true;
  pm.Unlock();
  {
    std::lock_guard<std::mutex> g(sm);
    go_s = true;
  }
  // Some may not be queued yet; repeat until everybody is out.
  std::atomic<bool> done{false};
  std::thread joiner([&] {
    for (auto& t : threads) t.join();
    done = true;
  });
  while (!done) {
    cv.NotifyAll();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  joiner.join();
}

// Thread cancellation (the shim makes Wait a cancellation point through
// CancellationPoint): a waiter cancelled after a NotifyOne moved it onto the
// mutex's queue had consumed that notification; POSIX says a cancelled
// waiter must not consume a signal while others are blocked, so it has to
// pass it on. Before the fix only a waiter already unparked passed it on,
// and the second waiter here slept forever.
struct CancelCtx {
  Mutex mu;
  CondVar cv;
  ThreadRef ref;
  int waiting = 0;  // guarded by mu
  bool go = false;  // guarded by mu
  std::atomic<bool> relocked_on_unwind{false};
  bool timed = false;  // wait with WaitFor(50 ms) instead of Wait
};

void* CancellableWaiter(void* arg) {
  auto* c = static_cast<CancelCtx*>(arg);
  c->ref.Publish();
  CancellationPoint cancellation_point;
  c->mu.Lock();
  // Runs during the cancellation's unwinding: the mutex must be held again.
  struct Unlocker {
    CancelCtx* c;
    ~Unlocker() {
      const bool held = c->mu.HeldByCurrentThread();
      c->relocked_on_unwind.store(held);
      // Unlocking a mutex another thread holds would break the test's
      // other checks: record the failure only.
      if (held) c->mu.Unlock();
    }
  } unlocker{c};
  ++c->waiting;
  while (!c->go) {
    if (c->timed) {
      c->cv.WaitFor(c->mu, absl::Milliseconds(50));
    } else {
      c->cv.Wait(c->mu);
    }
  }
  return nullptr;
}

// Starts CancellableWaiter on `ctx` as `*victim` and waits until it waits
// on the condvar.
void StartVictim(CancelCtx* ctx, pthread_t* victim) {
  ASSERT_EQ(pthread_create(victim, nullptr, CancellableWaiter, ctx), 0);
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<Mutex> g(ctx->mu);
    return ctx->waiting == 1;
  }));
}

TEST(CondVarTest, CancelledWhileRequeuedPassesTheNotificationOn) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer does not support pthread_cancel's unwind";
#endif
  Watchdog dog(absl::Seconds(60), "cancelled while requeued");
  CancelCtx ctx;
  pthread_t victim;
  ASSERT_NO_FATAL_FAILURE(StartVictim(&ctx, &victim));
  // The second waiter queues behind the victim.
  std::atomic<bool> second_done{false};
  std::thread second([&] {
    ctx.mu.Lock();
    ++ctx.waiting;
    while (!ctx.go) ctx.cv.Wait(ctx.mu);
    ctx.mu.Unlock();
    second_done = true;
  });
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<Mutex> g(ctx.mu);
    return ctx.waiting == 2;
  }));
  ctx.mu.Lock();
  ctx.go = true;
  // Held mutex: the victim (first in line) is requeued onto it, not woken.
  ASSERT_TRUE(ctx.cv.NotifyOne());
  const uint64_t parks_before = ctx.ref.parks();
  ASSERT_EQ(pthread_cancel(victim), 0);
  // The victim leaves the mutex's queue and parks again in the mutex's
  // Lock (to hold it before its cleanups run), while we still hold it.
  ASSERT_TRUE(Eventually(
      [&] { return ctx.ref.parks() > parks_before && ctx.ref.parked(); }));
  ctx.mu.Unlock();
  void* result = nullptr;
  ASSERT_EQ(pthread_join(victim, &result), 0);
  EXPECT_EQ(result, PTHREAD_CANCELED);
  EXPECT_TRUE(ctx.relocked_on_unwind.load());
  // The notification the victim consumed reaches the second waiter.
  const bool woke = Eventually([&] { return second_done.load(); });
  EXPECT_TRUE(woke) << "the cancelled waiter swallowed the notification";
  if (!woke) {
    std::lock_guard<Mutex> g(ctx.mu);
    ctx.cv.NotifyAll();
  }
  second.join();
}

// pthread_mutex_lock is no cancellation point, and neither is the relock
// inside a condition wait: a waiter whose wait has ended (here: timed out)
// and that parks again to re-take the mutex must not be cancelled out of
// that park, or its cleanup handlers run without the mutex (and unlock a
// mutex another thread holds). Before the fix the relock's park ran in
// asynchronous cancellation mode.
TEST(CondVarTest, RelockAfterWakeIsNoCancellationPoint) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer does not support pthread_cancel's unwind";
#endif
  Watchdog dog(absl::Seconds(60), "cancel during relock");
  CancelCtx ctx;
  ctx.timed = true;
  pthread_t victim;
  ASSERT_NO_FATAL_FAILURE(StartVictim(&ctx, &victim));
  // Hold the mutex while the victim's 50 ms wait times out: it then parks
  // on the mutex to re-take it.
  ctx.mu.Lock();
  const uint64_t parks_before = ctx.ref.parks();
  ASSERT_TRUE(Eventually([&] {
    return ctx.ref.timeouts() > 0 && ctx.ref.parks() > parks_before &&
           ctx.ref.parked();
  }));
  ASSERT_EQ(pthread_cancel(victim), 0);
  // Give a (wrongly) cancellable relock time to unwind.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(ctx.mu.HeldByCurrentThread());
  ctx.mu.Unlock();
  void* result = nullptr;
  ASSERT_EQ(pthread_join(victim, &result), 0);
  EXPECT_EQ(result, PTHREAD_CANCELED);
  EXPECT_TRUE(ctx.relocked_on_unwind.load())
      << "cleanup ran without the mutex: the relock was cancelled";
  EXPECT_TRUE(ctx.mu.TryLock());
  ctx.mu.Unlock();
}

// The condvar and the mutex live in one heap object that the last waiter
// to return destroys, poisons and frees: the notifier, still inside its
// notify or its unlock, must not touch either any more.
struct Rendezvous {
  Mutex mu;
  CondVar cv;
  int waiting = 0;  // guarded by mu
  int left = 0;     // guarded by mu
  bool go = false;  // guarded by mu
};

TEST(CondVarTest, DestroyedAndPoisonedRightAfterLastWaiterReturns) {
  Watchdog dog(absl::Seconds(240), "destroy after last waiter");
  constexpr int kWaiters = 3;
  const int rounds = static_cast<int>(Scaled(20000, 500));
  std::atomic<Rendezvous*> current{nullptr};
  std::atomic<int> published{-1};  // the round `current` belongs to
  std::atomic<int> finished{0};    // participants done, over all rounds
  std::atomic<bool> stop{false};
  // Returns the next round's object, or nullptr once stopped.
  auto next = [&](int round) -> Rendezvous* {
    while (published.load() < round) {
      if (stop.load()) return nullptr;
      std::this_thread::yield();
    }
    return current.load();
  };
  std::vector<std::thread> threads;
  ThreadRef refs[kWaiters + 1];
  // Waiters: the last to leave frees the object.
  for (int w = 0; w < kWaiters; ++w) {
    threads.emplace_back([&, w] {
      Rng rng(w + 3);
      for (int round = 0;; ++round) {
        Rendezvous* r = next(round);
        if (r == nullptr) return;
        r->mu.Lock();
        if (!refs[w].published()) refs[w].Publish();
        ++r->waiting;
        while (!r->go) {
          if (rng.Below(4) == 0) {
            r->cv.WaitFor(r->mu, absl::Microseconds(rng.Below(200)));
          } else {
            r->cv.Wait(r->mu);
          }
        }
        // Pass the wake-up on (for NotifyOne rounds).
        r->cv.NotifyOne();
        const bool last = --r->left == 0;
        r->mu.Unlock();
        if (last) DestroyPoisonFree(r);
        finished.fetch_add(1);
      }
    });
  }
  // The notifier.
  threads.emplace_back([&] {
    for (int round = 0;; ++round) {
      Rendezvous* r = next(round);
      if (r == nullptr) return;
      // Half of the rounds, notify only once every waiter is parked.
      const bool wait_all = round % 2 == 0;
      for (;;) {
        r->mu.Lock();
        if (!refs[kWaiters].published()) refs[kWaiters].Publish();
        if (!wait_all || r->waiting == kWaiters) break;
        r->mu.Unlock();
        std::this_thread::yield();
      }
      r->go = true;
      if (round % 4 < 2) {
        r->cv.NotifyAll();
      } else {
        r->cv.NotifyOne();
      }
      // From here the waiters may free *r as soon as we release it.
      if (round % 3 == 0) {
        r->mu.UnlockFair();
      } else {
        r->mu.Unlock();
      }
      finished.fetch_add(1);
    }
  });
  for (int round = 0; round < rounds; ++round) {
    Rendezvous* r = MallocNew<Rendezvous>();
    r->left = kWaiters;
    current.store(r);
    published.store(round);
    if (!Eventually(
            [&] { return finished.load() == (round + 1) * (kWaiters + 1); },
            absl::Seconds(60))) {
      // Nobody freed r yet (not everyone finished): show its state.
      uint32_t word;
      std::memcpy(&word, &r->mu, sizeof(word));
      uintptr_t cvword;
      std::memcpy(&cvword, &r->cv, sizeof(cvword));
      std::fprintf(stderr, "mutex word %#x (mutex at %p), cv word %#lx\n",
                   word, static_cast<void*>(&r->mu),
                   static_cast<unsigned long>(cvword));
      for (int i = 0; i <= kWaiters; ++i) {
        if (!refs[i].published()) {
          std::fprintf(stderr, "thread %d: not yet published\n", i);
          continue;
        }
        std::fprintf(stderr, "thread %d (%s): slot %u parked %d, parks %llu\n",
                     i, i == kWaiters ? "notifier" : "waiter",
                     refs[i].td()->slot, refs[i].parked() ? 1 : 0,
                     static_cast<unsigned long long>(refs[i].parks()));
      }
      const bool free = r->mu.TryLock();
      std::fprintf(stderr,
                   "HANG in round %d (finished %d of %d): mutex %s, waiting %d, "
                   "left %d, go %d, cv NotifyOne -> %d\n%s\n",
                   round, finished.load() - round * (kWaiters + 1),
                   kWaiters + 1, free ? "free" : "held", r->waiting, r->left,
                   r->go ? 1 : 0, free ? static_cast<int>(r->cv.NotifyOne()) : -1,
                   FormatStats(GetStats()).c_str());
      std::abort();
    }
  }
  stop = true;
  for (auto& t : threads) t.join();
}

}  // namespace
}  // namespace parklot::internal::testing
