// The process's table when no table can be mapped (docs/design.md section 6,
// invariant 7): the initial table falls back to the one inside the BucketTable,
// 64 threads registering at once fail every growth (counted in the stats), and
// locks built on the lot still exclude and hand over; once memory is back, the
// next registration grows the table.
//
// Its own binary: the failure is set up before the lot's first use.
#include <stdint.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "hash/bucket_table.h"
#include "runtime/config.h"
#include "runtime/global_table.h"
#include "runtime/parking_lot.h"
#include "runtime/stats.h"
#include "runtime/thread_data.h"
#include "tests/core/test_support.h"
#include "tests/util/watchdog.h"

namespace parklot::internal {
namespace {

using coretest::Scaled;
using coretest::SmallThread;
using coretest::WaitFor;

// A three-state lock on the lot (0 free, 1 held, 2 held with waiters).
class ParkingLock {
 public:
  void Lock() {
    uint32_t expected = 0;
    if (word_.compare_exchange_strong(expected, 1, std::memory_order_acquire)) {
      return;
    }
    while (word_.exchange(2, std::memory_order_acquire) != 0) {
      Park(KeyOf(&word_),
           [this] { return word_.load(std::memory_order_relaxed) == 2; });
    }
  }
  void Unlock() {
    if (word_.exchange(0, std::memory_order_release) == 2) {
      UnparkOne(KeyOf(&word_),
                [](UnparkResult) { return kDefaultUnparkToken; });
    }
  }

 private:
  alignas(64) std::atomic<uint32_t> word_{0};
};

TEST(AllocationFailure, ProcessTableServesWhenNoTableCanBeMapped) {
  testing::Watchdog wd(coretest::WatchdogLimit(absl::Seconds(120)),
                       "ProcessTableServesWhenNoTableCanBeMapped");
  internal::FailTableMappingsAbove(0);
  Config config;
  config.table.buckets = 4096;  // cannot be mapped
  ASSERT_TRUE(SetConfig(config));

  BucketTable& table = GlobalTable();
  EXPECT_EQ(table.bucket_count(), BucketTable::kInlineBuckets);
  EXPECT_EQ(table.allocation_failures(), 1u);
  EXPECT_EQ(GetStats().growth_failures, 1u);
  EXPECT_FALSE(table.immutable());

  constexpr int kThreads = 64, kLocks = 4;
  const int iterations = static_cast<int>(Scaled(3000, 20, 4));
  ParkingLock locks[kLocks];
  int64_t counters[kLocks] = {};
  std::atomic<int> registered{0};
  std::atomic<bool> go{false}, leave{false};
  std::atomic<int> finished{0};
  std::vector<SmallThread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      CurrentThreadData();  // registers: a growth attempt that fails
      registered.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) CpuRelax();
      for (int i = 0; i < iterations; ++i) {
        const int k = (i + t) % kLocks;
        locks[k].Lock();
        ++counters[k];
        // Now and then give up the CPU while holding the lock: the other
        // threads then park on it.
        if (i % 64 == 0) std::this_thread::yield();
        locks[k].Unlock();
      }
      finished.fetch_add(1);
      // Stay alive: the live count keeps asking for a larger table.
      while (!leave.load(std::memory_order_acquire)) {
        absl::SleepFor(absl::Milliseconds(1));
      }
    });
  }
  ASSERT_TRUE(WaitFor([&] { return registered.load() == kThreads; }));
  const uint64_t parks_before = GetStats().parks;
  go.store(true, std::memory_order_release);
  ASSERT_TRUE(WaitFor([&] { return finished.load() == kThreads; }));

  int64_t total = 0;
  for (int64_t c : counters) total += c;
  EXPECT_EQ(total, int64_t{kThreads} * iterations);
  const Stats s = GetStats();
  EXPECT_GT(s.parks, parks_before) << "the locks never contended";
  EXPECT_EQ(table.bucket_count(), BucketTable::kInlineBuckets);
  EXPECT_EQ(s.growths, 0u);
  // Registrations past 4 live threads each wanted a larger table.
  EXPECT_GT(s.growth_failures, 32u);
  EXPECT_EQ(s.growth_failures, table.allocation_failures());
  const std::string text = FormatStats(s);
  EXPECT_NE(text.find(std::to_string(s.growth_failures) + " growth failures"),
            std::string::npos)
      << text;

  // Memory is back: the next thread's registration grows the table, whose
  // locks serve as before.
  internal::FailTableMappingsAbove(SIZE_MAX);
  SmallThread late([&] {
    CurrentThreadData();  // registers: the growth happens
    for (int i = 0; i < 1000; ++i) {
      locks[0].Lock();
      ++counters[0];
      locks[0].Unlock();
    }
  });
  late.Join();
  EXPECT_EQ(table.growths(), 1u);
  EXPECT_GE(table.bucket_count(), RoundUpPow2(4 * (kThreads + 1)));
  EXPECT_EQ(GetStats().growth_failures, s.growth_failures);
  leave.store(true, std::memory_order_release);
  for (auto& t : threads) t.Join();
  EXPECT_EQ(counters[0] + counters[1] + counters[2] + counters[3],
            int64_t{kThreads} * iterations + 1000);
}

}  // namespace
}  // namespace parklot::internal
