// Lost-wake-up torture (docs/design.md section 6, invariant 1): a waiter that
// validates "the word still has its old value" and sleeps races a waker that
// stores the new value and then unparks. If the waker could run between the
// waiter's check and its enqueue, the waiter would sleep forever.
//
// Millions of rounds in total, with randomized small delays on both sides
// so that each side of the race wins in some rounds. Built twice: with the
// default table and with PARKLOT_POLICY=fixed:1, where every key of every
// pair shares one bucket and one lock.
//
// A lost wake-up shows up as a park that sleeps for kLostAfter although its
// waker stores and unparks within microseconds; the test counts those
// (and the watchdog turns any other hang into a failure).
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "runtime/config.h"
#include "runtime/deadline.h"
#include "runtime/global_table.h"
#include "runtime/parking_lot.h"
#include "runtime/thread_data.h"
#include "tests/core/test_support.h"
#include "tests/util/watchdog.h"

namespace parklot::internal {
namespace {

using coretest::RandomDelay;
using coretest::Rng;
using coretest::Scaled;
using coretest::WatchdogLimit;
using testing::Watchdog;

// Far beyond any scheduling delay of a runnable waker, so a park that
// sleeps this long was not woken by the store-then-unpark it waited for.
const absl::Duration kLostAfter = absl::Seconds(30);
const absl::Duration kWatch = WatchdogLimit(absl::Seconds(240));

struct alignas(64) Word {
  std::atomic<uint64_t> v{0};
};

#ifdef PARKLOT_TEST_FIXED1
TEST(LostWakeupConfig, RunsOnOneBucketTable) {
  EXPECT_EQ(GetConfig().table.policy, GrowthPolicy::kFixed);
  EXPECT_EQ(GlobalTable().bucket_count(), 1u);
}
#endif

// Waits until `w` >= `target`: validate-then-sleep. Returns false if a
// park timed out (a wake-up was lost) or `abort` was raised.
bool WaitAtLeast(Word& w, uint64_t target, Rng& rng,
                 const std::atomic<bool>& abort) {
  while (w.v.load(std::memory_order_acquire) < target) {
    if (abort.load(std::memory_order_relaxed)) return false;
    RandomDelay(rng);
    const ParkResult r = Park(
        KeyOf(&w),
        [&] {
          const bool still_old = w.v.load(std::memory_order_relaxed) < target;
          // Widens the check-to-enqueue window: harmless under the bucket
          // lock (the waker's unpark waits for it), fatal if validate
          // ever ran outside it.
          RandomDelay(rng);
          return still_old;
        },
        [] {}, [](uintptr_t, bool) {}, 0, Deadline::In(kLostAfter));
    if (r.timed_out()) return false;
  }
  return true;
}

// Store-then-unpark.
void Publish(Word& w, uint64_t value, Rng& rng) {
  RandomDelay(rng);
  w.v.store(value, std::memory_order_release);
  UnparkOne(KeyOf(&w), [](UnparkResult) { return kDefaultUnparkToken; });
}

// Pairs of threads play ping-pong: each round, one publishes `ping` and
// waits for `pong`, the other waits for `ping` and publishes `pong`. Every
// round is two validate-then-sleep vs store-then-unpark races.
TEST(LostWakeup, PingPongPairs) {
  Watchdog wd(kWatch, "PingPongPairs");
  constexpr int kPairs = 4;
  const int64_t rounds = Scaled(200000, 2, 2);
  struct Pair {
    Word ping, pong;
  };
  std::vector<Pair> pairs(kPairs);
  std::atomic<bool> abort{false};
  std::atomic<int> lost{0};
  auto fail = [&](Pair&) {
    // Stop every pair, unsticking threads parked on any of them.
    lost.fetch_add(1);
    abort.store(true);
    for (Pair& q : pairs) {
      q.ping.v.store(UINT64_MAX);
      q.pong.v.store(UINT64_MAX);
      UnparkAll(KeyOf(&q.ping));
      UnparkAll(KeyOf(&q.pong));
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < kPairs; ++i) {
    Pair& p = pairs[i];
    threads.emplace_back([&, i] {
      Rng rng(2 * i + 1);
      for (int64_t r = 1; r <= rounds && !abort.load(); ++r) {
        Publish(p.ping, r, rng);
        if (!WaitAtLeast(p.pong, r, rng, abort)) {
          if (!abort.load()) fail(p);
          return;
        }
      }
    });
    threads.emplace_back([&, i] {
      Rng rng(2 * i + 2);
      for (int64_t r = 1; r <= rounds && !abort.load(); ++r) {
        if (!WaitAtLeast(p.ping, r, rng, abort)) {
          if (!abort.load()) fail(p);
          return;
        }
        Publish(p.pong, r, rng);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(lost.load(), 0);
  EXPECT_FALSE(abort.load());
  for (auto& p : pairs) {
    EXPECT_EQ(p.ping.v.load(), static_cast<uint64_t>(rounds));
    EXPECT_EQ(p.pong.v.load(), static_cast<uint64_t>(rounds));
  }
  RecordProperty("handshakes", static_cast<int>(2 * kPairs * rounds));
}

// Several waiters per key: a counting semaphore. Producers add a permit
// (store) and UnparkOne; consumers take a permit or validate "none left"
// and sleep. A lost wake-up leaves a permit behind with every consumer
// asleep: the count of consumed permits would fall short (or hang).
TEST(LostWakeup, SemaphoreManyWaitersPerKey) {
  Watchdog wd(kWatch, "SemaphoreManyWaitersPerKey");
  constexpr int kProducers = 2, kConsumers = 4;
  const int64_t per_producer = Scaled(250000, 2, 2);
  const int64_t total = per_producer * kProducers;
  Word permits;
  std::atomic<bool> done{false};
  std::atomic<int64_t> consumed{0};
  std::atomic<int64_t> bad_results{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kConsumers; ++i) {
    threads.emplace_back([&, i] {
      Rng rng(100 + i);
      for (;;) {
        uint64_t c = permits.v.load(std::memory_order_acquire);
        while (c > 0) {
          if (permits.v.compare_exchange_weak(c, c - 1,
                                              std::memory_order_acq_rel)) {
            consumed.fetch_add(1, std::memory_order_relaxed);
            break;
          }
        }
        if (c > 0) continue;
        if (done.load(std::memory_order_acquire)) return;
        RandomDelay(rng);
        const ParkResult r = Park(KeyOf(&permits), [&] {
          const bool none = permits.v.load(std::memory_order_relaxed) == 0 &&
                            !done.load(std::memory_order_relaxed);
          RandomDelay(rng);  // see WaitAtLeast
          return none;
        });
        if (r.timed_out()) bad_results.fetch_add(1);
      }
    });
  }
  std::vector<std::thread> producers;
  for (int i = 0; i < kProducers; ++i) {
    producers.emplace_back([&, i] {
      Rng rng(200 + i);
      for (int64_t n = 0; n < per_producer; ++n) {
        RandomDelay(rng);
        permits.v.fetch_add(1, std::memory_order_release);
        UnparkOne(KeyOf(&permits),
                  [](UnparkResult) { return kDefaultUnparkToken; });
      }
    });
  }
  for (auto& t : producers) t.join();
  // Every permit must be consumed by consumers woken by the producers'
  // own UnparkOne calls: wait for that before telling anyone to stop.
  const bool all_consumed = coretest::WaitFor(
      [&] { return consumed.load() == total; }, absl::Seconds(60));
  EXPECT_TRUE(all_consumed) << "consumed " << consumed.load() << " of "
                            << total << ": permits left with every consumer "
                            << "asleep";
  done.store(true, std::memory_order_release);
  UnparkAll(KeyOf(&permits));
  for (auto& t : threads) t.join();
  EXPECT_EQ(consumed.load(), total);
  EXPECT_EQ(permits.v.load(), 0u);
  EXPECT_EQ(bad_results.load(), 0);
}

// UnparkAll against validate-then-sleep: a generation barrier. The last
// thread to arrive bumps the generation and wakes everyone; the others
// sleep while the generation is unchanged.
TEST(LostWakeup, GenerationBarrierUnparkAll) {
  Watchdog wd(kWatch, "GenerationBarrierUnparkAll");
  constexpr int kThreads = 6;
  const int64_t rounds = Scaled(60000, 2, 2);
  Word gen;
  std::atomic<int> arrived{0};
  std::atomic<int> lost{0};
  std::atomic<bool> abort{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      Rng rng(300 + i);
      for (int64_t r = 0; r < rounds && !abort.load(); ++r) {
        const uint64_t g = gen.v.load(std::memory_order_acquire);
        RandomDelay(rng);
        if (arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == kThreads) {
          arrived.store(0, std::memory_order_relaxed);
          gen.v.store(g + 1, std::memory_order_release);
          UnparkAll(KeyOf(&gen));
          continue;
        }
        while (gen.v.load(std::memory_order_acquire) == g && !abort.load()) {
          const ParkResult pr = Park(
              KeyOf(&gen),
              [&] {
                const bool same = gen.v.load(std::memory_order_relaxed) == g;
                RandomDelay(rng);  // see WaitAtLeast
                return same;
              },
              [] {}, [](uintptr_t, bool) {}, 0, Deadline::In(kLostAfter));
          if (pr.timed_out()) {
            // Lost: release everyone (the barrier is broken) and stop.
            lost.fetch_add(1);
            abort.store(true);
            gen.v.fetch_add(1);
            UnparkAll(KeyOf(&gen));
            return;
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(lost.load(), 0);
  EXPECT_FALSE(abort.load());
  if (!abort.load()) EXPECT_EQ(gen.v.load(), static_cast<uint64_t>(rounds));
}

// Everything at once on two keys: parkers on A with random (often already
// expired) deadlines, a mover requeueing A -> B with every op, and wakers
// unparking B (UnparkOne, UnparkFilter) and A (UnparkAll). Every wake an
// unparker reports must be received by exactly one park, with the token;
// every timed-out park must name the key it was on; nobody is left behind.
TEST(LostWakeup, RequeueTimeoutAndUnparkAccounting) {
  Watchdog wd(kWatch, "RequeueTimeoutAndUnparkAccounting");
  constexpr int kParkers = 4;
  constexpr UnparkToken kToken = 0xC0FFEE;
  const int64_t parks_each = Scaled(60000, 2, 2);
  Word a, b;
  std::atomic<bool> stop{false};
  std::atomic<int64_t> reported_wakes{0};   // sum of unparked_threads
  std::atomic<int64_t> received_wakes{0};   // kUnparked results
  std::atomic<int64_t> timeouts{0}, bad{0};
  std::atomic<int> parkers_left{kParkers};
  std::vector<std::thread> threads;
  for (int i = 0; i < kParkers; ++i) {
    threads.emplace_back([&, i] {
      Rng rng(400 + i);
      for (int64_t n = 0; n < parks_each; ++n) {
        // Mostly short timeouts (some already past), sometimes none.
        const uint64_t pick = rng.Below(8);
        const Deadline d = pick == 0 ? Deadline::Never()
                           : pick == 1
                               ? Deadline::Monotonic(absl::InfinitePast())
                               : Deadline::In(absl::Microseconds(
                                     rng.Below(200)));
        int timed_calls = 0;
        uintptr_t timed_key = 0;
        const ParkResult r = Park(
            KeyOf(&a), [&] { return !stop.load(std::memory_order_relaxed); },
            [] {},
            [&](uintptr_t k, bool) {
              ++timed_calls;
              timed_key = k;
            },
            ParkToken(i), d);
        if (r.unparked()) {
          received_wakes.fetch_add(1, std::memory_order_relaxed);
          if (r.token != kToken || timed_calls != 0) bad.fetch_add(1);
        } else if (r.timed_out()) {
          timeouts.fetch_add(1, std::memory_order_relaxed);
          if (timed_calls != 1 ||
              (timed_key != KeyOf(&a) && timed_key != KeyOf(&b))) {
            bad.fetch_add(1);
          }
        } else {
          break;  // invalid: told to stop
        }
      }
      parkers_left.fetch_sub(1);
    });
  }
  auto add_wakes = [&](size_t n) {
    reported_wakes.fetch_add(static_cast<int64_t>(n),
                             std::memory_order_relaxed);
  };
  std::thread mover([&] {
    Rng rng(500);
    const RequeueOp ops[] = {RequeueOp::kRequeueOne, RequeueOp::kRequeueAll,
                             RequeueOp::kUnparkOneRequeueRest,
                             RequeueOp::kUnparkOne, RequeueOp::kAbort};
    while (parkers_left.load() > 0) {
      const RequeueOp op = ops[rng.Below(5)];
      const UnparkResult r = UnparkRequeue(
          KeyOf(&a), KeyOf(&b), [&] { return op; },
          [&](RequeueOp, UnparkResult) { return kToken; });
      add_wakes(r.unparked_threads);
      RandomDelay(rng);
    }
  });
  std::thread waker([&] {
    Rng rng(600);
    while (parkers_left.load() > 0) {
      switch (rng.Below(3)) {
        case 0:
          add_wakes(UnparkOne(KeyOf(&b), [&](UnparkResult) { return kToken; })
                        .unparked_threads);
          break;
        case 1:
          add_wakes(UnparkFilter(
                        KeyOf(&b),
                        [&](ParkToken t) {
                          return t % 2 ? FilterOp::kUnpark : FilterOp::kSkip;
                        },
                        [&](UnparkResult) { return kToken; })
                        .unparked_threads);
          break;
        default:
          add_wakes(UnparkAll(KeyOf(&a), kToken));
          break;
      }
      RandomDelay(rng);
    }
  });
  // Parkers without a deadline may be asleep on A or B when the others
  // finish; keep both keys drained until every parker is done.
  std::thread drainer([&] {
    while (parkers_left.load() > 0) {
      absl::SleepFor(absl::Milliseconds(2));
      add_wakes(UnparkAll(KeyOf(&b), kToken));
    }
  });
  for (auto& t : threads) t.join();
  stop.store(true);
  mover.join();
  waker.join();
  drainer.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(reported_wakes.load(), received_wakes.load());
  EXPECT_EQ(received_wakes.load() + timeouts.load(), kParkers * parks_each);
  EXPECT_EQ(UnparkAll(KeyOf(&a)), 0u);
  EXPECT_EQ(UnparkAll(KeyOf(&b)), 0u);
}

}  // namespace
}  // namespace parklot::internal
