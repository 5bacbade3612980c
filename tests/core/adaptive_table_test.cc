// hash/: the `adaptive` growth policy on BucketTable instances built from
// TableOptions: it grows as `threads` does, and also doubles when bucket
// buckets collide (a bucket last locked by another thread, for another key),
// up to its collision cap, never past max_buckets, and never below what live
// threads need; the table counts why it grew and the collisions it sampled.
//
// Collisions are made deterministic: a thread holds a bucket for one key
// until another thread, locking another key of the same bucket, sleeps on
// its lock (contended), or two threads take turns on two keys of one bucket
// (uncontended: the bucket still passes between them).
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <memory>
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

// Two fresh threads (fresh per-thread windows) take `turns` turns each,
// thread 0 first: thread i locks key i of `keys`.
void TakeTurns(BucketTable& t, KeyPair keys, uint32_t turns) {
  std::atomic<int> turn{0};
  auto body = [&](int me) {
    // As the runtime registers every thread (unregistered readers pin the
    // table and never grow it).
    BucketTable::RegisterRcuReader();
    const uintptr_t key = me == 0 ? keys.a : keys.b;
    for (uint32_t i = 0; i < turns; ++i) {
      while (turn.load(std::memory_order_acquire) != me) sched_yield();
      LockOnce(t, key);
      turn.store(1 - me, std::memory_order_release);
    }
  };
  std::thread t0(body, 0), t1(body, 1);
  t0.join();
  t1.join();
}

// Whether thread `tid` of this process is asleep in the kernel (state S).
bool Sleeping(pid_t tid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", static_cast<int>(tid));
  FILE* f = fopen(path, "r");
  if (f == nullptr) return false;
  char buf[512];
  const size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char* paren = strrchr(buf, ')');  // the name may hold spaces
  return paren != nullptr && paren[1] == ' ' && paren[2] == 'S';
}

// How many of a window's locks are made to contend: above the threshold
// (kWindow / kCollisionRateDivisor) with room for a few that, the holder
// having let go early (the locker asleep elsewhere), did not contend.
constexpr uint32_t kForced = 2 * kWindow / BucketTable::kCollisionRateDivisor;

// One window of kWindow LockBuckets of `locker_key` on a fresh thread, the
// first kForced of them contended: a second thread holds the bucket of
// `holder_key` (the same bucket) until the locker sleeps on its lock. `last`
// runs in place of the window's last LockOnce.
template <typename Last>
void ContendedWindow(BucketTable& t, uintptr_t holder_key, uintptr_t locker_key,
                     Last last) {
  std::atomic<uint32_t> asked{0}, held{0};
  std::atomic<pid_t> locker_tid{0};
  std::thread holder([&] {
    BucketTable::RegisterRcuReader();
    for (uint32_t i = 1; i <= kForced; ++i) {
      while (asked.load(std::memory_order_acquire) != i) sched_yield();
      BucketTable::ReadSection rs(t);
      Bucket* b = t.LockBucket(holder_key);
      held.store(i, std::memory_order_release);
      while (!Sleeping(locker_tid.load())) usleep(50);
      BucketTable::UnlockBucket(b);
    }
  });
  std::thread locker([&] {
    BucketTable::RegisterRcuReader();
    locker_tid.store(gettid());
    for (uint32_t i = 1; i <= kForced; ++i) {
      asked.store(i, std::memory_order_release);
      while (held.load(std::memory_order_acquire) != i) sched_yield();
      LockOnce(t, locker_key);
    }
    for (uint32_t i = kForced; i + 1 < kWindow; ++i) LockOnce(t, locker_key);
    last(locker_key);
  });
  holder.join();
  locker.join();
}

void ContendedWindow(BucketTable& t, KeyPair keys) {
  ContendedWindow(t, keys.a, keys.b, [&t](uintptr_t key) { LockOnce(t, key); });
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

// Enough collisions in a window double the table once, at the end of the
// window's last read section.
TEST(AdaptivePolicy, GrowsOnCollisions) {
  WATCHDOG("GrowsOnCollisions");
  BucketTable t(Adaptive());
  ASSERT_EQ(t.bucket_count(), 16u);
  ContendedWindow(t, SameBucket(t));
  EXPECT_EQ(t.bucket_count(), 32u);
  EXPECT_EQ(t.growths(), 1u);
  EXPECT_EQ(t.collision_growths(), 1u);
  // The locker's window and the holder's kForced locks (no whole window).
  EXPECT_EQ(t.sampled_locks(), uint64_t{kWindow});
  EXPECT_GT(t.sampled_collisions(),
            uint64_t{kWindow / BucketTable::kCollisionRateDivisor});
  EXPECT_LE(t.sampled_collisions(), uint64_t{kForced});
}

// Contention on one key is not a collision: a bigger table would not
// separate a key from itself.
TEST(AdaptivePolicy, ContentionOnOneKeyGrowsNothing) {
  WATCHDOG("ContentionOnOneKeyGrowsNothing");
  BucketTable t(Adaptive());
  const KeyPair keys = SameBucket(t);
  ContendedWindow(t, keys.b, keys.b, [&t](uintptr_t key) { LockOnce(t, key); });
  EXPECT_EQ(t.bucket_count(), 16u);
  EXPECT_EQ(t.sampled_locks(), uint64_t{kWindow});
  EXPECT_EQ(t.sampled_collisions(), 0u);
}

// Sharing a bucket without contention is a collision too: two threads
// taking turns on two keys of one bucket pass its line and lock between
// them. The first thread to complete its window grows the table; the
// other's window then spans a growth and asks for nothing.
TEST(AdaptivePolicy, TakingTurnsOnOneBucketGrows) {
  WATCHDOG("TakingTurnsOnOneBucketGrows");
  BucketTable t(Adaptive());
  TakeTurns(t, SameBucket(t), kWindow);
  EXPECT_EQ(t.sampled_locks(), 2u * kWindow);
  // All but the bucket's first lock (and the last, when the growth
  // separated the keys).
  EXPECT_GE(t.sampled_collisions(), 2u * kWindow - 2);
  EXPECT_EQ(t.bucket_count(), 32u);
  EXPECT_EQ(t.collision_growths(), 1u);
}

// Two threads taking turns on one key share its bucket as a waker and its
// waiter do: no collision.
TEST(AdaptivePolicy, TakingTurnsOnOneKeyGrowsNothing) {
  WATCHDOG("TakingTurnsOnOneKeyGrowsNothing");
  BucketTable t(Adaptive());
  const KeyPair keys = SameBucket(t);
  TakeTurns(t, {keys.a, keys.a}, 2 * kWindow);
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
    for (uint32_t i = 0; i < 4 * kWindow; ++i) {
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
  ContendedWindow(t, SameBucket(t));
  EXPECT_EQ(t.bucket_count(), 16u);
  EXPECT_EQ(t.sampled_locks(), 0u);
  EXPECT_EQ(t.collision_growths(), 0u);
}

// Collisions stop growing the table at max_collision_buckets; live threads
// still grow it past that, and max_buckets caps both.
TEST(AdaptivePolicy, CollisionGrowthIsCapped) {
  WATCHDOG("CollisionGrowthIsCapped");
  BucketTable t(Adaptive(/*max_collision_buckets=*/64));
  for (int round = 0; round < 3; ++round) ContendedWindow(t, SameBucket(t));
  EXPECT_EQ(t.bucket_count(), 64u);
  EXPECT_EQ(t.collision_growths(), 2u);  // 16 -> 32 -> 64
  EXPECT_FALSE(t.immutable());
  EXPECT_TRUE(t.MaybeGrow(100));  // 400 -> 512
  EXPECT_EQ(t.bucket_count(), 512u);
  EXPECT_EQ(t.growths(), 3u);
  EXPECT_EQ(t.collision_growths(), 2u);

  BucketTable small(Adaptive(size_t{1} << 16, /*max_buckets=*/32));
  for (int round = 0; round < 2; ++round) {
    ContendedWindow(small, SameBucket(small));
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
  ContendedWindow(t, SameBucket(t));
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
  ContendedWindow(t, keys.a, keys.b, [&](uintptr_t key) {
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
