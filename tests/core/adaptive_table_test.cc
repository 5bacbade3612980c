// hash/: the `adaptive` growth policy on BucketTable instances built from
// TableOptions: it grows as `threads` does, and also doubles when sampled
// buckets collide (a bucket last sampled by another thread, for another
// key), up to its collision cap, never past max_buckets, and never below
// what live threads need; the table counts why it grew and the collisions it
// sampled.
//
// Collisions are made deterministic: two fresh threads (each samples its
// 16th, 32nd, ... LockBucket) take turns, one lock each, on two keys of one
// bucket; on one key, or one thread alone on two keys, there are none.
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

namespace parklot {
namespace {

constexpr uint32_t kWindow = BucketTable::kCollisionWindow;
// LockBucket calls of one thread in one window of samples.
constexpr uint32_t kWindowLocks = kWindow * BucketTable::kCollisionSampleEvery;

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
// thread 0 first: thread i locks key i of `keys`. `last` runs in place of
// thread 0's last LockOnce (thread 0 completes its window first).
template <typename Last>
void TakeTurns(BucketTable& t, KeyPair keys, uint32_t turns, Last last) {
  std::atomic<int> turn{0};
  auto body = [&](int me) {
    // As the runtime registers every thread (unregistered readers pin the
    // table and never grow it).
    BucketTable::RegisterRcuReader();
    const uintptr_t key = me == 0 ? keys.a : keys.b;
    for (uint32_t i = 0; i < turns; ++i) {
      while (turn.load(std::memory_order_acquire) != me) sched_yield();
      if (me == 0 && i + 1 == turns) {
        last(key);
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
// lock between them: every sample but the bucket's first is a collision.
// The first thread to complete its window doubles the table, at the end of
// that window's last read section; the other's window then spans a growth
// and asks for nothing.
TEST(AdaptivePolicy, GrowsOnCollisions) {
  WATCHDOG("GrowsOnCollisions");
  BucketTable t(Adaptive());
  ASSERT_EQ(t.bucket_count(), 16u);
  TakeTurns(t, SameBucket(t), kWindowLocks);
  EXPECT_EQ(t.bucket_count(), 32u);
  EXPECT_EQ(t.growths(), 1u);
  EXPECT_EQ(t.collision_growths(), 1u);
  // 1 in kCollisionSampleEvery locks, whole windows only.
  EXPECT_EQ(t.sampled_locks(), 2u * kWindow);
  // All but the bucket's first sample (and the last, when the growth
  // separated the keys).
  EXPECT_GE(t.sampled_collisions(), 2u * kWindow - 2);
}

// Two threads taking turns on one key share its bucket as a waker and its
// waiter do: no collision.
TEST(AdaptivePolicy, TakingTurnsOnOneKeyGrowsNothing) {
  WATCHDOG("TakingTurnsOnOneKeyGrowsNothing");
  BucketTable t(Adaptive());
  const KeyPair keys = SameBucket(t);
  TakeTurns(t, {keys.a, keys.a}, 2 * kWindowLocks);
  EXPECT_EQ(t.sampled_locks(), 4u * kWindow);
  EXPECT_EQ(t.sampled_collisions(), 0u);
  EXPECT_EQ(t.bucket_count(), 16u);
}

// One thread alone, on two keys of one bucket, collides with nothing.
TEST(AdaptivePolicy, NoGrowthWithoutCollisions) {
  WATCHDOG("NoGrowthWithoutCollisions");
  BucketTable t(Adaptive());
  const KeyPair keys = SameBucket(t);
  std::thread([&] {
    BucketTable::RegisterRcuReader();
    for (uint32_t i = 0; i < 4 * kWindowLocks; ++i) {
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
  TakeTurns(t, SameBucket(t), kWindowLocks);
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
    TakeTurns(t, SameBucket(t), kWindowLocks);
  }
  EXPECT_EQ(t.bucket_count(), 64u);
  EXPECT_EQ(t.collision_growths(), 2u);  // 16 -> 32 -> 64
  EXPECT_FALSE(t.immutable());
  EXPECT_TRUE(t.MaybeGrow(100));  // 400 -> 512
  EXPECT_EQ(t.bucket_count(), 512u);
  EXPECT_EQ(t.growths(), 3u);
  EXPECT_EQ(t.collision_growths(), 2u);

  BucketTable small(Adaptive(size_t{1} << 16, /*max_buckets=*/32));
  for (int round = 0; round < 2; ++round) {
    TakeTurns(small, SameBucket(small), kWindowLocks);
  }
  EXPECT_EQ(small.bucket_count(), 32u);
  EXPECT_TRUE(small.immutable());
  EXPECT_EQ(small.collision_growths(), 1u);
}

// The size never drops below what live threads need: the threads target
// applies as under `threads`, and a collision growth only adds.
TEST(AdaptivePolicy, NeverBelowWhatThreadsNeed) {
  WATCHDOG("NeverBelowWhatThreadsNeed");
  BucketTable t(Adaptive());
  TableOptions threads_options = Adaptive();
  threads_options.policy = GrowthPolicy::kThreads;
  const BucketTable threads(threads_options);
  for (size_t live : {0, 1, 5, 100, 1000, 100000}) {
    EXPECT_EQ(t.TargetBuckets(live), threads.TargetBuckets(live)) << live;
  }
  EXPECT_TRUE(t.MaybeGrow(100));  // 512
  TakeTurns(t, SameBucket(t), kWindowLocks);
  EXPECT_EQ(t.bucket_count(), 1024u);
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
TEST(AdaptivePolicy, GrowsOnlyWhenTheOutermostSectionEnds) {
  WATCHDOG("GrowsOnlyWhenTheOutermostSectionEnds");
  BucketTable t(Adaptive());
  size_t inside = 0, after_inner = 0;
  // The window's last lock is inside a nested section.
  const KeyPair keys = SameBucket(t);
  TakeTurns(t, keys, kWindowLocks, [&](uintptr_t key) {
    BucketTable::ReadSection outer(t);
    {
      BucketTable::ReadSection inner(t);
      BucketTable::UnlockBucket(t.LockBucket(key));
      inside = t.bucket_count();
    }
    after_inner = t.bucket_count();
  });
  EXPECT_EQ(inside, 16u);
  EXPECT_EQ(after_inner, 16u);
  EXPECT_EQ(t.bucket_count(), 32u);  // grown when `outer` ended
  EXPECT_EQ(t.collision_growths(), 1u);
}

}  // namespace
}  // namespace parklot
