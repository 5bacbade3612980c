// BucketLock's contention figures (BucketLockCounters, PARKLOT_STATS):
// each counts what it says, for the thread that counts into it, and the
// registry sums them into GetStats.
#include "hash/bucket_lock.h"

#include <atomic>
#include <thread>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "runtime/parking_lot.h"
#include "runtime/stats.h"
#include "runtime/thread_data.h"
#include "tests/util/watchdog.h"

namespace parklot::internal {
namespace {

uint64_t Get(const std::atomic<uint64_t>& c) {
  return c.load(std::memory_order_relaxed);
}

// A holder that keeps the lock far past the spin phase makes the other
// thread's acquisition contended and slept; the holder's unlock wakes it.
TEST(BucketLockCounters, ContendedAcquisitionSleepsAndIsWoken) {
  testing::Watchdog dog(absl::Seconds(60), "bucket lock counters");
  for (int round = 0; round < 20; ++round) {
    BucketLock lock;
    BucketLockCounters holder_counts, taker_counts;
    std::atomic<bool> trying{false};
    lock.Lock();
    std::thread taker([&] {
      BucketLock::CountInto(&taker_counts);
      trying.store(true);
      lock.Lock();
      lock.Unlock();
      BucketLock::CountInto(nullptr);
    });
    while (!trying.load()) std::this_thread::yield();
    // Long enough that the taker has spun out and gone to the kernel.
    absl::SleepFor(absl::Milliseconds(20));
    BucketLock::CountInto(&holder_counts);
    lock.Unlock();
    BucketLock::CountInto(nullptr);
    taker.join();
    ASSERT_EQ(Get(taker_counts.contended), 1u);
    ASSERT_EQ(Get(taker_counts.spin_won), 0u);
    ASSERT_EQ(Get(taker_counts.slept), 1u);
    ASSERT_GE(Get(taker_counts.sleeps), 1u);
    // The taker took the lock as "locked with sleepers": its own unlock
    // wakes (nobody), as Drepper's lock does.
    ASSERT_EQ(Get(taker_counts.wakes), 1u);
    ASSERT_EQ(Get(holder_counts.wakes), 1u);
    ASSERT_EQ(Get(holder_counts.contended), 0u);
  }
}

// Uncontended acquisitions count nothing; with hold timing on, one in
// kHoldSampleEvery is timed, and a hold past kLongHoldNs counts as long.
TEST(BucketLockCounters, HoldTimesAreSampled) {
  testing::Watchdog dog(absl::Seconds(60), "bucket lock hold times");
  std::thread t([] {
    BucketLockCounters c;
    BucketLock::CountInto(&c);
    BucketLock::EnableHoldTiming();
    BucketLock lock;
    constexpr uint32_t kEvery = BucketLockCounters::kHoldSampleEvery;
    for (uint32_t i = 1; i < kEvery; ++i) {
      lock.Lock();
      lock.Unlock();
    }
    EXPECT_EQ(Get(c.hold_samples), 0u);
    // The kEvery-th acquisition on this fresh thread is the sampled one.
    lock.Lock();
    absl::SleepFor(absl::Nanoseconds(2 * BucketLockCounters::kLongHoldNs));
    lock.Unlock();
    EXPECT_EQ(Get(c.hold_samples), 1u);
    EXPECT_GE(Get(c.hold_ns), 2 * BucketLockCounters::kLongHoldNs);
    EXPECT_EQ(Get(c.long_holds), 1u);
    // Nested holds (a bucket pair) are one sample, of the outer hold.
    BucketLock other;
    for (uint32_t i = 0; i < kEvery; ++i) {
      lock.Lock();
      other.Lock();
      other.Unlock();
      lock.Unlock();
    }
    EXPECT_EQ(Get(c.hold_samples), 2u);
    EXPECT_EQ(Get(c.contended), 0u);
    EXPECT_EQ(Get(c.wakes), 0u);
    BucketLock::CountInto(nullptr);
  });
  t.join();
}

// A registered thread counts into its ThreadData, which GetStats sums: a
// park that finds its bucket held by another thread shows up there.
TEST(BucketLockCounters, RegisteredThreadsCountIntoStats) {
  testing::Watchdog dog(absl::Seconds(60), "bucket lock stats");
  const Stats before = GetStats();
  static std::atomic<uint32_t> word{0};
  uint64_t grew = 0;
  for (int round = 0; round < 20 && grew == 0; ++round) {
    std::atomic<bool> inside{false}, go{false};
    // Holds the key's bucket (inside validate) while another thread's
    // unpark of the same key has to wait for it.
    std::thread holder([&] {
      Park(KeyOf(&word), [&] {
        inside.store(true);
        while (!go.load()) std::this_thread::yield();
        absl::SleepFor(absl::Milliseconds(5));
        return false;  // do not park
      });
    });
    while (!inside.load()) std::this_thread::yield();
    std::thread unparker([&] {
      go.store(true);
      UnparkAll(KeyOf(&word));
    });
    unparker.join();
    holder.join();
    grew = GetStats().bucket_lock_contended - before.bucket_lock_contended;
  }
  EXPECT_GE(grew, 1u);
  const Stats after = GetStats();
  EXPECT_GE(after.bucket_lock_slept, before.bucket_lock_slept + 1);
}

TEST(BucketLockCounters, FormatStatsShowsThem) {
  Stats s;
  s.bucket_lock_contended = 31;
  s.bucket_lock_spin_won = 32;
  s.bucket_lock_slept = 33;
  s.bucket_lock_sleeps = 34;
  s.bucket_lock_wakes = 35;
  s.bucket_lock_hold_samples = 4;
  s.bucket_lock_hold_ns = 4 * 36;
  s.bucket_lock_long_holds = 37;
  const std::string text = FormatStats(s);
  for (const char* want : {"31 contended", "32 won spinning", "33 slept",
                           "34 sleeps", "35 wakes", "4 sampled", "mean 36 ns",
                           "37 of 20 us"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  }
}

}  // namespace
}  // namespace parklot::internal
