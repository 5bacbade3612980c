// Semantics of parklot::Mutex, RecursiveMutex and ErrorCheckingMutex: every
// error code, timed locks on both clocks, the std adapters, UnlockFair
// handoff and eventual fairness against barging.
#include "sync/mutex.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>
#include <type_traits>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "runtime/deadline.h"
#include "runtime/stats.h"
#include "runtime/thread_data.h"
#include "sync/scheduling.h"
#include "tests/sync/sync_test_util.h"
#include "tests/util/watchdog.h"

namespace parklot::internal::testing {
namespace {

// Runs `fn` on a new thread and joins it.
template <typename Fn>
void OnOtherThread(Fn fn) {
  std::thread t(fn);
  t.join();
}

// ---------------------------------------------------------------------------
// Mutex

TEST(MutexTest, LayoutAndConstantInit) {
  static_assert(sizeof(Mutex) == 12,
                "a Mutex is its word plus its MutexMeta (spin EMA, holder)");
  static constinit Mutex global;  // constexpr constructor
  global.Lock();
  EXPECT_TRUE(global.HeldByCurrentThread());
  global.Unlock();
  EXPECT_FALSE(global.HeldByCurrentThread());
}

TEST(MutexTest, LockTryLockUnlock) {
  Watchdog dog(absl::Seconds(30), "MutexTest.LockTryLockUnlock");
  Mutex mu;
  EXPECT_FALSE(mu.HeldByCurrentThread());
  mu.Lock();
  EXPECT_TRUE(mu.HeldByCurrentThread());
  mu.AssertHeld();
  EXPECT_FALSE(mu.TryLock());  // not recursive
  OnOtherThread([&] {
    EXPECT_FALSE(mu.TryLock());
    EXPECT_FALSE(mu.HeldByCurrentThread());
    EXPECT_FALSE(mu.LockFor(absl::ZeroDuration()));
  });
  mu.Unlock();
  EXPECT_FALSE(mu.HeldByCurrentThread());
  OnOtherThread([&] {
    EXPECT_TRUE(mu.TryLock());
    EXPECT_TRUE(mu.HeldByCurrentThread());
    mu.Unlock();
  });
  EXPECT_TRUE(mu.TryLock());
  mu.Unlock();
}

TEST(MutexTest, UnlockedByOtherThreadThanFirstUser) {
  Watchdog dog(absl::Seconds(30), "MutexTest.UnlockedByOtherThreadThanFirstUser");
  // A thread that never used parklot before (not registered) sees the lock
  // as not its own.
  Mutex mu;
  mu.Lock();
  OnOtherThread([&] { EXPECT_FALSE(mu.HeldByCurrentThread()); });
  mu.Unlock();
}

TEST(MutexTest, AssertHeldDiesWhenNotHeld) {
  Mutex mu;
  EXPECT_DEATH(mu.AssertHeld(), "not held");
}

TEST(MutexTest, ZeroFilledWordsAreAnUnlockedMutex) {
  alignas(8) unsigned char raw[sizeof(Mutex)];
  std::memset(raw, 0, sizeof(raw));
  std::atomic<uint32_t>* word = reinterpret_cast<std::atomic<uint32_t>*>(raw);
  MutexMeta* meta = reinterpret_cast<MutexMeta*>(raw + 4);
  ASSERT_TRUE(MutexCore::TryLock(word, meta));
  // glibc's value for "locked, no waiters"; the holder beside the word.
  EXPECT_EQ(word->load(), 1u);
  EXPECT_EQ(meta->owner.load(), CurrentSlot());
  MutexCore::Unlock(word, meta);
  EXPECT_EQ(word->load(), 0u);
  EXPECT_EQ(meta->owner.load(), 0u);
  MutexCore::Lock(word, meta);
  EXPECT_TRUE(MutexCore::HeldByCurrentThread(word, meta));
  MutexCore::Unlock(word, meta);
  EXPECT_EQ(word->load(), 0u);
}

// Timed locks: a free lock is taken whatever the deadline (POSIX: timedlock
// never fails if the lock can be taken at once).
TEST(MutexTest, TimedLockOfFreeMutexSucceedsEvenWithPastDeadline) {
  Mutex mu;
  const Deadline deadlines[] = {
      Deadline::Never(),
      Deadline::In(absl::Seconds(-1)),
      Deadline::Realtime(absl::InfinitePast()),
      Deadline::Realtime(absl::UnixEpoch()),
      Deadline::Realtime(RealtimeNow() - absl::Hours(1)),
      Deadline::Monotonic(absl::InfinitePast()),
      Deadline::Monotonic(MonotonicNow() - absl::Seconds(1)),
      Deadline::Monotonic(absl::UnixEpoch()),
      Deadline::Realtime(RealtimeNow() + absl::Hours(1)),
  };
  for (const Deadline& d : deadlines) {
    ASSERT_TRUE(mu.LockUntil(d));
    EXPECT_TRUE(mu.HeldByCurrentThread());
    mu.Unlock();
  }
  EXPECT_TRUE(mu.LockFor(absl::ZeroDuration()));
  mu.Unlock();
  EXPECT_TRUE(mu.LockFor(-absl::Seconds(5)));
  mu.Unlock();
  EXPECT_TRUE(mu.LockFor(absl::InfiniteDuration()));
  mu.Unlock();
}

TEST(MutexTest, TimedLockOfHeldMutexWithPastDeadlineFailsPromptly) {
  Watchdog dog(absl::Seconds(30), "past deadlines");
  Mutex mu;
  mu.Lock();
  OnOtherThread([&] {
    const Deadline deadlines[] = {
        Deadline::In(absl::ZeroDuration()),
        Deadline::In(-absl::Seconds(1)),
        Deadline::Realtime(absl::InfinitePast()),
        Deadline::Realtime(absl::UnixEpoch()),
        Deadline::Realtime(RealtimeNow() - absl::Hours(1)),
        Deadline::Monotonic(absl::InfinitePast()),
        Deadline::Monotonic(absl::UnixEpoch()),
        Deadline::Monotonic(MonotonicNow() - absl::Seconds(1)),
    };
    for (int rep = 0; rep < 3; ++rep) {
      for (const Deadline& d : deadlines) {
        EXPECT_FALSE(mu.LockUntil(d));
        EXPECT_FALSE(mu.HeldByCurrentThread());
      }
      EXPECT_FALSE(mu.LockFor(absl::ZeroDuration()));
      EXPECT_FALSE(mu.LockFor(-absl::Hours(1)));
      EXPECT_FALSE(mu.try_lock_for(std::chrono::nanoseconds(0)));
      EXPECT_FALSE(mu.try_lock_for(std::chrono::seconds(-3)));
      EXPECT_FALSE(
          mu.try_lock_until(std::chrono::steady_clock::now() -
                            std::chrono::seconds(1)));
      EXPECT_FALSE(
          mu.try_lock_until(std::chrono::system_clock::now() -
                            std::chrono::seconds(1)));
    }
  });
  // The failed waiters left no trace: unlocking and relocking still work.
  mu.Unlock();
  OnOtherThread([&] {
    EXPECT_TRUE(mu.TryLock());
    mu.Unlock();
  });
}

TEST(MutexTest, TimedLockTimesOutNoEarlierThanItsDeadlineOnEitherClock) {
  Watchdog dog(absl::Seconds(30), "timed lock");
  Mutex mu;
  mu.Lock();
  OnOtherThread([&] {
    const Deadline rt = Deadline::Realtime(RealtimeNow() + absl::Milliseconds(30));
    EXPECT_FALSE(mu.LockUntil(rt));
    EXPECT_GE(RealtimeNow(), rt.when());

    const Deadline mono =
        Deadline::Monotonic(MonotonicNow() + absl::Milliseconds(30));
    EXPECT_FALSE(mu.LockUntil(mono));
    EXPECT_GE(MonotonicNow(), mono.when());

    const absl::Time before = MonotonicNow();
    EXPECT_FALSE(mu.LockFor(absl::Milliseconds(30)));
    EXPECT_GE(MonotonicNow() - before, absl::Milliseconds(30));

    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_FALSE(mu.try_lock_for(std::chrono::milliseconds(30)));
    EXPECT_GE(std::chrono::steady_clock::now() - t0,
              std::chrono::milliseconds(30));

    const auto until =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(30);
    EXPECT_FALSE(mu.try_lock_until(until));
    EXPECT_GE(std::chrono::steady_clock::now(), until);
  });
  mu.Unlock();
}

// A timed waiter that gives up while it is the only parked thread must
// clear the parked bit: otherwise every later unlock takes the slow path.
TEST(MutexTest, LastTimedOutWaiterClearsParkedBit) {
  Watchdog dog(absl::Seconds(30), "MutexTest.LastTimedOutWaiterClearsParkedBit");
  std::atomic<uint32_t> word{0};
  MutexMeta meta;
  MutexCore::Lock(&word, &meta);
  OnOtherThread([&] {
    EXPECT_FALSE(MutexCore::Lock(
        &word, &meta, Deadline::In(absl::Milliseconds(20))));
  });
  EXPECT_EQ(word.load(), MutexCore::kLocked);
  EXPECT_TRUE(MutexCore::HeldByCurrentThread(&word, &meta));
  MutexCore::Unlock(&word, &meta);
  EXPECT_EQ(word.load(), 0u);
}

// A timed waiter that the owner's unlock wakes before its deadline gets the
// lock (both clocks).
TEST(MutexTest, TimedLockAcquiresWhenReleasedBeforeDeadline) {
  Watchdog dog(absl::Seconds(60), "timed acquire");
  for (const clockid_t clock : {CLOCK_MONOTONIC, CLOCK_REALTIME}) {
    Mutex mu;
    mu.Lock();
    ThreadRef waiter;
    std::atomic<bool> got{false};
    std::thread t([&] {
      waiter.Publish();
      const absl::Time base =
          clock == CLOCK_REALTIME ? RealtimeNow() : MonotonicNow();
      const Deadline d{Deadline::Monotonic(base + absl::Seconds(60)).ns, clock};
      got = mu.LockUntil(d);
      if (got) mu.Unlock();
    });
    ASSERT_TRUE(Eventually([&] { return waiter.published(); }));
    ASSERT_TRUE(waiter.WaitParked());
    mu.Unlock();
    t.join();
    EXPECT_TRUE(got);
  }
}

// UnlockFair hands the lock to the parked waiter: the unlocker cannot
// take it back.
TEST(MutexTest, UnlockFairHandsOffToParkedWaiter) {
  Watchdog dog(absl::Seconds(60), "UnlockFair");
  const int rounds = static_cast<int>(Scaled(200, 20));
  for (int i = 0; i < rounds; ++i) {
    Mutex mu;
    mu.Lock();
    ThreadRef waiter;
    std::atomic<bool> release{false};
    std::thread t([&] {
      waiter.Publish();
      mu.Lock();
      while (!release.load()) std::this_thread::yield();
      mu.Unlock();
    });
    ASSERT_TRUE(Eventually([&] { return waiter.published(); }));
    ASSERT_TRUE(waiter.WaitParked());
    const uint64_t handoffs_before =
        CurrentThreadData()->counters.handoffs.load();
    mu.UnlockFair();
    EXPECT_EQ(CurrentThreadData()->counters.handoffs.load(),
              handoffs_before + 1);
    // The lock went to the waiter, not back into the pool.
    EXPECT_FALSE(mu.TryLock());
    EXPECT_FALSE(mu.HeldByCurrentThread());
    release = true;
    t.join();
    EXPECT_TRUE(mu.TryLock());
    mu.Unlock();
  }
}

// UnlockFair with nobody parked just releases the lock.
TEST(MutexTest, UnlockFairWithoutWaitersReleases) {
  Mutex mu;
  for (int i = 0; i < 1000; ++i) {
    mu.Lock();
    mu.UnlockFair();
    EXPECT_FALSE(mu.HeldByCurrentThread());
    ASSERT_TRUE(mu.TryLock());
    mu.UnlockFair();
  }
}

// Queues `waiters` threads on a held mutex one at a time, each parked
// before the next starts (thread i runs `prepare(i)` first), then releases
// the mutex with UnlockFair; each waiter takes it and passes it on with
// UnlockFair. Returns the order in which they got it.
template <typename Prepare>
std::vector<int> HandOffChain(int waiters, Prepare prepare) {
  Mutex mu;
  mu.Lock();
  std::vector<int> order;  // guarded by mu
  std::vector<ThreadRef> refs(waiters);
  std::vector<std::thread> threads;
  for (int i = 0; i < waiters; ++i) {
    threads.emplace_back([&, i] {
      prepare(i);
      refs[i].Publish();
      mu.Lock();
      order.push_back(i);
      mu.UnlockFair();
    });
    EXPECT_TRUE(Eventually([&] { return refs[i].published(); }));
    EXPECT_TRUE(refs[i].WaitParked());
  }
  mu.UnlockFair();
  for (auto& t : threads) t.join();
  return order;
}

// UnlockFair hands off through a chain of parked waiters in FIFO order.
TEST(MutexTest, UnlockFairChainIsFifo) {
  Watchdog dog(absl::Seconds(60), "UnlockFair chain");
  EXPECT_EQ(HandOffChain(8, [](int) {}),
            (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

// A program that links the library and makes real-time threads tells the
// lot through <parklot/scheduling.h>; from then on a mutex's parked
// waiters get the lock highest priority first and in arrival order among
// equals (docs/design.md section 3.15), as glibc's waiters do.
TEST(MutexTest, RealTimeWaitersGetTheLockByPriority) {
  sched_param probe{};
  probe.sched_priority = 1;
  if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &probe) != 0) {
    GTEST_SKIP() << "SCHED_FIFO needs CAP_SYS_NICE";
  }
  probe.sched_priority = 0;
  ASSERT_EQ(pthread_setschedparam(pthread_self(), SCHED_OTHER, &probe), 0);
  Watchdog dog(absl::Seconds(60), "real-time waiters");
  constexpr int kPriority[] = {10, 30, 0, 20, 30};
  const auto order = HandOffChain(5, [&](int i) {
    if (kPriority[i] == 0) return;
    sched_param p{};
    p.sched_priority = kPriority[i];
    EXPECT_EQ(pthread_setschedparam(pthread_self(), SCHED_FIFO, &p), 0);
    ::parklot::SchedulingChanged(true);
  });
  EXPECT_EQ(order, (std::vector<int>{1, 4, 3, 0, 2}));
}

// Eventual fairness: a thread barging with TryLock/Unlock in a tight loop
// cannot keep a parked waiter out for long.
TEST(MutexTest, TryLockBargerCannotStarveParkedWaiter) {
  Watchdog dog(absl::Seconds(120), "barging vs parked waiter");
  const int rounds = static_cast<int>(Scaled(50, 5));
  for (int round = 0; round < rounds; ++round) {
    Mutex mu;
    std::atomic<bool> barging{false};
    std::atomic<bool> waiter_done{false};
    ThreadRef waiter;
    uint64_t counter = 0;  // guarded by mu
    std::thread barger([&] {
      mu.Lock();
      barging = true;
      // Holds the lock until the waiter is parked behind it.
      while (!waiter.parked()) std::this_thread::yield();
      mu.Unlock();
      while (!waiter_done.load(std::memory_order_relaxed)) {
        if (mu.TryLock()) {
          ++counter;
          mu.Unlock();
        }
      }
    });
    while (!barging) std::this_thread::yield();
    std::thread w([&] {
      waiter.Publish();
      const absl::Time start = MonotonicNow();
      // Bounded generously: a fair lock gets this in well under 10 s even
      // on a loaded 2-core machine; a starving one never does.
      const bool got = mu.LockFor(absl::Seconds(10));
      EXPECT_TRUE(got) << "waiter starved for "
                       << absl::FormatDuration(MonotonicNow() - start);
      if (got) {
        ++counter;
        mu.Unlock();
      }
      waiter_done = true;
    });
    w.join();
    barger.join();
    EXPECT_GT(counter, 0u);
  }
}

// The same with several bargers using Lock (spinning allowed) and a parked
// waiter that must get through, repeatedly.
TEST(MutexTest, LockBargersCannotStarveParkedWaiters) {
  Watchdog dog(absl::Seconds(120), "Lock bargers vs waiters");
  Mutex mu;
  std::atomic<bool> stop{false};
  uint64_t shared = 0;  // guarded by mu
  std::vector<std::thread> bargers;
  for (int i = 0; i < 3; ++i) {
    bargers.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        mu.Lock();
        ++shared;
        mu.Unlock();
      }
    });
  }
  const int acquisitions = static_cast<int>(Scaled(1000, 100));
  absl::Duration longest;
  std::thread waiter([&] {
    for (int i = 0; i < acquisitions; ++i) {
      const absl::Time start = MonotonicNow();
      ASSERT_TRUE(mu.LockFor(absl::Seconds(10))) << "starved at " << i;
      longest = std::max(longest, MonotonicNow() - start);
      ++shared;
      mu.Unlock();
      std::this_thread::yield();
    }
  });
  waiter.join();
  std::printf("longest wait of %d: %s\n", acquisitions,
              absl::FormatDuration(longest).c_str());
  stop = true;
  for (auto& t : bargers) t.join();
  EXPECT_GE(shared, static_cast<uint64_t>(acquisitions));
}

// ---------------------------------------------------------------------------
// std adapters

template <typename M>
void ExerciseBasicAdapters(M& mu) {
  {
    std::lock_guard<M> g(mu);
    EXPECT_TRUE(mu.HeldByCurrentThread());
  }
  EXPECT_FALSE(mu.HeldByCurrentThread());
  {
    std::unique_lock<M> l(mu);
    EXPECT_TRUE(l.owns_lock());
    l.unlock();
    EXPECT_FALSE(mu.HeldByCurrentThread());
    EXPECT_TRUE(l.try_lock());
    EXPECT_TRUE(mu.HeldByCurrentThread());
  }
  EXPECT_FALSE(mu.HeldByCurrentThread());
  {
    std::unique_lock<M> l(mu, std::defer_lock);
    EXPECT_FALSE(l.owns_lock());
    l.lock();
    EXPECT_TRUE(mu.HeldByCurrentThread());
  }
  {
    std::unique_lock<M> l(mu, std::try_to_lock);
    EXPECT_TRUE(l.owns_lock());
    OnOtherThread([&] {
      std::unique_lock<M> other(mu, std::try_to_lock);
      EXPECT_FALSE(other.owns_lock());
    });
  }
  {
    std::scoped_lock<M> s(mu);
    EXPECT_TRUE(mu.HeldByCurrentThread());
  }
  EXPECT_FALSE(mu.HeldByCurrentThread());
}

template <typename M>
void ExerciseTimedAdapters(M& mu) {
  {
    std::unique_lock<M> l(mu, std::chrono::milliseconds(100));
    EXPECT_TRUE(l.owns_lock());
    OnOtherThread([&] {
      std::unique_lock<M> a(mu, std::chrono::milliseconds(1));
      EXPECT_FALSE(a.owns_lock());
      std::unique_lock<M> b(
          mu, std::chrono::steady_clock::now() + std::chrono::milliseconds(1));
      EXPECT_FALSE(b.owns_lock());
      std::unique_lock<M> c(
          mu, std::chrono::system_clock::now() + std::chrono::milliseconds(1));
      EXPECT_FALSE(c.owns_lock());
      EXPECT_FALSE(mu.try_lock_for(std::chrono::microseconds(100)));
    });
  }
  {
    std::unique_lock<M> l(mu, std::defer_lock);
    EXPECT_TRUE(l.try_lock_for(std::chrono::seconds(1)));
    l.unlock();
    EXPECT_TRUE(l.try_lock_until(std::chrono::steady_clock::now() +
                                 std::chrono::seconds(1)));
  }
  EXPECT_TRUE(mu.try_lock_for(std::chrono::duration<double>(0.5)));
  mu.unlock();
  EXPECT_TRUE(mu.try_lock_until(std::chrono::system_clock::now()));
  mu.unlock();
}

TEST(MutexAdaptersTest, Mutex) {
  Watchdog dog(absl::Seconds(30), "MutexAdaptersTest.Mutex");
  Mutex mu;
  ExerciseBasicAdapters(mu);
  ExerciseTimedAdapters(mu);
}

TEST(MutexAdaptersTest, RecursiveMutex) {
  Watchdog dog(absl::Seconds(30), "MutexAdaptersTest.RecursiveMutex");
  RecursiveMutex mu;
  ExerciseBasicAdapters(mu);
  ExerciseTimedAdapters(mu);
  std::lock_guard<RecursiveMutex> outer(mu);
  std::lock_guard<RecursiveMutex> inner(mu);
  EXPECT_EQ(mu.depth(), 2u);
}

TEST(MutexAdaptersTest, ErrorCheckingMutex) {
  Watchdog dog(absl::Seconds(30), "MutexAdaptersTest.ErrorCheckingMutex");
  ErrorCheckingMutex mu;
  ExerciseBasicAdapters(mu);
  ExerciseTimedAdapters(mu);
}

TEST(MutexAdaptersTest, ScopedLockAndStdLockOfSeveral) {
  Mutex a, b;
  RecursiveMutex r;
  ErrorCheckingMutex e;
  {
    std::scoped_lock<Mutex, Mutex, RecursiveMutex, ErrorCheckingMutex> s(a, b,
                                                                         r, e);
    EXPECT_TRUE(a.HeldByCurrentThread());
    EXPECT_TRUE(b.HeldByCurrentThread());
    EXPECT_TRUE(r.HeldByCurrentThread());
    EXPECT_TRUE(e.HeldByCurrentThread());
  }
  EXPECT_FALSE(a.HeldByCurrentThread());
  EXPECT_FALSE(e.HeldByCurrentThread());
  std::lock(a, b);
  a.unlock();
  b.unlock();
  EXPECT_EQ(std::try_lock(a, b), -1);
  a.unlock();
  b.unlock();
}

// Two threads taking the same pair in opposite orders through std::lock
// (which uses try_lock) must not deadlock.
TEST(MutexAdaptersTest, StdLockAvoidsDeadlock) {
  Watchdog dog(absl::Seconds(60), "std::lock");
  Mutex a, b;
  uint64_t n = 0;  // guarded by a and b
  const int iters = static_cast<int>(Scaled(20000, 1000));
  std::thread t1([&] {
    for (int i = 0; i < iters; ++i) {
      std::scoped_lock s(a, b);
      ++n;
    }
  });
  std::thread t2([&] {
    for (int i = 0; i < iters; ++i) {
      std::scoped_lock s(b, a);
      ++n;
    }
  });
  t1.join();
  t2.join();
  EXPECT_EQ(n, 2u * iters);
}

// ---------------------------------------------------------------------------
// RecursiveMutex

TEST(RecursiveMutexTest, DepthAndRelease) {
  Watchdog dog(absl::Seconds(30), "RecursiveMutexTest.DepthAndRelease");
  RecursiveMutex mu;
  EXPECT_EQ(mu.depth(), 0u);
  EXPECT_FALSE(mu.HeldByCurrentThread());
  constexpr uint32_t kDepth = 1000;
  for (uint32_t i = 1; i <= kDepth; ++i) {
    switch (i % 3) {
      case 0:
        mu.Lock();
        break;
      case 1:
        ASSERT_TRUE(mu.TryLock());
        break;
      case 2:
        ASSERT_TRUE(mu.LockUntil(Deadline::In(-absl::Seconds(1))));
        break;
    }
    ASSERT_EQ(mu.depth(), i);
    ASSERT_TRUE(mu.HeldByCurrentThread());
  }
  OnOtherThread([&] {
    EXPECT_FALSE(mu.TryLock());
    EXPECT_FALSE(mu.LockUntil(Deadline::In(absl::Milliseconds(1))));
    EXPECT_EQ(mu.depth(), 0u);
    EXPECT_FALSE(mu.HeldByCurrentThread());
  });
  for (uint32_t i = kDepth; i >= 1; --i) {
    ASSERT_EQ(mu.Unlock(), 0);
    ASSERT_EQ(mu.depth(), i - 1);
    // Still held by us until the last unlock.
    ASSERT_EQ(mu.HeldByCurrentThread(), i > 1);
  }
  EXPECT_EQ(mu.Unlock(), EPERM);
  OnOtherThread([&] {
    EXPECT_TRUE(mu.TryLock());
    EXPECT_EQ(mu.depth(), 1u);
    EXPECT_EQ(mu.Unlock(), 0);
  });
}

TEST(RecursiveMutexTest, UnlockByForeignOrNonOwnerIsEpermAndChangesNothing) {
  Watchdog dog(absl::Seconds(30), "RecursiveMutexTest.UnlockByForeignOrNonOwnerIsEpermAndChangesNothing");
  RecursiveMutex mu;
  EXPECT_EQ(mu.Unlock(), EPERM);  // never locked
  mu.Lock();
  mu.Lock();
  // A thread that never touched parklot, and one that did.
  OnOtherThread([&] { EXPECT_EQ(mu.Unlock(), EPERM); });
  OnOtherThread([&] {
    Mutex warm;
    warm.Lock();
    warm.Unlock();
    EXPECT_EQ(mu.Unlock(), EPERM);
    EXPECT_EQ(mu.Unlock(), EPERM);
    EXPECT_FALSE(mu.TryLock());
  });
  EXPECT_EQ(mu.depth(), 2u);
  EXPECT_EQ(mu.Unlock(), 0);
  EXPECT_EQ(mu.Unlock(), 0);
  EXPECT_EQ(mu.Unlock(), EPERM);
  EXPECT_EQ(mu.depth(), 0u);
}

TEST(RecursiveMutexTest, TimedVariants) {
  Watchdog dog(absl::Seconds(30), "RecursiveMutexTest.TimedVariants");
  RecursiveMutex mu;
  ASSERT_TRUE(mu.LockUntil(Deadline::Realtime(RealtimeNow() + absl::Seconds(1))));
  ASSERT_TRUE(mu.LockUntil(Deadline::Monotonic(absl::InfinitePast())));
  ASSERT_TRUE(mu.LockFor(-absl::Seconds(1)));
  EXPECT_EQ(mu.depth(), 3u);
  OnOtherThread([&] {
    const Deadline rt = Deadline::Realtime(RealtimeNow() + absl::Milliseconds(20));
    EXPECT_FALSE(mu.LockUntil(rt));
    EXPECT_GE(RealtimeNow(), rt.when());
    EXPECT_FALSE(mu.LockFor(absl::Milliseconds(5)));
  });
  for (int i = 0; i < 3; ++i) EXPECT_EQ(mu.Unlock(), 0);
  EXPECT_EQ(mu.Unlock(), EPERM);
}

// Recursion across contention: the depth is per owner.
TEST(RecursiveMutexTest, ContendedRecursion) {
  Watchdog dog(absl::Seconds(60), "recursive contention");
  RecursiveMutex mu;
  uint64_t count = 0;  // guarded by mu
  const int iters = static_cast<int>(Scaled(50000, 2000));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < iters; ++i) {
        const uint32_t depth = 1 + (i + t) % 3;
        for (uint32_t d = 0; d < depth; ++d) mu.Lock();
        ASSERT_EQ(mu.depth(), depth);
        ++count;
        for (uint32_t d = 0; d < depth; ++d) ASSERT_EQ(mu.Unlock(), 0);
        ASSERT_EQ(mu.depth(), 0u);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(count, 4u * iters);
}

// ---------------------------------------------------------------------------
// ErrorCheckingMutex

TEST(ErrorCheckingMutexTest, ErrorCodes) {
  Watchdog dog(absl::Seconds(30), "ErrorCheckingMutexTest.ErrorCodes");
  ErrorCheckingMutex mu;
  EXPECT_EQ(mu.Unlock(), EPERM);  // unlocked
  EXPECT_EQ(mu.Lock(), 0);
  EXPECT_TRUE(mu.HeldByCurrentThread());
  EXPECT_EQ(mu.Lock(), EDEADLK);
  EXPECT_EQ(mu.LockUntil(Deadline::Never()), EDEADLK);
  EXPECT_EQ(mu.LockUntil(Deadline::In(-absl::Seconds(1))), EDEADLK);
  EXPECT_EQ(mu.LockUntil(Deadline::Realtime(absl::InfinitePast())), EDEADLK);
  EXPECT_FALSE(mu.TryLock());  // held by the caller: EBUSY in POSIX terms
  // Foreign unlock: a thread new to parklot, and a registered one.
  OnOtherThread([&] { EXPECT_EQ(mu.Unlock(), EPERM); });
  OnOtherThread([&] {
    ErrorCheckingMutex mine;
    EXPECT_EQ(mine.Lock(), 0);
    EXPECT_EQ(mu.Unlock(), EPERM);
    EXPECT_EQ(mine.Unlock(), 0);
    EXPECT_EQ(mu.LockUntil(Deadline::In(absl::Milliseconds(5))), ETIMEDOUT);
    EXPECT_EQ(mu.LockUntil(Deadline::Realtime(absl::InfinitePast())),
              ETIMEDOUT);
    EXPECT_EQ(mu.LockUntil(Deadline::Monotonic(absl::InfinitePast())),
              ETIMEDOUT);
    EXPECT_FALSE(mu.TryLock());
  });
  // Nothing changed: still ours.
  EXPECT_TRUE(mu.HeldByCurrentThread());
  EXPECT_EQ(mu.Unlock(), 0);
  EXPECT_EQ(mu.Unlock(), EPERM);
  EXPECT_FALSE(mu.HeldByCurrentThread());
  EXPECT_EQ(mu.LockUntil(Deadline::In(-absl::Seconds(1))), 0);
  EXPECT_EQ(mu.Unlock(), 0);
  EXPECT_TRUE(mu.TryLock());
  EXPECT_EQ(mu.Unlock(), 0);
}

TEST(ErrorCheckingMutexTest, UnlockAfterOwnerHandedItOnIsEperm) {
  Watchdog dog(absl::Seconds(30), "errorcheck handoff");
  ErrorCheckingMutex mu;
  ASSERT_EQ(mu.Lock(), 0);
  std::atomic<bool> locked{false}, release{false};
  std::thread t([&] {
    EXPECT_EQ(mu.Lock(), 0);
    locked = true;
    while (!release) std::this_thread::yield();
    EXPECT_EQ(mu.Unlock(), 0);
  });
  EXPECT_EQ(mu.Unlock(), 0);
  ASSERT_TRUE(Eventually([&] { return locked.load(); }));
  EXPECT_EQ(mu.Unlock(), EPERM);  // the other thread owns it now
  EXPECT_FALSE(mu.TryLock());
  EXPECT_EQ(mu.LockUntil(Deadline::In(absl::Milliseconds(1))), ETIMEDOUT);
  release = true;
  t.join();
}

TEST(ErrorCheckingMutexTest, StdSpellingsReportErrors) {
  ErrorCheckingMutex mu;
  mu.lock();
  EXPECT_THROW(mu.lock(), std::system_error);
  mu.unlock();
  EXPECT_THROW(mu.unlock(), std::system_error);
  EXPECT_FALSE(mu.HeldByCurrentThread());
}

}  // namespace
}  // namespace parklot::internal::testing
