// The parking lot API, path by path: Park's three result kinds, tokens,
// callback arguments, both clocks, past / zero / huge deadlines, signals
// and spurious futex returns, UnparkOne / UnparkAll / UnparkRequeue /
// UnparkFilter counts and order.
//
// Built twice: with the default table, and with PARKLOT_POLICY=fixed:1
// (every key in one bucket), where each queue interleaves keys and every
// operation must still see only its own key's threads.
#include "runtime/parking_lot.h"

#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/futex.h"
#include "gtest/gtest.h"
#include "runtime/config.h"
#include "runtime/deadline.h"
#include "runtime/global_table.h"
#include "runtime/thread_data.h"
#include "tests/core/parked_thread.h"
#include "tests/core/test_support.h"
#include "tests/util/watchdog.h"

namespace parklot::internal {
namespace {

using coretest::ParkedThread;
using coretest::ParkInOrder;
using coretest::QueuedTokens;
using coretest::WaitFor;
using coretest::WatchdogLimit;
using testing::Watchdog;

// Distinct keys on distinct cache lines.
struct alignas(64) Slot {
  int x = 0;
};

const absl::Duration kWatch = WatchdogLimit(absl::Seconds(120));

#ifdef PARKLOT_TEST_FIXED1
// The variant must really run on a one-bucket table, or it tests nothing
// the default variant does not.
TEST(ParkingLotConfig, RunsOnOneBucketTable) {
  EXPECT_EQ(GetConfig().table.policy, GrowthPolicy::kFixed);
  EXPECT_EQ(GlobalTable().bucket_count(), 1u);
  EXPECT_TRUE(GlobalTable().immutable());
}
#endif

// --- Park: kInvalid -------------------------------------------------------

TEST(Park, InvalidDoesNotSleepOrQueue) {
  Watchdog wd(kWatch, "InvalidDoesNotSleepOrQueue");
  Slot s;
  int validate = 0, before = 0, timed = 0;
  const ParkResult r = Park(
      KeyOf(&s),
      [&] {
        ++validate;
        return false;
      },
      [&] { ++before; }, [&](uintptr_t, bool) { ++timed; }, 42,
      Deadline::Never());
  EXPECT_TRUE(r.invalid());
  EXPECT_FALSE(r.unparked());
  EXPECT_FALSE(r.timed_out());
  EXPECT_EQ(validate, 1);
  // A refused park must not run the sleep-side callbacks.
  EXPECT_EQ(before, 0);
  EXPECT_EQ(timed, 0);
  // Nothing was queued.
  EXPECT_EQ(UnparkAll(KeyOf(&s)), 0u);
}

TEST(Park, InvalidWinsOverPastDeadline) {
  // validate runs before the deadline is looked at: a refused park with an
  // expired deadline is kInvalid, not kTimedOut.
  Slot s;
  int timed = 0;
  const ParkResult r = Park(
      KeyOf(&s), [] { return false; }, [] {},
      [&](uintptr_t, bool) { ++timed; }, 0,
      Deadline::Monotonic(absl::InfinitePast()));
  EXPECT_TRUE(r.invalid());
  EXPECT_EQ(timed, 0);
}

TEST(Park, ShortOverloadIsInvalidWhenValidateFails) {
  Slot s;
  EXPECT_TRUE(Park(KeyOf(&s), [] { return false; }).invalid());
}

// validate runs with the bucket locked: an UnparkOne issued while validate
// runs cannot complete until the thread is queued, and then finds it. This
// is the no-lost-wake-up invariant in one deterministic interleaving.
TEST(Park, ValidateRunsUnderBucketLock) {
  Watchdog wd(kWatch, "ValidateRunsUnderBucketLock");
  Slot s;
  std::atomic<bool> in_validate{false};
  std::atomic<bool> unpark_done{false};
  std::atomic<bool> unpark_done_during_validate{true};
  UnparkResult seen;
  std::thread waker([&] {
    while (!in_validate.load(std::memory_order_acquire)) {
      std::this_thread::yield();
    }
    seen = UnparkOne(KeyOf(&s), [](UnparkResult) { return UnparkToken{7}; });
    unpark_done.store(true, std::memory_order_release);
  });
  const ParkResult r = Park(KeyOf(&s), [&] {
    in_validate.store(true, std::memory_order_release);
    // Give the waker ample time to reach (and, were the bucket not
    // locked, complete) its UnparkOne. It must still be blocked.
    absl::SleepFor(absl::Milliseconds(50));
    unpark_done_during_validate.store(
        unpark_done.load(std::memory_order_acquire));
    return true;
  });
  waker.join();
  EXPECT_FALSE(unpark_done_during_validate.load());
  EXPECT_TRUE(r.unparked());
  EXPECT_EQ(r.token, 7u);
  EXPECT_EQ(seen.unparked_threads, 1u);
  EXPECT_FALSE(seen.have_more_threads);
}

// --- Park + UnparkOne: kUnparked, tokens, FIFO, callback arguments ------

TEST(UnparkOne, NoWaiterStillRunsCallback) {
  Slot s;
  int calls = 0;
  const UnparkResult r = UnparkOne(KeyOf(&s), [&](UnparkResult seen) {
    ++calls;
    EXPECT_EQ(seen.unparked_threads, 0u);
    EXPECT_EQ(seen.requeued_threads, 0u);
    EXPECT_FALSE(seen.have_more_threads);
    EXPECT_FALSE(seen.be_fair);
    return UnparkToken{1};
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(r.unparked_threads, 0u);
  EXPECT_FALSE(r.have_more_threads);
  EXPECT_FALSE(r.be_fair);
}

TEST(UnparkOne, WakesInFifoOrderWithTokensAndMoreFlag) {
  Watchdog wd(kWatch, "WakesInFifoOrderWithTokensAndMoreFlag");
  Slot s;
  const uintptr_t key = KeyOf(&s);
  auto threads = ParkInOrder(key, 4, /*first_token=*/100);
  ASSERT_EQ(QueuedTokens(key), (std::vector<ParkToken>{100, 101, 102, 103}));
  for (int i = 0; i < 4; ++i) {
    int calls = 0;
    const UnparkResult r = UnparkOne(key, [&](UnparkResult seen) {
      ++calls;
      EXPECT_EQ(seen.unparked_threads, 1u);
      // The callback sees "more waiters" until the last one goes.
      EXPECT_EQ(seen.have_more_threads, i < 3) << i;
      return UnparkToken(1000 + i);
    });
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(r.unparked_threads, 1u);
    EXPECT_EQ(r.requeued_threads, 0u);
    EXPECT_EQ(r.have_more_threads, i < 3);
    // FIFO: the i-th parked thread is the one woken i-th, and it gets
    // exactly the token this callback returned.
    const auto& rec = threads[i]->Join();
    EXPECT_TRUE(rec.result.unparked());
    EXPECT_EQ(rec.result.token, UnparkToken(1000 + i));
    EXPECT_EQ(rec.validate_calls, 1);
    EXPECT_EQ(rec.before_sleep_calls, 1);
    EXPECT_EQ(rec.left_queue_calls, 0);
  }
  EXPECT_EQ(UnparkAll(key), 0u);
}

TEST(UnparkOne, OnlyWakesThreadsOfItsKey) {
  Watchdog wd(kWatch, "OnlyWakesThreadsOfItsKey");
  Slot a, b;
  ParkedThread ta(KeyOf(&a), 1);
  ASSERT_TRUE(ta.AwaitEnqueued());
  ParkedThread tb(KeyOf(&b), 2);
  ASSERT_TRUE(tb.AwaitEnqueued());
  const UnparkResult rb =
      UnparkOne(KeyOf(&b), [](UnparkResult) { return UnparkToken{22}; });
  EXPECT_EQ(rb.unparked_threads, 1u);
  // A's waiter shares the bucket in the fixed:1 variant, but is not b's.
  EXPECT_FALSE(rb.have_more_threads);
  EXPECT_EQ(tb.Join().result.token, 22u);
  EXPECT_EQ(QueuedTokens(KeyOf(&b)), std::vector<ParkToken>{});
  // A is still queued: the next UnparkOne on A finds it.
  const UnparkResult ra =
      UnparkOne(KeyOf(&a), [](UnparkResult) { return UnparkToken{11}; });
  EXPECT_EQ(ra.unparked_threads, 1u);
  EXPECT_EQ(ta.Join().result.token, 11u);
}

TEST(UnparkOne, BeFairOnceTheBucketTimerExpires) {
  Watchdog wd(kWatch, "BeFairOnceTheBucketTimerExpires");
  // The fairness timer of a bucket is re-armed at a random interval below
  // 2 x fair_mean_ns after each unpark that wakes a thread; an unpark more
  // than that later must report be_fair.
  const int64_t mean = GetConfig().fair_mean_ns;
  ASSERT_LE(mean, 1000000) << "test assumes the default fairness interval";
  Slot s;
  const uintptr_t key = KeyOf(&s);
  std::vector<bool> fair;
  for (int i = 0; i < 3; ++i) {
    ParkedThread t(key);
    ASSERT_TRUE(t.AwaitEnqueued());
    absl::SleepFor(absl::Nanoseconds(2 * mean) + absl::Milliseconds(2));
    bool cb_fair = false;
    const UnparkResult r = UnparkOne(key, [&](UnparkResult seen) {
      cb_fair = seen.be_fair;
      return kDefaultUnparkToken;
    });
    EXPECT_EQ(r.be_fair, cb_fair);
    fair.push_back(r.be_fair);
    t.Join();
  }
  // The first unpark may only arm a never-armed timer; every later one
  // came after the previous deadline.
  EXPECT_TRUE(fair[1]);
  EXPECT_TRUE(fair[2]);
}

// --- UnparkAll --------------------------------------------------------------

TEST(UnparkAll, WakesEveryThreadOfTheKeyWithTheToken) {
  Watchdog wd(kWatch, "UnparkAllWakesEvery");
  Slot s, other;
  ParkedThread bystander(KeyOf(&other), 9);
  ASSERT_TRUE(bystander.AwaitEnqueued());
  auto threads = ParkInOrder(KeyOf(&s), 5, 0);
  EXPECT_EQ(UnparkAll(KeyOf(&s), 77), 5u);
  for (auto& t : threads) {
    const auto& rec = t->Join();
    EXPECT_TRUE(rec.result.unparked());
    EXPECT_EQ(rec.result.token, 77u);
  }
  EXPECT_EQ(UnparkAll(KeyOf(&s)), 0u);
  // The other key's thread was not touched.
  EXPECT_FALSE(bystander.done());
  EXPECT_EQ(UnparkAll(KeyOf(&other), 5), 1u);
  EXPECT_EQ(bystander.Join().result.token, 5u);
}

TEST(UnparkAll, DefaultTokenAndEmptyKey) {
  Watchdog wd(kWatch, "UnparkAllDefaultToken");
  Slot s;
  EXPECT_EQ(UnparkAll(KeyOf(&s)), 0u);
  ParkedThread t(KeyOf(&s), 3);
  ASSERT_TRUE(t.AwaitEnqueued());
  EXPECT_EQ(UnparkAll(KeyOf(&s)), 1u);
  EXPECT_EQ(t.Join().result.token, kDefaultUnparkToken);
}

// --- Deadlines: kTimedOut, both clocks, past / zero / huge -----------------

struct PastDeadlineCase {
  const char* name;
  Deadline deadline;
};

TEST(ParkDeadline, PastAndZeroDeadlinesTimeOutAtOnce) {
  Watchdog wd(kWatch, "PastAndZeroDeadlines");
  const PastDeadlineCase cases[] = {
      {"monotonic InfinitePast", Deadline::Monotonic(absl::InfinitePast())},
      {"realtime InfinitePast", Deadline::Realtime(absl::InfinitePast())},
      {"monotonic epoch", Deadline::Monotonic(absl::UnixEpoch())},
      {"realtime epoch", Deadline::Realtime(absl::UnixEpoch())},
      {"monotonic 1s ago",
       Deadline::Monotonic(MonotonicNow() - absl::Seconds(1))},
      {"realtime 1s ago", Deadline::Realtime(absl::Now() - absl::Seconds(1))},
      {"In(0)", Deadline::In(absl::ZeroDuration())},
      {"In(-1s)", Deadline::In(absl::Seconds(-1))},
      {"realtime now", Deadline::Realtime(absl::Now())},
      {"timespec {0,0} monotonic",
       Deadline::FromTimespec(timespec{0, 0}, CLOCK_MONOTONIC)},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Slot s;
    int before = 0, timed = 0;
    uintptr_t timed_key = 0;
    bool last = false;
    const ParkResult r = Park(
        KeyOf(&s), [] { return true; }, [&] { ++before; },
        [&](uintptr_t k, bool l) {
          ++timed;
          timed_key = k;
          last = l;
        },
        5, c.deadline);
    EXPECT_TRUE(r.timed_out());
    EXPECT_EQ(r.token, 0u);
    // The thread was queued (before_sleep ran) and dequeued itself.
    EXPECT_EQ(before, 1);
    EXPECT_EQ(timed, 1);
    EXPECT_EQ(timed_key, KeyOf(&s));
    EXPECT_TRUE(last);
    EXPECT_EQ(UnparkAll(KeyOf(&s)), 0u);
  }
}

TEST(ParkDeadline, MonotonicTimeoutDoesNotReturnEarly) {
  Watchdog wd(kWatch, "MonotonicTimeout");
  Slot s;
  const Deadline d = Deadline::Monotonic(MonotonicNow() + absl::Milliseconds(30));
  ParkedThread t(KeyOf(&s), 0, d);
  const auto& rec = t.Join();
  EXPECT_TRUE(rec.result.timed_out());
  EXPECT_EQ(rec.left_queue_calls, 1);
  EXPECT_TRUE(rec.was_last_thread);
  // Only a lower bound: a loaded machine may return late, never early.
  EXPECT_GE(rec.mono_after, d.when());
}

TEST(ParkDeadline, RealtimeTimeoutDoesNotReturnEarly) {
  Watchdog wd(kWatch, "RealtimeTimeout");
  Slot s;
  const Deadline d = Deadline::Realtime(absl::Now() + absl::Milliseconds(30));
  ParkedThread t(KeyOf(&s), 0, d);
  const auto& rec = t.Join();
  EXPECT_TRUE(rec.result.timed_out());
  EXPECT_EQ(rec.left_queue_calls, 1);
  EXPECT_GE(rec.real_after, d.when());
}

TEST(ParkDeadline, InUsesTheMonotonicClock) {
  const absl::Time before = MonotonicNow();
  const Deadline d = Deadline::In(absl::Seconds(5));
  EXPECT_EQ(d.clock, CLOCK_MONOTONIC);
  EXPECT_GE(d.when(), before + absl::Seconds(5));
  EXPECT_LE(d.when(), MonotonicNow() + absl::Seconds(5));
  EXPECT_TRUE(Deadline::In(absl::InfiniteDuration()).is_never());
  EXPECT_TRUE(Deadline::Never().is_never());
  EXPECT_FALSE(Deadline::In(absl::Hours(1e6)).is_never());
  const Deadline ts =
      Deadline::FromTimespec(timespec{12, 345}, CLOCK_REALTIME);
  EXPECT_EQ(ts.clock, CLOCK_REALTIME);
  EXPECT_EQ(ts.when(), absl::FromUnixNanos(12000000345));
  EXPECT_EQ(ts.ns, 12000000345);
  // Beyond int64 nanoseconds: the latest finite deadline, never "never".
  EXPECT_EQ(Deadline::FromTimespec(timespec{INT64_MAX, 999999999},
                                   CLOCK_REALTIME).ns,
            Deadline::kNever - 1);
  EXPECT_EQ(Deadline::FromTimespec(timespec{INT64_MIN, 0}, CLOCK_MONOTONIC).ns,
            INT64_MIN);
  EXPECT_EQ(Deadline::MonotonicAt(5).Shifted(INT64_MAX).ns,
            Deadline::kNever - 1);
  EXPECT_EQ(Deadline::MonotonicAt(-5).Shifted(INT64_MIN).ns, INT64_MIN);
  EXPECT_TRUE(Deadline::Never().Shifted(-5).is_never());
  EXPECT_EQ(Deadline::Monotonic(absl::FromUnixSeconds(INT64_MAX)).ns,
            Deadline::kNever - 1);
  EXPECT_EQ(Deadline::Realtime(absl::InfinitePast()).ns, INT64_MIN);
  // At or before the clock's zero the futex gets {0, 0}: expired at once.
  const struct timespec zero = Deadline::RealtimeAt(-1).ToTimespec();
  EXPECT_EQ(zero.tv_sec, 0);
  EXPECT_EQ(zero.tv_nsec, 0);
  const struct timespec later = Deadline::RealtimeAt(12000000345).ToTimespec();
  EXPECT_EQ(later.tv_sec, 12);
  EXPECT_EQ(later.tv_nsec, 345);
}

TEST(ParkDeadline, HugeDeadlinesStillSleepAndWake) {
  Watchdog wd(kWatch, "HugeDeadlines");
  const PastDeadlineCase cases[] = {
      {"In(1000 years)", Deadline::In(absl::Hours(24 * 365 * 1000))},
      {"monotonic 2^40 s", Deadline::Monotonic(absl::FromUnixSeconds(
                               int64_t{1} << 40))},
      {"monotonic max time_t",
       Deadline::Monotonic(absl::FromUnixSeconds(INT64_MAX))},
      {"realtime now + 10^6 h",
       Deadline::Realtime(absl::Now() + absl::Hours(1e6))},
      {"realtime max time_t",
       Deadline::Realtime(absl::FromUnixSeconds(INT64_MAX))},
      {"monotonic InfiniteFuture", Deadline::Monotonic(absl::InfiniteFuture())},
      {"realtime InfiniteFuture", Deadline::Realtime(absl::InfiniteFuture())},
      {"Never", Deadline::Never()},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Slot s;
    ParkedThread t(KeyOf(&s), 1, c.deadline);
    ASSERT_TRUE(t.AwaitEnqueued());
    // Give a mis-converted deadline the chance to expire (or fail) early.
    absl::SleepFor(absl::Milliseconds(20));
    EXPECT_FALSE(t.done());
    const UnparkResult r =
        UnparkOne(KeyOf(&s), [](UnparkResult) { return UnparkToken{3}; });
    EXPECT_EQ(r.unparked_threads, 1u);
    const auto& rec = t.Join();
    EXPECT_TRUE(rec.result.unparked());
    EXPECT_EQ(rec.result.token, 3u);
    EXPECT_EQ(rec.left_queue_calls, 0);
  }
}

TEST(ParkDeadline, WasLastThreadFalseWhileOthersRemain) {
  Watchdog wd(kWatch, "WasLastThreadFalse");
  Slot s, other;
  ParkedThread stay(KeyOf(&s), 1);
  ASSERT_TRUE(stay.AwaitEnqueued());
  // A waiter on another key (same bucket in fixed:1) must not count.
  ParkedThread bystander(KeyOf(&other), 2);
  ASSERT_TRUE(bystander.AwaitEnqueued());
  ParkedThread leave(KeyOf(&s), 3, Deadline::In(absl::Milliseconds(20)));
  const auto& rec = leave.Join();
  EXPECT_TRUE(rec.result.timed_out());
  EXPECT_EQ(rec.left_queue_key, KeyOf(&s));
  EXPECT_FALSE(rec.was_last_thread);
  // The timed-out thread left the queue; the other stayed.
  EXPECT_EQ(QueuedTokens(KeyOf(&s)), std::vector<ParkToken>{1});
  EXPECT_EQ(UnparkAll(KeyOf(&s)), 1u);
  EXPECT_EQ(UnparkAll(KeyOf(&other)), 1u);
  stay.Join();
  bystander.Join();
}

TEST(ParkDeadline, TimedOutThreadLeavesMiddleOfQueue) {
  Watchdog wd(kWatch, "TimedOutMiddle");
  Slot s;
  const uintptr_t key = KeyOf(&s);
  ParkedThread first(key, 1);
  ASSERT_TRUE(first.AwaitEnqueued());
  ParkedThread middle(key, 2, Deadline::In(absl::Milliseconds(100)));
  ASSERT_TRUE(middle.AwaitEnqueued());
  ParkedThread last(key, 3);
  ASSERT_TRUE(last.AwaitEnqueued());
  EXPECT_TRUE(middle.Join().result.timed_out());
  EXPECT_EQ(QueuedTokens(key), (std::vector<ParkToken>{1, 3}));
  // The queue is intact: both remaining threads wake in order.
  EXPECT_EQ(UnparkOne(key, [](UnparkResult) { return UnparkToken{10}; })
                .unparked_threads,
            1u);
  EXPECT_EQ(first.Join().result.token, 10u);
  EXPECT_EQ(UnparkOne(key, [](UnparkResult) { return UnparkToken{30}; })
                .unparked_threads,
            1u);
  EXPECT_EQ(last.Join().result.token, 30u);
}

// A park whose deadline expires while an unparker releases it must report
// exactly one outcome: unparked (with the token) if and only if the
// unparker counted it, else timed out (and left_queue() ran). Covers the
// re-check of the parker under the bucket lock on the timeout path.
TEST(ParkDeadline, TimeoutRacingUnparkHasOneOutcome) {
  Watchdog wd(kWatch, "TimeoutRacingUnpark");
  Slot s;
  const uintptr_t key = KeyOf(&s);
  const int rounds = static_cast<int>(coretest::Scaled(3000, 10, 2));
  std::atomic<int> go{-1};
  std::atomic<int> finished{-1};
  std::vector<ParkResult> results(rounds);
  std::vector<int> timed_calls(rounds, 0);
  std::thread parker([&] {
    coretest::Rng rng(7);
    for (int i = 0; i < rounds; ++i) {
      while (go.load(std::memory_order_acquire) < i) std::this_thread::yield();
      results[i] = Park(
          key, [] { return true; }, [] {},
          [&](uintptr_t, bool) { ++timed_calls[i]; }, 0,
          Deadline::In(absl::Microseconds(rng.Below(300))));
      finished.store(i, std::memory_order_release);
    }
  });
  coretest::Rng rng(11);
  int unparked_count = 0;
  for (int i = 0; i < rounds; ++i) {
    go.store(i, std::memory_order_release);
    const int delay_us = static_cast<int>(rng.Below(300));
    absl::SleepFor(absl::Microseconds(delay_us));
    const UnparkResult r = UnparkOne(
        key, [&](UnparkResult) { return UnparkToken(i + 1); });
    while (finished.load(std::memory_order_acquire) < i) {
      std::this_thread::yield();
    }
    // `finished` orders the parker's writes of round i before these reads.
    if (r.unparked_threads == 1) {
      ++unparked_count;
      EXPECT_TRUE(results[i].unparked()) << "round " << i;
      EXPECT_EQ(results[i].token, UnparkToken(i + 1)) << "round " << i;
      EXPECT_EQ(timed_calls[i], 0) << "round " << i;
    } else {
      EXPECT_TRUE(results[i].timed_out()) << "round " << i;
      EXPECT_EQ(timed_calls[i], 1) << "round " << i;
    }
  }
  parker.join();
  EXPECT_EQ(UnparkAll(key), 0u);
  // Not a timing assertion on the split, just a sanity record.
  RecordProperty("unparked_rounds", unparked_count);
}

// --- Signals and spurious futex returns never end a park -------------------

std::atomic<int> g_signals{0};
void CountSignal(int) { g_signals.fetch_add(1, std::memory_order_relaxed); }

class ParkSignals : public ::testing::Test {
 protected:
  void SetUp() override {
    struct sigaction sa = {};
    sa.sa_handler = CountSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: the futex wait returns EINTR
    ASSERT_EQ(sigaction(SIGUSR1, &sa, &old_), 0);
  }
  void TearDown() override { sigaction(SIGUSR1, &old_, nullptr); }

  // Interrupts `t` with SIGUSR1 `n` times (each delivered before the next
  // is sent, so none coalesce) and wakes its parker word `n` times.
  static void Disturb(ParkedThread& t, pthread_t tid, int n) {
    for (int i = 0; i < n && !t.done(); ++i) {
      const int before = g_signals.load();
      ASSERT_EQ(pthread_kill(tid, SIGUSR1), 0);
      // TSan defers a handler until the thread next enters an intercepted
      // call, which a thread sleeping in a raw futex never does; there the
      // signal still interrupts the wait, but its count cannot be awaited.
      if (!coretest::kTsan) {
        ASSERT_TRUE(WaitFor([&] { return g_signals.load() > before || t.done(); }));
      }
      FutexWakePrivate(&t.data()->parker, INT_MAX);
      absl::SleepFor(absl::Microseconds(500));
    }
  }

  struct sigaction old_ = {};
};

TEST_F(ParkSignals, UntimedParkSurvivesSignalsAndSpuriousWakes) {
  Watchdog wd(kWatch, "UntimedParkSurvivesSignals");
  Slot s;
  ParkedThread t(KeyOf(&s), 1);
  ASSERT_TRUE(t.AwaitEnqueued());
  // kParkerAsleep: the thread is asleep in the kernel, where a signal
  // makes the futex wait return EINTR.
  ASSERT_TRUE(WaitFor([&] { return (t.data()->parker.load() & kParkerAsleep) != 0; }));
  Disturb(t, t.native_handle(), 20);
  EXPECT_FALSE(t.done());
  const UnparkResult r =
      UnparkOne(KeyOf(&s), [](UnparkResult) { return UnparkToken{99}; });
  EXPECT_EQ(r.unparked_threads, 1u);
  const auto& rec = t.Join();
  EXPECT_TRUE(rec.result.unparked());
  EXPECT_EQ(rec.result.token, 99u);
}

TEST_F(ParkSignals, TimedParkSurvivesSignalsUntilItsDeadline) {
  Watchdog wd(kWatch, "TimedParkSurvivesSignals");
  Slot s;
  const Deadline d = Deadline::In(absl::Milliseconds(300));
  ParkedThread t(KeyOf(&s), 1, d);
  ASSERT_TRUE(t.AwaitEnqueued());
  ASSERT_TRUE(WaitFor([&] { return (t.data()->parker.load() & kParkerAsleep) != 0 || t.done(); }));
  Disturb(t, t.native_handle(), 10);
  const auto& rec = t.Join();
  EXPECT_TRUE(rec.result.timed_out());
  EXPECT_GE(rec.mono_after, d.when());
}

// --- UnparkRequeue ----------------------------------------------------------

class Requeue : public ::testing::Test {
 protected:
  // `from` holds threads with park tokens 10, 11, 12, 13 (in order); `to`
  // holds one thread with park token 1.
  void SetUp() override {
    to_threads_ = ParkInOrder(to(), 1, 1);
    from_threads_ = ParkInOrder(from(), 4, 10);
  }
  void TearDown() override {
    UnparkAll(from(), 0);
    UnparkAll(to(), 0);
    for (auto& t : from_threads_) t->Join();
    for (auto& t : to_threads_) t->Join();
  }

  // Runs UnparkRequeue with `op`; checks that the callback saw `op` and the
  // same result that is returned, and returns it.
  UnparkResult Run(RequeueOp op, UnparkToken token) {
    int validate_calls = 0, callback_calls = 0;
    UnparkResult in_callback;
    const UnparkResult r = UnparkRequeue(
        from(), to(),
        [&] {
          ++validate_calls;
          return op;
        },
        [&](RequeueOp seen_op, UnparkResult seen) {
          ++callback_calls;
          EXPECT_EQ(seen_op, op);
          in_callback = seen;
          return token;
        });
    EXPECT_EQ(validate_calls, 1);
    EXPECT_EQ(callback_calls, op == RequeueOp::kAbort ? 0 : 1);
    if (op != RequeueOp::kAbort) {
      EXPECT_EQ(in_callback.unparked_threads, r.unparked_threads);
      EXPECT_EQ(in_callback.requeued_threads, r.requeued_threads);
      EXPECT_EQ(in_callback.have_more_threads, r.have_more_threads);
      EXPECT_EQ(in_callback.be_fair, r.be_fair);
    }
    return r;
  }

  uintptr_t from() const { return KeyOf(&from_key_); }
  uintptr_t to() const { return KeyOf(&to_key_); }

  Slot from_key_, to_key_;
  std::vector<std::unique_ptr<ParkedThread>> from_threads_, to_threads_;
  Watchdog wd_{kWatch, "Requeue"};
};

TEST_F(Requeue, AbortDoesNothing) {
  const UnparkResult r = Run(RequeueOp::kAbort, 5);
  EXPECT_EQ(r.unparked_threads, 0u);
  EXPECT_EQ(r.requeued_threads, 0u);
  EXPECT_FALSE(r.have_more_threads);
  EXPECT_EQ(QueuedTokens(from()), (std::vector<ParkToken>{10, 11, 12, 13}));
  EXPECT_EQ(QueuedTokens(to()), std::vector<ParkToken>{1});
}

TEST_F(Requeue, UnparkOneRequeueRest) {
  const UnparkResult r = Run(RequeueOp::kUnparkOneRequeueRest, 55);
  EXPECT_EQ(r.unparked_threads, 1u);
  EXPECT_EQ(r.requeued_threads, 3u);
  EXPECT_FALSE(r.have_more_threads);
  // The first waiter on `from` woke with the callback's token.
  const auto& rec = from_threads_[0]->Join();
  EXPECT_TRUE(rec.result.unparked());
  EXPECT_EQ(rec.result.token, 55u);
  // The rest joined `to` behind its own waiter, in their order.
  EXPECT_EQ(QueuedTokens(from()), std::vector<ParkToken>{});
  EXPECT_EQ(QueuedTokens(to()), (std::vector<ParkToken>{1, 11, 12, 13}));
  // Requeued threads stay asleep and are woken through `to` (FIFO).
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(UnparkOne(to(), [&](UnparkResult) { return UnparkToken(200 + i); })
                  .unparked_threads,
              1u);
  }
  EXPECT_EQ(to_threads_[0]->Join().result.token, 200u);
  for (int i = 1; i < 4; ++i) {
    const auto& moved = from_threads_[i]->Join();
    EXPECT_TRUE(moved.result.unparked());
    EXPECT_EQ(moved.result.token, UnparkToken(200 + i));
  }
}

TEST_F(Requeue, RequeueAll) {
  const UnparkResult r = Run(RequeueOp::kRequeueAll, 55);
  EXPECT_EQ(r.unparked_threads, 0u);
  EXPECT_EQ(r.requeued_threads, 4u);
  EXPECT_FALSE(r.have_more_threads);
  EXPECT_EQ(QueuedTokens(from()), std::vector<ParkToken>{});
  EXPECT_EQ(QueuedTokens(to()), (std::vector<ParkToken>{1, 10, 11, 12, 13}));
  for (auto& t : from_threads_) EXPECT_FALSE(t->done());
  EXPECT_EQ(UnparkAll(to(), 8), 5u);
  for (auto& t : from_threads_) EXPECT_EQ(t->Join().result.token, 8u);
}

TEST_F(Requeue, UnparkOneLeavesTheRest) {
  const UnparkResult r = Run(RequeueOp::kUnparkOne, 66);
  EXPECT_EQ(r.unparked_threads, 1u);
  EXPECT_EQ(r.requeued_threads, 0u);
  EXPECT_TRUE(r.have_more_threads);
  EXPECT_EQ(from_threads_[0]->Join().result.token, 66u);
  EXPECT_EQ(QueuedTokens(from()), (std::vector<ParkToken>{11, 12, 13}));
  EXPECT_EQ(QueuedTokens(to()), std::vector<ParkToken>{1});
}

TEST_F(Requeue, RequeueOneMovesOnlyTheFirst) {
  const UnparkResult r = Run(RequeueOp::kRequeueOne, 0);
  EXPECT_EQ(r.unparked_threads, 0u);
  EXPECT_EQ(r.requeued_threads, 1u);
  EXPECT_TRUE(r.have_more_threads);
  EXPECT_EQ(QueuedTokens(from()), (std::vector<ParkToken>{11, 12, 13}));
  EXPECT_EQ(QueuedTokens(to()), (std::vector<ParkToken>{1, 10}));
}

TEST_F(Requeue, RequeueOneOfTheLastThreadClearsMore) {
  EXPECT_EQ(UnparkAll(from()), 4u);
  for (auto& t : from_threads_) t->Join();
  from_threads_ = ParkInOrder(from(), 1, 40);
  const UnparkResult r = Run(RequeueOp::kRequeueOne, 0);
  EXPECT_EQ(r.requeued_threads, 1u);
  EXPECT_FALSE(r.have_more_threads);
  EXPECT_EQ(QueuedTokens(to()), (std::vector<ParkToken>{1, 40}));
}

TEST(UnparkRequeueEmpty, EmptyFromReportsNothing) {
  Slot a, b;
  for (RequeueOp op :
       {RequeueOp::kUnparkOneRequeueRest, RequeueOp::kRequeueAll,
        RequeueOp::kUnparkOne, RequeueOp::kRequeueOne}) {
    int calls = 0;
    const UnparkResult r = UnparkRequeue(
        KeyOf(&a), KeyOf(&b), [&] { return op; },
        [&](RequeueOp, UnparkResult seen) {
          ++calls;
          EXPECT_EQ(seen.unparked_threads, 0u);
          EXPECT_EQ(seen.requeued_threads, 0u);
          EXPECT_FALSE(seen.have_more_threads);
          EXPECT_FALSE(seen.be_fair);
          return kDefaultUnparkToken;
        });
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(r.unparked_threads + r.requeued_threads, 0u);
  }
}

// A thread requeued to another key and then timing out must leave the queue
// of the key it is on now, and left_queue() must name that key: a lock that
// a condvar requeued waiters onto relies on was_last_thread for its own key.
// Regression test: the timeout path used to search the original key's
// bucket and walked off the end of its queue.
TEST(UnparkRequeueTimeout, RequeuedThreadTimesOutFromItsNewKey) {
  Watchdog wd(kWatch, "RequeuedThreadTimesOut");
  Slot a, b;
  // The requeue must happen before the deadline; if this machine is so
  // loaded that it does not, retry with a longer deadline.
  absl::Duration timeout = absl::Milliseconds(300);
  for (int attempt = 0; attempt < 6; ++attempt, timeout *= 2) {
    ParkedThread t(KeyOf(&a), 1, Deadline::In(timeout));
    ASSERT_TRUE(t.AwaitEnqueued());
    const UnparkResult r = UnparkRequeue(
        KeyOf(&a), KeyOf(&b), [] { return RequeueOp::kRequeueAll; },
        [](RequeueOp, UnparkResult) { return kDefaultUnparkToken; });
    const auto& rec = t.Join();
    ASSERT_TRUE(rec.result.timed_out());
    if (r.requeued_threads == 0) continue;  // it timed out first
    EXPECT_EQ(rec.left_queue_calls, 1);
    EXPECT_EQ(rec.left_queue_key, KeyOf(&b));
    EXPECT_TRUE(rec.was_last_thread);
    EXPECT_EQ(UnparkAll(KeyOf(&a)), 0u);
    EXPECT_EQ(UnparkAll(KeyOf(&b)), 0u);
    return;
  }
  FAIL() << "could not requeue before the deadline";
}

TEST(UnparkRequeueTimeout, RequeuedThreadTimingOutKeepsOthersQueued) {
  Watchdog wd(kWatch, "RequeuedThreadTimingOutKeepsOthers");
  Slot a, b;
  ParkedThread on_b(KeyOf(&b), 1);
  ASSERT_TRUE(on_b.AwaitEnqueued());
  absl::Duration timeout = absl::Milliseconds(300);
  for (int attempt = 0; attempt < 6; ++attempt, timeout *= 2) {
    ParkedThread t(KeyOf(&a), 2, Deadline::In(timeout));
    ASSERT_TRUE(t.AwaitEnqueued());
    const UnparkResult r = UnparkRequeue(
        KeyOf(&a), KeyOf(&b), [] { return RequeueOp::kRequeueAll; },
        [](RequeueOp, UnparkResult) { return kDefaultUnparkToken; });
    const auto& rec = t.Join();
    ASSERT_TRUE(rec.result.timed_out());
    if (r.requeued_threads == 0) continue;
    EXPECT_EQ(rec.left_queue_key, KeyOf(&b));
    EXPECT_FALSE(rec.was_last_thread);
    EXPECT_EQ(QueuedTokens(KeyOf(&b)), std::vector<ParkToken>{1});
    EXPECT_EQ(UnparkAll(KeyOf(&b)), 1u);
    on_b.Join();
    return;
  }
  FAIL() << "could not requeue before the deadline";
}

// --- UnparkFilter -----------------------------------------------------------

class Filter : public ::testing::Test {
 protected:
  void SetUp() override {
    // A waiter on another key goes first (same bucket under fixed:1): the
    // filter must never see its token.
    other_ = ParkInOrder(KeyOf(&other_key_), 1, 999);
    threads_ = ParkInOrder(key(), 6, 0);
  }
  void TearDown() override {
    UnparkAll(key());
    UnparkAll(KeyOf(&other_key_));
    for (auto& t : threads_) t->Join();
    for (auto& t : other_) t->Join();
  }
  uintptr_t key() const { return KeyOf(&key_); }

  Slot key_, other_key_;
  std::vector<std::unique_ptr<ParkedThread>> threads_, other_;
  Watchdog wd_{kWatch, "Filter"};
};

TEST_F(Filter, UnparksChosenThreadsInFifoOrder) {
  std::vector<ParkToken> seen;
  int callbacks = 0;
  const UnparkResult r = UnparkFilter(
      key(),
      [&](ParkToken t) {
        seen.push_back(t);
        return t % 2 == 0 ? FilterOp::kUnpark : FilterOp::kSkip;
      },
      [&](UnparkResult res) {
        ++callbacks;
        EXPECT_EQ(res.unparked_threads, 3u);
        EXPECT_TRUE(res.have_more_threads);
        return UnparkToken{123};
      });
  EXPECT_EQ(callbacks, 1);
  EXPECT_EQ(seen, (std::vector<ParkToken>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(r.unparked_threads, 3u);
  EXPECT_EQ(r.requeued_threads, 0u);
  EXPECT_TRUE(r.have_more_threads);
  for (int i = 0; i < 6; i += 2) {
    const auto& rec = threads_[i]->Join();
    EXPECT_TRUE(rec.result.unparked());
    EXPECT_EQ(rec.result.token, 123u);
  }
  // Skipped threads keep their places.
  EXPECT_EQ(QueuedTokens(key()), (std::vector<ParkToken>{1, 3, 5}));
}

TEST_F(Filter, StopEndsTheScan) {
  std::vector<ParkToken> seen;
  const UnparkResult r = UnparkFilter(
      key(),
      [&](ParkToken t) {
        seen.push_back(t);
        if (t == 0) return FilterOp::kUnpark;
        if (t == 1) return FilterOp::kSkip;
        return FilterOp::kStop;
      },
      [](UnparkResult res) {
        EXPECT_EQ(res.unparked_threads, 1u);
        return UnparkToken{5};
      });
  EXPECT_EQ(seen, (std::vector<ParkToken>{0, 1, 2}));
  EXPECT_EQ(r.unparked_threads, 1u);
  EXPECT_TRUE(r.have_more_threads);
  EXPECT_EQ(threads_[0]->Join().result.token, 5u);
  // The thread the scan stopped at (and all behind it) is still queued.
  EXPECT_EQ(QueuedTokens(key()), (std::vector<ParkToken>{1, 2, 3, 4, 5}));
}

TEST_F(Filter, UnparkEveryoneClearsMore) {
  const UnparkResult r = UnparkFilter(
      key(), [](ParkToken) { return FilterOp::kUnpark; },
      [](UnparkResult res) {
        EXPECT_EQ(res.unparked_threads, 6u);
        EXPECT_FALSE(res.have_more_threads);
        return UnparkToken{4};
      });
  EXPECT_EQ(r.unparked_threads, 6u);
  EXPECT_FALSE(r.have_more_threads);
  for (auto& t : threads_) EXPECT_EQ(t->Join().result.token, 4u);
  // The other key's waiter is untouched.
  EXPECT_EQ(QueuedTokens(KeyOf(&other_key_)), std::vector<ParkToken>{999});
}

TEST_F(Filter, SkipEveryoneStillRunsCallback) {
  int callbacks = 0;
  const UnparkResult r = UnparkFilter(
      key(), [](ParkToken) { return FilterOp::kSkip; },
      [&](UnparkResult res) {
        ++callbacks;
        EXPECT_EQ(res.unparked_threads, 0u);
        EXPECT_TRUE(res.have_more_threads);
        EXPECT_FALSE(res.be_fair);
        return kDefaultUnparkToken;
      });
  EXPECT_EQ(callbacks, 1);
  EXPECT_EQ(r.unparked_threads, 0u);
  EXPECT_TRUE(r.have_more_threads);
  EXPECT_FALSE(r.be_fair);
  for (auto& t : threads_) EXPECT_FALSE(t->done());
}

TEST(UnparkFilterEmpty, FilterNotCalledOnEmptyKey) {
  Slot s;
  int filters = 0, callbacks = 0;
  const UnparkResult r = UnparkFilter(
      KeyOf(&s),
      [&](ParkToken) {
        ++filters;
        return FilterOp::kUnpark;
      },
      [&](UnparkResult res) {
        ++callbacks;
        EXPECT_EQ(res.unparked_threads, 0u);
        EXPECT_FALSE(res.have_more_threads);
        return kDefaultUnparkToken;
      });
  EXPECT_EQ(filters, 0);
  EXPECT_EQ(callbacks, 1);
  EXPECT_EQ(r.unparked_threads, 0u);
}

// --- A thread parks many times: its state resets between parks ------------

TEST(Park, SameThreadParksRepeatedlyWithFreshTokens) {
  Watchdog wd(kWatch, "ParksRepeatedly");
  Slot s;
  const uintptr_t key = KeyOf(&s);
  constexpr int kRounds = 50;
  std::atomic<int> enqueued{0};
  std::vector<ParkResult> results(kRounds);
  std::thread t([&] {
    for (int i = 0; i < kRounds; ++i) {
      results[i] = Park(
          key, [] { return true; },
          [&] { enqueued.fetch_add(1, std::memory_order_release); },
          [](uintptr_t, bool) {}, ParkToken(i), Deadline::Never());
    }
  });
  for (int i = 0; i < kRounds; ++i) {
    ASSERT_TRUE(WaitFor([&] { return enqueued.load() > i; }));
    // The filter sees this round's park token, not a stale one.
    EXPECT_EQ(QueuedTokens(key), std::vector<ParkToken>{ParkToken(i)});
    EXPECT_EQ(UnparkOne(key, [&](UnparkResult) { return UnparkToken(i * 3); })
                  .unparked_threads,
              1u);
  }
  t.join();
  for (int i = 0; i < kRounds; ++i) {
    EXPECT_TRUE(results[i].unparked());
    EXPECT_EQ(results[i].token, UnparkToken(i * 3));
  }
}

}  // namespace
}  // namespace parklot::internal

namespace parklot::internal {
namespace {

// --- Signal handlers: UnparkUpTo inside a lock section, away waiters ------

// A validate callback runs under the bucket lock, inside a lock section,
// just where a signal handler can interrupt a thread: an UnparkUpTo there
// must not take a bucket lock (on a one-bucket table it would wait for
// itself) but run once the section closes.
TEST(UnparkUpTo, InsideALockSectionIsDeferredToItsEnd) {
  Watchdog wd(kWatch, "UnparkUpToDeferred");
  Slot parked_on, park_here;
  ParkedThread t(KeyOf(&parked_on));
  ASSERT_TRUE(t.AwaitEnqueued());
  size_t returned = 99;
  bool still_queued_inside = false;
  const ParkResult r = Park(KeyOf(&park_here), [&] {
    returned = UnparkUpTo(KeyOf(&parked_on), 1);
    still_queued_inside = !t.done() && t.data()->parker.load() != 0;
    return false;
  });
  EXPECT_TRUE(r.invalid());
  EXPECT_EQ(returned, 0u);  // deferred: nothing woken yet
  EXPECT_TRUE(still_queued_inside);
  // Ran when Park's section closed, before Park returned.
  EXPECT_EQ(t.data()->parker.load(), 0u);
  const auto& rec = t.Join();
  EXPECT_TRUE(rec.result.unparked());
  EXPECT_EQ(rec.result.token, kDefaultUnparkToken);
}

TEST(UnparkUpTo, CountsAndTokenMask) {
  Watchdog wd(kWatch, "UnparkUpToCounts");
  Slot s;
  // Tokens 1, 2, 1, 2 (as futex bitsets).
  ParkedThread a(KeyOf(&s), 1);
  ASSERT_TRUE(a.AwaitEnqueued());
  ParkedThread b(KeyOf(&s), 2);
  ASSERT_TRUE(b.AwaitEnqueued());
  ParkedThread c(KeyOf(&s), 1);
  ASSERT_TRUE(c.AwaitEnqueued());
  EXPECT_EQ(UnparkUpTo(KeyOf(&s), 5, 2), 1u);  // b only
  EXPECT_TRUE(b.Join().result.unparked());
  EXPECT_EQ(UnparkUpTo(KeyOf(&s), 1), 1u);  // a, first in line
  EXPECT_TRUE(a.Join().result.unparked());
  EXPECT_FALSE(c.done());
  EXPECT_EQ(UnparkUpTo(KeyOf(&s), 0), 0u);
  EXPECT_EQ(UnparkUpTo(KeyOf(&s), SIZE_MAX), 1u);
  EXPECT_TRUE(c.Join().result.unparked());
}

// More distinct keys deferred in one section than a thread keeps: the
// overflow wakes every parked thread (a spurious wake-up for those no
// handler asked for), so none of the requested wakes is lost.
TEST(UnparkUpTo, DeferredOverflowWakesEveryone) {
  Watchdog wd(kWatch, "UnparkUpToOverflow");
  constexpr size_t kKeys = kDeferredUnparks + 4;
  std::vector<Slot> slots(kKeys + 1);
  std::vector<std::unique_ptr<ParkedThread>> threads;
  for (size_t i = 0; i <= kKeys; ++i) {
    threads.push_back(std::make_unique<ParkedThread>(KeyOf(&slots[i])));
    ASSERT_TRUE(threads.back()->AwaitEnqueued());
  }
  Slot park_here;
  Park(KeyOf(&park_here), [&] {
    for (size_t i = 0; i < kKeys; ++i) UnparkUpTo(KeyOf(&slots[i]), 1);
    return false;
  });
  for (auto& t : threads) EXPECT_TRUE(t->Join().result.unparked());
}

// What the preload shim's handler wrapper does, with a handler that leaves
// the wait by siglongjmp: the record stays queued, marked away; an unpark
// must skip it (no handoff to a thread that is gone) and wake the next
// waiter; the jumper's next Park removes any record left.
sigjmp_buf g_jump;
void JumpingHandler(int) {
  SignalHandlerScope scope;
  EnterSignalHandler(&scope);
  siglongjmp(g_jump, 1);
}

TEST(SignalHandlers, AwayWaiterGetsNoHandoffAndTheNextOneDoes) {
  Watchdog wd(kWatch, "AwayWaiter");
  struct sigaction sa = {}, old = {};
  sa.sa_handler = JumpingHandler;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR2, &sa, &old), 0);
  Slot s;
  std::atomic<int> stage{0};
  std::atomic<ParkRecord*> jumper_td{nullptr};
  std::thread jumper([&] {
    jumper_td.store(CurrentThreadData()->Record());
    if (sigsetjmp(g_jump, 1) == 0) {
      stage.store(1);
      Park(KeyOf(&s), [] { return true; });
      stage.store(-1);  // must not return normally
      return;
    }
    stage.store(2);
    while (stage.load() != 3) std::this_thread::yield();
    // Its next Park removes what is left of the old wait first.
    int other;
    EXPECT_TRUE(Park(KeyOf(&other), [] { return false; }).invalid());
    EXPECT_EQ(jumper_td.load()->parker.load(), 0u);
  });
  ASSERT_TRUE(WaitFor([&] {
    ParkRecord* td = jumper_td.load();
    return td != nullptr && (td->parker.load() & kParkerAsleep) != 0;
  }));
  ASSERT_EQ(pthread_kill(jumper.native_handle(), SIGUSR2), 0);
  ASSERT_TRUE(WaitFor([&] { return stage.load() == 2; }));
  EXPECT_NE(jumper_td.load()->parker.load() & kParkerAway, 0u);

  ParkedThread next(KeyOf(&s));
  ASSERT_TRUE(next.AwaitEnqueued());
  const UnparkResult r = UnparkOne(KeyOf(&s), [](UnparkResult r) {
    return r.unparked_threads == 1 ? UnparkToken{77} : UnparkToken{0};
  });
  EXPECT_EQ(r.unparked_threads, 1u);
  EXPECT_FALSE(r.have_more_threads);
  const auto& rec = next.Join();
  EXPECT_TRUE(rec.result.unparked());
  EXPECT_EQ(rec.result.token, 77u);
  // The away record was evicted with the default token, not handed 77.
  EXPECT_EQ(jumper_td.load()->parker.load(), 0u);
  stage.store(3);
  jumper.join();
  sigaction(SIGUSR2, &old, nullptr);
}

// --- Real-time queue order (docs/design.md section 3.15) -----------------

// A thread that becomes SCHED_FIFO `priority` (0: stays SCHED_OTHER), tells
// the lot as a program that links the library does (SchedulingChanged),
// and parks on `key` with `token`.
class RealTimeParker {
 public:
  RealTimeParker(uintptr_t key, int priority, ParkToken token)
      : thread_([this, key, priority, token] {
          if (priority > 0) {
            sched_param p{};
            p.sched_priority = priority;
            EXPECT_EQ(pthread_setschedparam(pthread_self(), SCHED_FIFO, &p), 0);
            SchedulingChanged(true);
          }
          result_ = Park(
              key, [] { return true; },
              [this] { queued_.store(true, std::memory_order_release); },
              [](uintptr_t, bool) {}, token, Deadline::Never());
        }) {
    EXPECT_TRUE(WaitFor([this] {
      return queued_.load(std::memory_order_acquire);
    }));
  }
  ~RealTimeParker() {
    if (thread_.joinable()) thread_.join();
  }
  ParkResult Join() {
    if (thread_.joinable()) thread_.join();
    return result_;
  }

 private:
  std::atomic<bool> queued_{false};
  ParkResult result_{ParkResult::kInvalid, 0};
  std::thread thread_;
};

// Whether this process may make SCHED_FIFO threads (CAP_SYS_NICE).
bool MayUseRealTime() {
  sched_param p{};
  p.sched_priority = 1;
  if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &p) != 0) return false;
  p.sched_priority = 0;
  EXPECT_EQ(pthread_setschedparam(pthread_self(), SCHED_OTHER, &p), 0);
  return true;
}

// Waiters of one key queue highest real-time priority first, FIFO among
// equals and among the non-real-time; a requeue takes them to the other
// key's queue by priority; the unparks follow that order.
TEST(QueueOrder, RealTimeWaitersByPriorityAlsoAfterARequeue) {
  if (!MayUseRealTime()) GTEST_SKIP() << "SCHED_FIFO needs CAP_SYS_NICE";
  Watchdog wd(kWatch, "RealTimeWaitersByPriorityAlsoAfterARequeue");
  Slot a, b;
  const uintptr_t from = KeyOf(&a), to = KeyOf(&b);
  // Tokens are the order of arrival; priorities 0, 10, 30, 20, 0, 30.
  const int priorities[] = {0, 10, 30, 20, 0, 30};
  std::vector<std::unique_ptr<RealTimeParker>> threads;
  for (int i = 0; i < 6; ++i) {
    threads.push_back(
        std::make_unique<RealTimeParker>(from, priorities[i], ParkToken(i + 1)));
  }
  EXPECT_EQ(QueuedTokens(from), (std::vector<ParkToken>{3, 6, 4, 2, 1, 5}));
  // `to` holds a priority-20 waiter and a non-real-time one.
  threads.push_back(std::make_unique<RealTimeParker>(to, 20, 7));
  threads.push_back(std::make_unique<RealTimeParker>(to, 0, 8));
  const UnparkResult r = UnparkRequeue(
      from, to, [] { return RequeueOp::kRequeueAll; },
      [](RequeueOp, UnparkResult) { return kDefaultUnparkToken; });
  EXPECT_EQ(r.requeued_threads, 6u);
  EXPECT_EQ(QueuedTokens(to), (std::vector<ParkToken>{3, 6, 7, 4, 2, 8, 1, 5}));
  // Each UnparkOne takes the first of that order.
  std::vector<ParkToken> queued = QueuedTokens(to);
  while (!queued.empty()) {
    EXPECT_EQ(UnparkOne(to, [](UnparkResult) { return UnparkToken(99); })
                  .unparked_threads,
              1u);
    queued.erase(queued.begin());
    EXPECT_EQ(QueuedTokens(to), queued);
  }
  for (auto& t : threads) EXPECT_TRUE(t->Join().unparked());
}

// A park stays on the record it queued from enqueue to wake-up, even if
// the thread's record changes meanwhile (a task sharing its TLS registering
// it at that moment: docs/design.md section 2.11). It slept on the record
// it read afresh, so a zeroed one made Park return at once, unparked by no
// one, with its queued record left behind.
TEST(ParkRecords, AParkStaysOnTheRecordItQueued) {
  Watchdog wd(kWatch, "AParkStaysOnTheRecordItQueued");
  Slot s;
  ParkRecord decoy;  // released (parker 0), in no queue
  std::atomic<bool> returned{false};
  ParkResult result{ParkResult::kInvalid, 0};
  std::thread t([&] {
    ThreadData* td = CurrentThreadData();
    ParkRecord* const mine = td->record;
    result = Park(
        KeyOf(&s), [] { return true; }, [&] { td->record = &decoy; },
        [](uintptr_t, bool) {}, kDefaultParkToken, Deadline::Never());
    td->record = mine;
    returned.store(true, std::memory_order_release);
  });
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_FALSE(returned.load(std::memory_order_acquire))
      << "Park returned though no one unparked it";
  size_t woken = 0;
  ASSERT_TRUE(WaitFor([&] {
    woken += UnparkOne(KeyOf(&s), [](UnparkResult) { return UnparkToken{5}; })
                 .unparked_threads;
    return woken != 0;
  }));
  t.join();
  EXPECT_EQ(woken, 1u);
  EXPECT_TRUE(result.unparked());
  EXPECT_EQ(result.token, 5u);
}

}  // namespace
}  // namespace parklot::internal
