// Growth under load, on the process's own table: 1,000 threads park on
// distinct keys while their registration grows the table from 16 buckets
// to >= 4,096. Every thread must be woken by its own key (it receives that
// key's token), by no other key, and none may be lost; threads of one key
// keep their FIFO order across every growth step; timed-out parks leave the
// bucket their waiter was moved to; a requeue in the middle of the growth
// keeps order.
//
// Its own binary: the table never shrinks, so the "starts at 16" part needs
// a fresh process.
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "hash/bucket_table.h"
#include "runtime/config.h"
#include "runtime/deadline.h"
#include "runtime/global_table.h"
#include "runtime/parking_lot.h"
#include "runtime/registry.h"
#include "runtime/thread_data.h"
#include "tests/core/parked_thread.h"
#include "tests/core/test_support.h"
#include "tests/util/watchdog.h"

namespace parklot::internal {
namespace {

using coretest::ParkedThread;
using coretest::ParkInOrder;
using coretest::QueuedTokens;
using coretest::SmallThread;
using coretest::WaitFor;

struct alignas(64) Key {
  int x = 0;
};

UnparkToken TokenFor(int i) { return UnparkToken(0x10000 + i); }

TEST(GrowthUnderLoad, ThousandThreadsOnDistinctKeys) {
  testing::Watchdog wd(coretest::WatchdogLimit(absl::Seconds(240)),
                       "ThousandThreadsOnDistinctKeys");
  BucketTable& table = GlobalTable();
  // The default policy grows with threads (and with collisions).
  ASSERT_EQ(table.options().policy, GrowthPolicy::kAdaptive);
  // The default cap must leave room for the growth under test.
  ASSERT_GE(table.options().max_buckets, 4096u);
  EXPECT_EQ(table.bucket_count(), 16u);
  const uint64_t growths_before = table.growths();

  // Threads of one key, parked before any growth in a known order.
  constexpr int kFifoKeys = 4, kFifoDepth = 5;
  std::vector<Key> fifo_keys(kFifoKeys);
  std::vector<std::vector<std::unique_ptr<ParkedThread>>> fifo;
  for (int k = 0; k < kFifoKeys; ++k) {
    fifo.push_back(ParkInOrder(KeyOf(&fifo_keys[k]), kFifoDepth, 10 * k));
  }
  // Threads to be requeued from one key to another halfway through.
  Key requeue_from, requeue_to;
  auto requeued = ParkInOrder(KeyOf(&requeue_from), 4, 500);
  // Timed parks that expire during or after the growth.
  std::vector<Key> timed_keys(8);
  std::vector<std::unique_ptr<ParkedThread>> timed;
  for (auto& k : timed_keys) {
    timed.push_back(std::make_unique<ParkedThread>(
        KeyOf(&k), 0, Deadline::In(absl::Seconds(2))));
  }

  // The 1,000: thread i parks on keys[i] with park token i. After waking it
  // stays alive until `release` so the live-thread count (and with it the
  // table's target size) keeps rising while others still park.
  constexpr int kThreads = 1000;
  std::vector<Key> keys(kThreads);
  std::vector<std::atomic<bool>> enqueued(kThreads);
  std::vector<ParkResult> results(kThreads);
  absl::Notification release;
  std::vector<SmallThread> threads(kThreads);

  // Even threads are woken while the table is still growing, by a waker
  // that follows the spawning loop; odd ones once it has grown.
  std::atomic<int> waker_errors{0};
  SmallThread waker([&] {
    for (int i = 0; i < kThreads; i += 2) {
      if (!WaitFor([&] { return enqueued[i].load(); })) {
        waker_errors.fetch_add(1);
        continue;
      }
      const UnparkResult r = UnparkOne(KeyOf(&keys[i]), [&](UnparkResult s) {
        return TokenFor(i);
      });
      if (r.unparked_threads != 1 || r.have_more_threads) {
        waker_errors.fetch_add(1);
      }
    }
  });

  for (int i = 0; i < kThreads; ++i) {
    threads[i].Start([&, i] {
      results[i] = Park(
          KeyOf(&keys[i]), [] { return true; }, [&] { enqueued[i] = true; },
          [](uintptr_t, bool) {}, ParkToken(i), Deadline::Never());
      release.WaitForNotification();
    });
    if (i == kThreads / 2) {
      // Mid-growth requeue: all four move, in order, behind nobody.
      const UnparkResult r = UnparkRequeue(
          KeyOf(&requeue_from), KeyOf(&requeue_to),
          [] { return RequeueOp::kRequeueAll; },
          [](RequeueOp, UnparkResult) { return kDefaultUnparkToken; });
      EXPECT_EQ(r.requeued_threads, 4u);
    }
  }
  for (int i = 0; i < kThreads; ++i) {
    ASSERT_TRUE(WaitFor([&] { return enqueued[i].load(); })) << i;
  }
  waker.Join();
  EXPECT_EQ(waker_errors.load(), 0);

  // The growth happened, with all of these threads parked or parking.
  EXPECT_GE(registry::LiveThreads(), static_cast<size_t>(kThreads));
  EXPECT_GE(table.bucket_count(), 4096u);
  EXPECT_GT(table.growths(), growths_before);

  // Odd threads: each still parked on its own key, alone.
  for (int i = kThreads - 1; i >= 1; i -= 2) {
    EXPECT_EQ(QueuedTokens(KeyOf(&keys[i])), std::vector<ParkToken>{ParkToken(i)});
    const UnparkResult r = UnparkOne(KeyOf(&keys[i]), [&](UnparkResult s) {
      EXPECT_EQ(s.unparked_threads, 1u);
      return TokenFor(i);
    });
    EXPECT_EQ(r.unparked_threads, 1u) << i;
    EXPECT_FALSE(r.have_more_threads) << i;
  }
  // A key nobody parked on wakes nobody.
  Key unused;
  EXPECT_EQ(UnparkAll(KeyOf(&unused)), 0u);

  // FIFO order per key survived every move.
  for (int k = 0; k < kFifoKeys; ++k) {
    std::vector<ParkToken> want;
    for (int j = 0; j < kFifoDepth; ++j) want.push_back(10 * k + j);
    EXPECT_EQ(QueuedTokens(KeyOf(&fifo_keys[k])), want) << "key " << k;
    for (int j = 0; j < kFifoDepth; ++j) {
      EXPECT_EQ(UnparkOne(KeyOf(&fifo_keys[k]),
                          [&](UnparkResult) { return UnparkToken(j); })
                    .unparked_threads,
                1u);
    }
    for (int j = 0; j < kFifoDepth; ++j) {
      const auto& rec = fifo[k][j]->Join();
      EXPECT_TRUE(rec.result.unparked());
      EXPECT_EQ(rec.result.token, UnparkToken(j)) << "key " << k;
    }
  }
  EXPECT_EQ(QueuedTokens(KeyOf(&requeue_from)), std::vector<ParkToken>{});
  EXPECT_EQ(QueuedTokens(KeyOf(&requeue_to)),
            (std::vector<ParkToken>{500, 501, 502, 503}));
  EXPECT_EQ(UnparkAll(KeyOf(&requeue_to), 9), 4u);
  for (auto& t : requeued) EXPECT_EQ(t->Join().result.token, 9u);
  for (size_t k = 0; k < timed.size(); ++k) {
    const auto& rec = timed[k]->Join();
    EXPECT_TRUE(rec.result.timed_out());
    EXPECT_EQ(rec.left_queue_key, KeyOf(&timed_keys[k]));
    EXPECT_TRUE(rec.was_last_thread);
    EXPECT_EQ(UnparkAll(KeyOf(&timed_keys[k])), 0u);
  }

  release.Notify();
  for (auto& t : threads) t.Join();
  for (int i = 0; i < kThreads; ++i) {
    EXPECT_TRUE(results[i].unparked()) << i;
    // Its own key's token: woken by no other key's unpark.
    EXPECT_EQ(results[i].token, TokenFor(i)) << i;
  }
}

}  // namespace
}  // namespace parklot::internal
