// Statistics: every slow-path counter moves by exactly what the test did,
// counters of exited threads are kept, and the table figures are the
// table's own.
#include "runtime/stats.h"

#include <atomic>
#include <string>
#include <thread>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "runtime/global_table.h"
#include "runtime/parking_lot.h"
#include "runtime/thread_data.h"
#include "tests/core/parked_thread.h"
#include "tests/core/test_support.h"
#include "tests/util/watchdog.h"

namespace parklot::internal {
namespace {

using coretest::ParkedThread;
using coretest::ParkInOrder;

TEST(Stats, CountersMoveByWhatHappened) {
  testing::Watchdog wd(coretest::WatchdogLimit(absl::Seconds(120)), "Stats");
  // The test's thread unparks below: it is registered, so its unparks count.
  CurrentThreadData();
  const Stats s0 = GetStats();

  // A short-lived thread: two refused parks, one timed-out park.
  std::thread t([] {
    int key;
    Park(KeyOf(&key), [] { return false; });
    Park(KeyOf(&key), [] { return false; });
    EXPECT_TRUE(Park(
                    KeyOf(&key), [] { return true; }, [] {},
                    [](uintptr_t, bool) {}, 0,
                    Deadline::In(absl::ZeroDuration()))
                    .timed_out());
  });
  t.join();
  const Stats s1 = GetStats();
  // Its counters outlive it.
  EXPECT_EQ(s1.invalid - s0.invalid, 2u);
  EXPECT_EQ(s1.parks - s0.parks, 1u);
  EXPECT_EQ(s1.timeouts - s0.timeouts, 1u);
  EXPECT_EQ(s1.unparks - s0.unparks, 0u);
  EXPECT_EQ(s1.threads_registered - s0.threads_registered, 1u);
  EXPECT_EQ(s1.live_threads, s0.live_threads);

  // A live parked thread's counters are in the snapshot too.
  int key;
  {
    ParkedThread p(KeyOf(&key));
    ASSERT_TRUE(p.AwaitEnqueued());
    ASSERT_TRUE(coretest::WaitFor([&] { return GetStats().parks == s1.parks + 1; }));
    EXPECT_EQ(GetStats().live_threads, s1.live_threads + 1);
    EXPECT_EQ(UnparkOne(KeyOf(&key), [](UnparkResult) { return UnparkToken{0}; })
                  .unparked_threads,
              1u);
    p.Join();
  }
  const Stats s2 = GetStats();
  EXPECT_EQ(s2.unparks - s1.unparks, 1u);
  EXPECT_EQ(s2.parks - s1.parks, 1u);

  // Every unpark flavour counts the threads it woke (requeued ones are not
  // woken).
  {
    auto three = ParkInOrder(KeyOf(&key), 3, 0);
    EXPECT_EQ(UnparkAll(KeyOf(&key)), 3u);
    for (auto& p : three) p->Join();
  }
  {
    auto four = ParkInOrder(KeyOf(&key), 4, 0);
    EXPECT_EQ(UnparkFilter(
                  KeyOf(&key),
                  [](ParkToken t) {
                    return t < 2 ? FilterOp::kUnpark : FilterOp::kSkip;
                  },
                  [](UnparkResult) { return kDefaultUnparkToken; })
                  .unparked_threads,
              2u);
    int other;
    const UnparkResult r = UnparkRequeue(
        KeyOf(&key), KeyOf(&other),
        [] { return RequeueOp::kUnparkOneRequeueRest; },
        [](RequeueOp, UnparkResult) { return kDefaultUnparkToken; });
    EXPECT_EQ(r.unparked_threads, 1u);
    EXPECT_EQ(r.requeued_threads, 1u);
    EXPECT_EQ(UnparkAll(KeyOf(&other)), 1u);
    for (auto& p : four) p->Join();
  }
  const Stats s3 = GetStats();
  EXPECT_EQ(s3.unparks - s2.unparks, 3u + 2 + 1 + 1);
  EXPECT_EQ(s3.parks - s2.parks, 7u);
  EXPECT_EQ(s3.timeouts, s1.timeouts);

  // Table figures.
  EXPECT_EQ(s3.buckets, GlobalTable().bucket_count());
  EXPECT_EQ(s3.growths, GlobalTable().growths());
  EXPECT_GE(s3.buckets, 16u);

  const std::string text = FormatStats(s3);
  EXPECT_NE(text.find("unparks: " + std::to_string(s3.unparks)),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(std::to_string(s3.buckets) + " buckets"),
            std::string::npos)
      << text;
}

TEST(Stats, FormatStatsShowsEveryCounter) {
  Stats s;
  s.parks = 11;
  s.unparks = 12;
  s.timeouts = 13;
  s.invalid = 14;
  s.spins = 15;
  s.spin_acquired = 16;
  s.handoffs = 17;
  s.growths = 18;
  s.growth_failures = 21;
  s.buckets = 4096;
  s.live_threads = 19;
  s.threads_registered = 20;
  s.collision_growths = 5;
  s.sampled_locks = 4096;
  s.sampled_collisions = 1024;
  s.retired_tables = 22;
  s.retired_bytes = 23 * 1024;
  const std::string text = FormatStats(s);
  for (const char* want :
       {"13 for threads, 5 for collisions", "1024 of 4096 sampled",
        "(25.0%)", "4096 buckets", "18 growths", "21 growth failures", "19 live", "20 registered",
        "retired tables: 22, 23 KiB", "parks: 11", "timed out 13", "refused by validate 14", "unparks: 12",
        "15 phases", "16 acquired", "handoffs: 17"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  }
}

}  // namespace
}  // namespace parklot::internal
