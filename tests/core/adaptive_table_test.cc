// hash/: the `adaptive` growth policy on BucketTable instances built from
// TableOptions: it grows as `threads` does, and also grows when sampled
// buckets collide (a bucket last sampled by another thread, for another
// key), by the factor the window's collision rate calls for, up to its
// collision cap, never past max_buckets, and never below what live threads
// need; the table counts why it grew and the collisions it sampled.
//
// Collisions are made deterministic: two fresh threads take turns, one lock
// each, on two keys of one bucket; on one key, or one thread alone on two
// keys, there are none. Every thread draws the same sequence of sampling
// intervals, so the counts below are the same in every run.
#include <sched.h>

#include <atomic>
#include <cstdint>
#include <thread>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "hash/bucket_table.h"
#include "runtime/config.h"
#include "tests/core/test_support.h"
#include "tests/util/watchdog.h"

namespace parklot::internal {
namespace {

constexpr uint32_t kWindow = BucketTable::kCollisionWindow;
// LockBucket calls of each of `threads` threads running evenly that
// complete exactly `n` of the table's windows of samples, all threads
// together: the intervals average kCollisionSampleEvery, and the samples of
// that many calls stray from their mean (by about 20) far less than the
// quarter window added (shared among them), which leaves the next
// window unjudged.
constexpr uint32_t LocksForWindows(uint32_t n, uint32_t threads = 2) {
  return (n * kWindow + kWindow / 4) / threads *
         BucketTable::kCollisionSampleEvery;
}
// A window in which every sample collides asks for this factor.
constexpr size_t kAllCollideFactor = BucketTable::kCollisionRateDivisor;

TableOptions Adaptive(size_t max_collision_buckets = size_t{1} << 16,
                      size_t max_buckets = size_t{1} << 19) {
  TableOptions o;
  o.policy = GrowthPolicy::kAdaptive;
  o.buckets = 16;
  o.max_buckets = max_buckets;
  o.max_collision_buckets = max_collision_buckets;
  return o;
}

// Keys for the turns: addresses of distinct words, found by index alone
// (BucketIndex locks nothing, so the search counts no lock).
struct KeyPair {
  uintptr_t a, b;
};
alignas(64) uint64_t g_words[4096];

KeyPair SameBucket(const BucketTable& t) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(&g_words[0]);
  for (size_t i = 1; i < 4096; ++i) {
    const uintptr_t b = reinterpret_cast<uintptr_t>(&g_words[i]);
    if (t.BucketIndex(b) == t.BucketIndex(a)) return {a, b};
  }
  ADD_FAILURE() << "no two keys share a bucket of " << t.bucket_count();
  return {a, a};
}

// One LockBucket + UnlockBucket of `key` in its own read section: the
// section's end is where a due collision growth runs.
void LockOnce(BucketTable& t, uintptr_t key) {
  BucketTable::ReadSection rs(t);
  BucketTable::UnlockBucket(t.LockBucket(key));
}

// Two fresh threads (fresh per-thread counts) take `turns` turns each,
// thread 0 first: thread i locks key i of `keys`, thread 0 through `lock0`.
template <typename Lock0>
void TakeTurns(BucketTable& t, KeyPair keys, uint32_t turns, Lock0 lock0) {
  std::atomic<int> turn{0};
  auto body = [&](int me) {
    const uintptr_t key = me == 0 ? keys.a : keys.b;
    for (uint32_t i = 0; i < turns; ++i) {
      while (turn.load(std::memory_order_acquire) != me) sched_yield();
      if (me == 0) {
        lock0(key);
      } else {
        LockOnce(t, key);
      }
      turn.store(1 - me, std::memory_order_release);
    }
  };
  std::thread t0(body, 0), t1(body, 1);
  t0.join();
  t1.join();
}

void TakeTurns(BucketTable& t, KeyPair keys, uint32_t turns) {
  TakeTurns(t, keys, turns, [&t](uintptr_t key) { LockOnce(t, key); });
}

#define WATCHDOG(name) \
  testing::Watchdog wd(coretest::WatchdogLimit(absl::Seconds(60)), name)

TEST(AdaptivePolicy, ParsesAndNames) {
  GrowthPolicy p = GrowthPolicy::kThreads;
  size_t fixed = 0;
  ASSERT_TRUE(ParseGrowthPolicy("adaptive", &p, &fixed));
  EXPECT_EQ(p, GrowthPolicy::kAdaptive);
  EXPECT_STREQ(GrowthPolicyName(GrowthPolicy::kAdaptive), "adaptive");
  EXPECT_FALSE(ParseGrowthPolicy("adaptive:4", &p, &fixed));
  Config c;
  c.table.policy = GrowthPolicy::kAdaptive;
  EXPECT_EQ(SanitizeConfig(&c), 0);
  EXPECT_EQ(c.table.policy, GrowthPolicy::kAdaptive);
}

// Two threads taking turns on two keys of one bucket pass its line and
// lock between them: a sample is a collision whenever the bucket's previous
// sample was the other thread's, which (both draw the same intervals) is
// every sample but the first. The batch that fills the table's window asks
// for the factor that rate calls for, and the table grows by it at once
// when that thread's read section ends; the batches after it began in the
// old table and count nothing.
TEST(AdaptivePolicy, GrowsOnCollisions) {
  WATCHDOG("GrowsOnCollisions");
  BucketTable t(Adaptive());
  ASSERT_EQ(t.bucket_count(), 16u);
  TakeTurns(t, SameBucket(t), LocksForWindows(1));
  EXPECT_EQ(t.bucket_count(), 16u * kAllCollideFactor);
  EXPECT_EQ(t.growths(), 1u);
  EXPECT_EQ(t.collision_growths(), 1u);
  // About 1 in kCollisionSampleEvery locks, judged windows only.
  EXPECT_EQ(t.sampled_locks(), kWindow);
  // Well above the rate that asks for a doubling.
  EXPECT_GT(t.sampled_collisions() * BucketTable::kCollisionRateDivisor,
            4 * t.sampled_locks());
}

// The window is the table's, filled by all threads together: four threads
// taking turns on four keys of one bucket, each taking a quarter of a
// window's samples (a per-thread window would still be filling), grow the
// table once.
TEST(AdaptivePolicy, AWindowFillsFromAllThreads) {
  WATCHDOG("AWindowFillsFromAllThreads");
  BucketTable t(Adaptive());
  constexpr int kThreads = 4;
  uintptr_t keys[kThreads];
  int found = 0;
  const size_t index = t.BucketIndex(reinterpret_cast<uintptr_t>(&g_words[0]));
  for (size_t i = 0; i < 4096 && found < kThreads; ++i) {
    const uintptr_t k = reinterpret_cast<uintptr_t>(&g_words[i]);
    if (t.BucketIndex(k) == index) keys[found++] = k;
  }
  ASSERT_EQ(found, kThreads);
  std::atomic<int> turn{0};
  auto body = [&](int me) {
    for (uint32_t i = 0; i < LocksForWindows(1, kThreads); ++i) {
      while (turn.load(std::memory_order_acquire) != me) sched_yield();
      LockOnce(t, keys[me]);
      turn.store((me + 1) % kThreads, std::memory_order_release);
    }
  };
  std::thread threads[kThreads];
  for (int i = 0; i < kThreads; ++i) threads[i] = std::thread(body, i);
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(t.collision_growths(), 1u);
  EXPECT_EQ(t.bucket_count(), 16u * kAllCollideFactor);
  EXPECT_EQ(t.sampled_locks(), kWindow);
}

// Threads that cycle over their keys are sampled all over their cycles,
// not at one fixed point of it. Here each of two threads cycles over 16
// keys: 15 share one bucket with the other thread's 15, and the 16th of each
// has a bucket of its own. A sample taken every 16th lock would always land
// on the lone key and see no collision; random intervals see many.
TEST(AdaptivePolicy, CyclingThreadsAreSampledAcrossTheirCycles) {
  WATCHDOG("CyclingThreadsAreSampledAcrossTheirCycles");
  BucketTable t(Adaptive());
  constexpr int kCycle = BucketTable::kCollisionSampleEvery;
  uintptr_t keys[2][kCycle];
  // keys[th][0..kCycle-2] in bucket `shared`; keys[th][kCycle-1] each in a
  // bucket of its own.
  const size_t shared = t.BucketIndex(reinterpret_cast<uintptr_t>(&g_words[0]));
  int n_shared = 0, n_lone = 0;
  size_t lone_index = SIZE_MAX;
  for (size_t i = 0; i < 4096 && (n_shared < 2 * (kCycle - 1) || n_lone < 2);
       ++i) {
    const uintptr_t k = reinterpret_cast<uintptr_t>(&g_words[i]);
    const size_t index = t.BucketIndex(k);
    if (index == shared && n_shared < 2 * (kCycle - 1)) {
      keys[n_shared % 2][n_shared / 2] = k;
      ++n_shared;
    } else if (index != shared && index != lone_index && n_lone < 2) {
      keys[n_lone][kCycle - 1] = k;
      lone_index = index;
      ++n_lone;
    }
  }
  ASSERT_EQ(n_shared, 2 * (kCycle - 1));
  ASSERT_EQ(n_lone, 2);
  std::atomic<int> turn{0};
  auto body = [&](int me) {
    for (uint32_t i = 0; i < LocksForWindows(1); ++i) {
      while (turn.load(std::memory_order_acquire) != me) sched_yield();
      LockOnce(t, keys[me][i % kCycle]);
      turn.store(1 - me, std::memory_order_release);
    }
  };
  std::thread t0(body, 0), t1(body, 1);
  t0.join();
  t1.join();
  EXPECT_EQ(t.collision_growths(), 1u);
  EXPECT_GT(t.sampled_collisions() * BucketTable::kCollisionRateDivisor,
            t.sampled_locks());
}

// Two threads taking turns on one key share its bucket as a waker and its
// waiter do: no collision.
TEST(AdaptivePolicy, TakingTurnsOnOneKeyGrowsNothing) {
  WATCHDOG("TakingTurnsOnOneKeyGrowsNothing");
  BucketTable t(Adaptive());
  const KeyPair keys = SameBucket(t);
  TakeTurns(t, {keys.a, keys.a}, LocksForWindows(2));
  EXPECT_EQ(t.sampled_locks(), 2u * kWindow);
  EXPECT_EQ(t.sampled_collisions(), 0u);
  EXPECT_EQ(t.bucket_count(), 16u);
}

// One thread alone, on two keys of one bucket, collides with nothing.
TEST(AdaptivePolicy, NoGrowthWithoutCollisions) {
  WATCHDOG("NoGrowthWithoutCollisions");
  BucketTable t(Adaptive());
  const KeyPair keys = SameBucket(t);
  std::thread([&] {
    for (uint32_t i = 0; i < LocksForWindows(4, /*threads=*/1); ++i) {
      LockOnce(t, i % 2 == 0 ? keys.a : keys.b);
    }
  }).join();
  EXPECT_EQ(t.bucket_count(), 16u);
  EXPECT_EQ(t.growths(), 0u);
  EXPECT_EQ(t.sampled_locks(), 4u * kWindow);
  EXPECT_EQ(t.sampled_collisions(), 0u);
}

// The `threads` policy samples nothing and grows only with threads.
TEST(AdaptivePolicy, ThreadsPolicyIgnoresCollisions) {
  WATCHDOG("ThreadsPolicyIgnoresCollisions");
  TableOptions o = Adaptive();
  o.policy = GrowthPolicy::kThreads;
  BucketTable t(o);
  TakeTurns(t, SameBucket(t), LocksForWindows(1));
  EXPECT_EQ(t.bucket_count(), 16u);
  EXPECT_EQ(t.sampled_locks(), 0u);
  EXPECT_EQ(t.collision_growths(), 0u);
}

// Collisions stop growing the table at max_collision_buckets; live threads
// still grow it past that, and max_buckets caps both.
TEST(AdaptivePolicy, CollisionGrowthIsCapped) {
  WATCHDOG("CollisionGrowthIsCapped");
  BucketTable t(Adaptive(/*max_collision_buckets=*/64));
  for (int round = 0; round < 3; ++round) {
    TakeTurns(t, SameBucket(t), LocksForWindows(1));
  }
  EXPECT_EQ(t.bucket_count(), 64u);
  EXPECT_EQ(t.collision_growths(), 1u);  // 16 -> 64, not 16 x 128
  // At the cap nothing is sampled: rounds 2 and 3 sample nothing.
  EXPECT_EQ(t.sampled_locks(), kWindow);
  EXPECT_FALSE(t.immutable());
  EXPECT_TRUE(t.MaybeGrow(100));  // 400 -> 512
  EXPECT_EQ(t.bucket_count(), 512u);
  EXPECT_EQ(t.growths(), 2u);
  EXPECT_EQ(t.collision_growths(), 1u);

  BucketTable small(Adaptive(size_t{1} << 16, /*max_buckets=*/32));
  for (int round = 0; round < 2; ++round) {
    TakeTurns(small, SameBucket(small), LocksForWindows(1));
  }
  EXPECT_EQ(small.bucket_count(), 32u);
  EXPECT_TRUE(small.immutable());
  EXPECT_EQ(small.collision_growths(), 1u);
}

// The size never drops below what live threads need: the threads target
// applies as under `threads`, and a collision growth only adds.
TEST(AdaptivePolicy, NeverBelowWhatThreadsNeed) {
  WATCHDOG("NeverBelowWhatThreadsNeed");
  BucketTable t(Adaptive(/*max_collision_buckets=*/1024));
  TableOptions threads_options = Adaptive();
  threads_options.policy = GrowthPolicy::kThreads;
  const BucketTable threads(threads_options);
  for (size_t live : {0, 1, 5, 100, 1000, 100000}) {
    EXPECT_EQ(t.TargetBuckets(live), threads.TargetBuckets(live)) << live;
  }
  EXPECT_TRUE(t.MaybeGrow(100));  // 512
  TakeTurns(t, SameBucket(t), LocksForWindows(1));
  EXPECT_EQ(t.bucket_count(), 1024u);  // the collision cap
  EXPECT_FALSE(t.MaybeGrow(5));
  EXPECT_FALSE(t.MaybeGrow(100));
  EXPECT_EQ(t.bucket_count(), 1024u);
  EXPECT_TRUE(t.MaybeGrow(1000));  // 4000 -> 4096; frees the retired 512
  EXPECT_EQ(t.bucket_count(), 4096u);
  EXPECT_EQ(t.growths(), 3u);
  EXPECT_EQ(t.collision_growths(), 1u);
}

// A due growth waits for the outermost read section: it never runs while
// the thread still reads the table (nor, so, while it holds a bucket).
// Every lock of thread 0 is inside a nested section; the table may only
// change size between them.
TEST(AdaptivePolicy, GrowsOnlyWhenTheOutermostSectionEnds) {
  WATCHDOG("GrowsOnlyWhenTheOutermostSectionEnds");
  BucketTable t(Adaptive());
  uint32_t changed_inside = 0;
  TakeTurns(t, SameBucket(t), LocksForWindows(1), [&](uintptr_t key) {
    BucketTable::ReadSection outer(t);
    const size_t before = t.bucket_count();
    {
      BucketTable::ReadSection inner(t);
      BucketTable::UnlockBucket(t.LockBucket(key));
      changed_inside += t.bucket_count() != before;
    }
    changed_inside += t.bucket_count() != before;
  });
  EXPECT_EQ(changed_inside, 0u);
  EXPECT_EQ(t.bucket_count(), 16u * kAllCollideFactor);  // when an `outer` ended
  EXPECT_EQ(t.collision_growths(), 1u);
}

}  // namespace
}  // namespace parklot::internal
