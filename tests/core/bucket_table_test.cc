// hash/: BucketTable instances built directly from TableOptions (not the
// process's table): policies, target sizes, growth, the cap, per-key order
// (priority, then FIFO) across moves, concurrent readers during growth,
// bucket primitives and the fairness timer.
#include "hash/bucket_table.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/core/test_support.h"
#include "tests/util/watchdog.h"

namespace parklot::internal {
namespace {

using coretest::Rng;
using coretest::Scaled;

TableOptions Options(GrowthPolicy policy, size_t buckets = 16,
                     size_t max_buckets = size_t{1} << 19) {
  TableOptions o;
  o.policy = policy;
  o.buckets = buckets;
  o.max_buckets = max_buckets;
  return o;
}

// The bucket `key` maps to, looked up under a read section.
Bucket* BucketOf(const BucketTable& t, uintptr_t key) {
  BucketTable::ReadSection rs(t);
  Bucket* b = t.LockBucket(key);
  b->lock.Unlock();
  return b;
}

// --- Parsing and naming ---------------------------------------------------

TEST(ParseGrowthPolicy, AcceptsTheThreeForms) {
  GrowthPolicy p = GrowthPolicy::kFixed;
  size_t n = 77;
  ASSERT_TRUE(ParseGrowthPolicy("threads", &p, &n));
  EXPECT_EQ(p, GrowthPolicy::kThreads);
  ASSERT_TRUE(ParseGrowthPolicy("cpus", &p, &n));
  EXPECT_EQ(p, GrowthPolicy::kCpus);
  ASSERT_TRUE(ParseGrowthPolicy("fixed:1", &p, &n));
  EXPECT_EQ(p, GrowthPolicy::kFixed);
  EXPECT_EQ(n, 1u);
  ASSERT_TRUE(ParseGrowthPolicy("fixed:4096", &p, &n));
  EXPECT_EQ(n, 4096u);
  ASSERT_TRUE(ParseGrowthPolicy("fixed:1000", &p, &n));
  EXPECT_EQ(n, 1000u);  // rounded later, by the table
}

TEST(ParseGrowthPolicy, RejectsMalformedInput) {
  for (const char* bad :
       {"", "thread", "Threads", "cpu", "CPUS", "fixed", "fixed:", "fixed:0",
        "fixed:-1", "fixed:abc", "fixed:1x", "fixed:99999999999",
        "fixed:2147483648", "threads ", " cpus", "max"}) {
    GrowthPolicy p = GrowthPolicy::kThreads;
    size_t n = 0;
    EXPECT_FALSE(ParseGrowthPolicy(bad, &p, &n)) << "'" << bad << "'";
  }
}

TEST(GrowthPolicyName, NamesEachPolicy) {
  EXPECT_STREQ(GrowthPolicyName(GrowthPolicy::kThreads), "threads");
  EXPECT_STREQ(GrowthPolicyName(GrowthPolicy::kCpus), "cpus");
  EXPECT_STREQ(GrowthPolicyName(GrowthPolicy::kFixed), "fixed");
}

TEST(RoundUpPow2, PowersOfTwo) {
  EXPECT_EQ(RoundUpPow2(0), 1u);
  EXPECT_EQ(RoundUpPow2(1), 1u);
  EXPECT_EQ(RoundUpPow2(2), 2u);
  EXPECT_EQ(RoundUpPow2(3), 4u);
  EXPECT_EQ(RoundUpPow2(4096), 4096u);
  EXPECT_EQ(RoundUpPow2(4097), 8192u);
  EXPECT_EQ(RoundUpPow2((size_t{1} << 40) + 1), size_t{1} << 41);
}

// Values near 2^64 once made it loop forever (PARKLOT_MAX_BUCKETS=2^64-1
// hung the program before main): it saturates at the largest power of two.
TEST(RoundUpPow2, SaturatesInsteadOfOverflowing) {
  constexpr size_t kTop = size_t{1} << 63;
  EXPECT_EQ(RoundUpPow2(kTop - 1), kTop);
  EXPECT_EQ(RoundUpPow2(kTop), kTop);
  EXPECT_EQ(RoundUpPow2(kTop + 1), kTop);
  EXPECT_EQ(RoundUpPow2(SIZE_MAX), kTop);
  EXPECT_EQ(RoundUpPow2((size_t{1} << 62) + 1), kTop);
}

// --- Construction -----------------------------------------------------------

TEST(BucketTable, DefaultsAreAdaptivePolicySixteenBuckets) {
  BucketTable t{TableOptions{}};
  EXPECT_EQ(t.options().policy, GrowthPolicy::kAdaptive);
  EXPECT_EQ(t.bucket_count(), 16u);
  EXPECT_FALSE(t.immutable());
  EXPECT_EQ(t.growths(), 0u);
  EXPECT_EQ(t.options().load_factor, 4.0);
  // The default cap covers 100,000 threads at the default load factor.
  EXPECT_GE(t.options().max_buckets, RoundUpPow2(100000 * 4));
  // Only the cpus policy reads the online CPUs (a system call the other
  // policies never need): cpus stays 0 here.
  EXPECT_EQ(t.options().cpus, 0u);
}

TEST(BucketTable, CpusPolicyCountsTheOnlineCpus) {
  TableOptions o;
  o.policy = GrowthPolicy::kCpus;
  BucketTable t{o};
  // cpus = 0 means "the online CPUs", as Linux's num_online_cpus().
  EXPECT_EQ(t.options().cpus,
            static_cast<size_t>(sysconf(_SC_NPROCESSORS_ONLN)));
}

TEST(BucketTable, InitialSizeIsRoundedWithAMinimumOfSixteen) {
  EXPECT_EQ(BucketTable(Options(GrowthPolicy::kThreads, 5)).bucket_count(), 16u);
  EXPECT_EQ(BucketTable(Options(GrowthPolicy::kThreads, 0)).bucket_count(), 16u);
  EXPECT_EQ(BucketTable(Options(GrowthPolicy::kThreads, 100)).bucket_count(),
            128u);
  EXPECT_EQ(BucketTable(Options(GrowthPolicy::kCpus, 3)).bucket_count(), 16u);
}

TEST(BucketTable, FixedTablesHaveExactlyTheirSizeAndAreImmutable) {
  BucketTable one(Options(GrowthPolicy::kFixed, 1));
  EXPECT_EQ(one.bucket_count(), 1u);
  EXPECT_TRUE(one.immutable());
  BucketTable three(Options(GrowthPolicy::kFixed, 3));
  EXPECT_EQ(three.bucket_count(), 4u);
  EXPECT_TRUE(three.immutable());
  // Every key shares the single bucket of a fixed:1 table.
  Bucket* b = BucketOf(one, 0);
  for (uintptr_t k : {uintptr_t{1}, uintptr_t{64}, uintptr_t{0xdeadbeef},
                      ~uintptr_t{0}}) {
    EXPECT_EQ(BucketOf(one, k), b);
  }
}

TEST(BucketTable, CapIsRoundedAndClampsTheInitialSize) {
  BucketTable t(Options(GrowthPolicy::kThreads, 1024, 100));
  EXPECT_EQ(t.options().max_buckets, 128u);
  EXPECT_EQ(t.bucket_count(), 128u);
  // Born at its cap: immutable from the start.
  EXPECT_TRUE(t.immutable());
  EXPECT_FALSE(t.MaybeGrow(1000000));
  EXPECT_EQ(t.bucket_count(), 128u);
}

// --- Target sizes -----------------------------------------------------------

TEST(TargetBuckets, ThreadsPolicyIsLiveThreadsTimesLoadFactor) {
  BucketTable t(Options(GrowthPolicy::kThreads));
  EXPECT_EQ(t.TargetBuckets(0), 16u);
  EXPECT_EQ(t.TargetBuckets(1), 16u);
  EXPECT_EQ(t.TargetBuckets(4), 16u);
  EXPECT_EQ(t.TargetBuckets(5), 32u);
  EXPECT_EQ(t.TargetBuckets(512), 2048u);
  EXPECT_EQ(t.TargetBuckets(513), 4096u);
  EXPECT_EQ(t.TargetBuckets(1000), 4096u);
  EXPECT_EQ(t.TargetBuckets(1025), 8192u);
  // Not capped: the cap applies in MaybeGrow.
  EXPECT_EQ(t.TargetBuckets(size_t{1} << 20), size_t{1} << 22);
  TableOptions o = Options(GrowthPolicy::kThreads);
  o.load_factor = 1.5;
  BucketTable t15(o);
  EXPECT_EQ(t15.TargetBuckets(100), 256u);  // 150 -> 256
  EXPECT_EQ(t15.TargetBuckets(8), 16u);     // 12 -> 16 (minimum)
}

// Linux 6.16, futex_hash_allocate_default():
//   threads = min(get_nr_threads(), num_online_cpus());
//   buckets = roundup_pow_of_two(4 * threads), at least 16.
size_t Linux616Buckets(size_t threads, size_t cpus) {
  const size_t t = std::min(threads, cpus);
  return std::max<size_t>(16, std::bit_ceil(std::max<size_t>(4 * t, 1)));
}

TEST(TargetBuckets, CpusPolicyMatchesLinux616) {
  for (size_t cpus : {1, 2, 3, 4, 6, 8, 12, 16, 64, 96, 256}) {
    TableOptions o = Options(GrowthPolicy::kCpus);
    o.cpus = cpus;
    BucketTable t(o);
    EXPECT_EQ(t.options().cpus, cpus);
    for (size_t threads :
         {size_t{1}, size_t{2}, size_t{3}, size_t{4}, size_t{5}, size_t{7},
          size_t{8}, size_t{9}, size_t{33}, size_t{100}, size_t{1000},
          size_t{100000}}) {
      EXPECT_EQ(t.TargetBuckets(threads), Linux616Buckets(threads, cpus))
          << "threads " << threads << " cpus " << cpus;
    }
  }
  // The regression it reproduces: many threads on few CPUs stay at 16-32
  // buckets however many threads there are.
  TableOptions o = Options(GrowthPolicy::kCpus);
  o.cpus = 8;
  EXPECT_EQ(BucketTable(o).TargetBuckets(10000), 32u);
}

TEST(TargetBuckets, FixedPolicyIsItsSize) {
  BucketTable t(Options(GrowthPolicy::kFixed, 3));
  EXPECT_EQ(t.TargetBuckets(0), 4u);
  EXPECT_EQ(t.TargetBuckets(100000), 4u);
}

// --- Running out of memory ---------------------------------------------------

// Makes table mappings above `buckets` fail for one scope.
class FailMappingsAbove {
 public:
  explicit FailMappingsAbove(size_t buckets) {
    internal::FailTableMappingsAbove(buckets);
  }
  ~FailMappingsAbove() { internal::FailTableMappingsAbove(SIZE_MAX); }
  FailMappingsAbove(const FailMappingsAbove&) = delete;
  FailMappingsAbove& operator=(const FailMappingsAbove&) = delete;
};

// Every bucket of `t` can be locked and holds a queue (the table serves).
void ExpectServes(const BucketTable& t) {
  BucketTable::ReadSection rs(t);
  std::set<Bucket*> seen;
  for (uintptr_t k = 0; k < 64 * t.bucket_count(); ++k) {
    Bucket* b = t.LockBucket(0x7f0000000000 + 64 * k);
    Waiter w;
    w.key.store(0x7f0000000000 + 64 * k, std::memory_order_relaxed);
    b->Enqueue(&w);
    EXPECT_EQ(b->head, &w);
    b->Remove(&w, nullptr);
    b->lock.Unlock();
    seen.insert(b);
  }
  EXPECT_EQ(seen.size(), t.bucket_count());
}

TEST(OutOfMemory, SmallInitialTablesNeedNoMapping) {
  FailMappingsAbove fail(0);  // every mapping fails
  for (size_t n : {1, 2, 16}) {
    BucketTable fixed(Options(GrowthPolicy::kFixed, n));
    EXPECT_EQ(fixed.bucket_count(), n);
    EXPECT_EQ(fixed.allocation_failures(), 0u);
    ExpectServes(fixed);
  }
  BucketTable threads(Options(GrowthPolicy::kThreads));
  EXPECT_EQ(threads.bucket_count(), 16u);
  EXPECT_EQ(threads.allocation_failures(), 0u);
  ExpectServes(threads);
}

// A configured initial size that cannot be mapped falls back to the largest
// half that can, down to the table inside the object; counted once.
TEST(OutOfMemory, InitialTableFallsBackToWhatCanBeMapped) {
  {
    FailMappingsAbove fail(0);
    BucketTable t(Options(GrowthPolicy::kThreads, 4096));
    EXPECT_EQ(t.bucket_count(), 16u);
    EXPECT_EQ(t.allocation_failures(), 1u);
    EXPECT_FALSE(t.immutable());
    ExpectServes(t);
    BucketTable fixed(Options(GrowthPolicy::kFixed, 4096));
    EXPECT_EQ(fixed.bucket_count(), 16u);
    EXPECT_TRUE(fixed.immutable());
    EXPECT_EQ(fixed.allocation_failures(), 1u);
    ExpectServes(fixed);
  }
  FailMappingsAbove fail(256);
  BucketTable t(Options(GrowthPolicy::kThreads, 4096));
  EXPECT_EQ(t.bucket_count(), 256u);
  EXPECT_EQ(t.allocation_failures(), 1u);
  ExpectServes(t);
  BucketTable fixed(Options(GrowthPolicy::kFixed, 1000));
  EXPECT_EQ(fixed.bucket_count(), 256u);
  EXPECT_TRUE(fixed.immutable());
  EXPECT_FALSE(fixed.MaybeGrow(100000));
  // The cap counts the size reached: a table that fell back below its cap
  // may still grow later.
  BucketTable capped(Options(GrowthPolicy::kThreads, 1024, 1024));
  EXPECT_EQ(capped.bucket_count(), 256u);
  EXPECT_FALSE(capped.immutable());
}

// Sizes past kMaxTableBuckets (up to 2^64 - 1) are clamped, never
// overflowed into a tiny mapping or an endless rounding loop.
TEST(OutOfMemory, HugeSizesAreClamped) {
  FailMappingsAbove fail(64);
  BucketTable fixed(Options(GrowthPolicy::kFixed, SIZE_MAX));
  EXPECT_EQ(fixed.options().buckets, kMaxTableBuckets);
  EXPECT_EQ(fixed.bucket_count(), 64u);
  EXPECT_EQ(fixed.allocation_failures(), 1u);
  BucketTable threads(Options(GrowthPolicy::kThreads, SIZE_MAX, SIZE_MAX));
  EXPECT_EQ(threads.options().max_buckets, kMaxTableBuckets);
  EXPECT_EQ(threads.bucket_count(), 64u);
  EXPECT_EQ(threads.TargetBuckets(SIZE_MAX), kMaxTableBuckets);
  ExpectServes(threads);
}

// TargetBuckets never converts an out-of-range double to an integer.
TEST(OutOfMemory, TargetBucketsWithAbsurdLoadFactors) {
  for (double lf : {std::numeric_limits<double>::quiet_NaN(), -1.0, 0.0}) {
    TableOptions o = Options(GrowthPolicy::kThreads);
    o.load_factor = lf;
    EXPECT_EQ(BucketTable(o).TargetBuckets(1000), 16u) << lf;
  }
  for (double lf : {std::numeric_limits<double>::infinity(), 1e300}) {
    TableOptions o = Options(GrowthPolicy::kThreads);
    o.load_factor = lf;
    EXPECT_EQ(BucketTable(o).TargetBuckets(2), kMaxTableBuckets) << lf;
  }
  TableOptions o = Options(GrowthPolicy::kCpus);
  o.cpus = SIZE_MAX;
  EXPECT_EQ(BucketTable(o).TargetBuckets(SIZE_MAX), kMaxTableBuckets);
}

// A growth whose table cannot be mapped leaves the current table serving,
// with every queued waiter where it was, and is counted; once memory is
// back, the next call grows and moves them.
TEST(OutOfMemory, FailedGrowthKeepsTheTableServing) {
  BucketTable t(Options(GrowthPolicy::kThreads));
  constexpr int kWaiters = 100;
  auto waiters = std::make_unique<Waiter[]>(kWaiters);
  auto key = [](int i) { return 0x7f0000010000 + 64 * uintptr_t(i); };
  {
    BucketTable::ReadSection rs(t);
    for (int i = 0; i < kWaiters; ++i) {
      waiters[i].key.store(key(i), std::memory_order_relaxed);
      Bucket* b = t.LockBucket(key(i));
      b->Enqueue(&waiters[i]);
      b->lock.Unlock();
    }
  }
  auto all_found = [&] {
    BucketTable::ReadSection rs(t);
    int found = 0;
    for (int i = 0; i < kWaiters; ++i) {
      Bucket* b = t.LockBucket(key(i));
      for (Waiter* w = b->head; w != nullptr; w = w->next) {
        if (w == &waiters[i]) ++found;
      }
      b->lock.Unlock();
    }
    return found == kWaiters;
  };
  {
    FailMappingsAbove fail(16);
    EXPECT_FALSE(t.MaybeGrow(100));
    EXPECT_FALSE(t.MaybeGrow(1000));
    EXPECT_EQ(t.bucket_count(), 16u);
    EXPECT_EQ(t.growths(), 0u);
    EXPECT_EQ(t.allocation_failures(), 2u);
    EXPECT_FALSE(t.immutable());
    EXPECT_TRUE(all_found());
  }
  EXPECT_TRUE(t.MaybeGrow(100));
  EXPECT_EQ(t.bucket_count(), 512u);
  EXPECT_EQ(t.growths(), 1u);
  EXPECT_EQ(t.allocation_failures(), 2u);
  EXPECT_TRUE(all_found());
  // Leave nothing queued in a table about to be freed.
  BucketTable::ReadSection rs(t);
  for (int i = 0; i < kWaiters; ++i) {
    Bucket* b = t.LockBucket(key(i));
    Waiter* prev = nullptr;
    Waiter* w = b->head;
    while (w != &waiters[i]) {
      prev = w;
      w = w->next;
    }
    b->Remove(w, prev);
    b->lock.Unlock();
  }
}

// Readers keep locking, queueing and finding their waiters while a grower
// fails most of its attempts (the mapping limit flips under it).
TEST(OutOfMemory, ReadersDuringFailingGrowth) {
  testing::Watchdog wd(coretest::WatchdogLimit(absl::Seconds(120)),
                       "ReadersDuringFailingGrowth");
  BucketTable t(Options(GrowthPolicy::kThreads, 16, size_t{1} << 12));
  std::atomic<bool> done{false};
  std::atomic<int64_t> missing{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 4; ++i) {
    readers.emplace_back([&, i] {
      Waiter w;
      const uintptr_t key = 0x9000 + 64 * uintptr_t(i);
      w.key.store(key, std::memory_order_relaxed);
      while (!done.load(std::memory_order_acquire)) {
        BucketTable::ReadSection rs(t);
        Bucket* b = t.LockBucket(key);
        b->Enqueue(&w);
        b->lock.Unlock();
        b = t.LockWaiterBucket(&w);
        Waiter* prev = nullptr;
        Waiter* p = b->head;
        while (p != nullptr && p != &w) {
          prev = p;
          p = p->next;
        }
        if (p == &w) {
          b->Remove(&w, prev);
        } else {
          missing.fetch_add(1);
        }
        b->lock.Unlock();
      }
    });
  }
  Rng rng(7);
  uint64_t failed = 0;
  for (size_t live = 5; live <= 1024; live += 1 + rng.Below(8)) {
    // Three attempts in four fail.
    FailMappingsAbove fail(rng.Below(4) == 0 ? SIZE_MAX : 0);
    const size_t before = t.bucket_count();
    const size_t want =
        std::min(t.TargetBuckets(live), t.options().max_buckets);
    if (!t.MaybeGrow(live) && want > before) ++failed;
  }
  done.store(true, std::memory_order_release);
  for (auto& r : readers) r.join();
  EXPECT_EQ(missing.load(), 0);
  EXPECT_EQ(t.allocation_failures(), failed);
  EXPECT_GT(failed, 0u);
  EXPECT_GT(t.growths(), 0u);
}

// --- MaybeGrow --------------------------------------------------------------

TEST(MaybeGrow, ThreadsPolicyGrowsToTargetAndNeverShrinks) {
  BucketTable t(Options(GrowthPolicy::kThreads));
  EXPECT_FALSE(t.MaybeGrow(1));
  EXPECT_FALSE(t.MaybeGrow(4));
  EXPECT_EQ(t.growths(), 0u);
  EXPECT_TRUE(t.MaybeGrow(5));
  EXPECT_EQ(t.bucket_count(), 32u);
  EXPECT_EQ(t.growths(), 1u);
  EXPECT_TRUE(t.MaybeGrow(1000));
  EXPECT_EQ(t.bucket_count(), 4096u);  // in one step
  EXPECT_EQ(t.growths(), 2u);
  EXPECT_FALSE(t.MaybeGrow(1000));
  EXPECT_FALSE(t.MaybeGrow(3));
  EXPECT_EQ(t.bucket_count(), 4096u);
  EXPECT_FALSE(t.immutable());
}

TEST(MaybeGrow, ReachingTheCapMakesTheTableImmutable) {
  BucketTable t(Options(GrowthPolicy::kThreads, 16, 256));
  EXPECT_TRUE(t.MaybeGrow(20));  // 80 -> 128
  EXPECT_EQ(t.bucket_count(), 128u);
  EXPECT_FALSE(t.immutable());
  EXPECT_TRUE(t.MaybeGrow(100000));  // capped at 256
  EXPECT_EQ(t.bucket_count(), 256u);
  EXPECT_TRUE(t.immutable());
  EXPECT_FALSE(t.MaybeGrow(1000000));
  EXPECT_EQ(t.bucket_count(), 256u);
  EXPECT_EQ(t.growths(), 2u);
}

TEST(MaybeGrow, CpusPolicyStopsAtFourTimesCpus) {
  TableOptions o = Options(GrowthPolicy::kCpus);
  o.cpus = 16;
  BucketTable t(o);
  EXPECT_FALSE(t.MaybeGrow(4));  // 16
  EXPECT_TRUE(t.MaybeGrow(10));  // 40 -> 64
  EXPECT_EQ(t.bucket_count(), 64u);
  EXPECT_FALSE(t.MaybeGrow(16));  // 64
  EXPECT_FALSE(t.MaybeGrow(100000));
  EXPECT_EQ(t.bucket_count(), 64u);
}

TEST(MaybeGrow, FixedNeverGrows) {
  BucketTable t(Options(GrowthPolicy::kFixed, 1));
  EXPECT_FALSE(t.MaybeGrow(100000));
  EXPECT_EQ(t.bucket_count(), 1u);
  EXPECT_EQ(t.growths(), 0u);
}

// --- Moves keep every waiter, each in its key's bucket, in its key's order -

// Waiters of many keys interleaved in the queues; after each growth every
// waiter must be found exactly once, in the bucket of its key, and the
// waiters of each key by priority, in the order they were enqueued among
// equals.
// Retired tables stay mapped: a bucket pointer a reader loaded before two
// growths still locks and unlocks (with a grace period the old tables were
// unmapped: a fault, or ASan's use-after-unmap). Their count and bytes are
// reported, and all of them together stay below the current table's.
TEST(MaybeGrow, RetiredTablesStayMappedAndCounted) {
  BucketTable t(Options(GrowthPolicy::kThreads));
  const uintptr_t key = 0x7f0000004000;
  Bucket* first = nullptr;
  {
    BucketTable::ReadSection rs(t);
    first = t.LockBucket(key);
    BucketTable::UnlockBucket(first);
  }
  EXPECT_EQ(t.retired_tables(), 0u);
  size_t threads = 16;
  Bucket* second = nullptr;
  for (int g = 0; g < 6; ++g) {
    threads *= 4;
    ASSERT_TRUE(t.MaybeGrow(threads));
    if (g == 0) {
      BucketTable::ReadSection rs(t);
      second = t.LockBucket(key);
      BucketTable::UnlockBucket(second);
    }
  }
  EXPECT_EQ(t.retired_tables(), 6u);
  const uint64_t current = t.bucket_count() * sizeof(Bucket);
  EXPECT_GT(t.retired_bytes(), 0u);
  EXPECT_LT(t.retired_bytes(), current);
  // The inline table (16 buckets) and the first mapped one (256).
  first->lock.Lock();
  first->lock.Unlock();
  second->lock.Lock();
  EXPECT_EQ(second->head, nullptr);
  second->lock.Unlock();
}

TEST(MaybeGrow, MovesWaitersKeepingPerKeyOrder) {
  BucketTable t(Options(GrowthPolicy::kThreads));
  constexpr int kKeys = 61, kPerKey = 33;
  std::vector<uintptr_t> keys;
  for (int k = 0; k < kKeys; ++k) {
    // Addresses as the runtime sees them, plus edge values.
    keys.push_back(k == 0 ? 0 : k == 1 ? ~uintptr_t{0}
                                       : 0x7f0000001000 + 64 * uintptr_t(k));
  }
  auto waiters = std::make_unique<Waiter[]>(kKeys * kPerKey);
  auto index_of = [&](const Waiter* w) { return w - waiters.get(); };
  // Every fourth waiter of a key is not real-time; the others have
  // real-time priorities 10, 20 and 30 in turn.
  auto priority_of = [](int r) { return static_cast<uint8_t>(r % 4 * 10); };
  {
    BucketTable::ReadSection rs(t);
    for (int r = 0; r < kPerKey; ++r) {
      for (int k = 0; k < kKeys; ++k) {
        Waiter* w = &waiters[k * kPerKey + r];
        w->key.store(keys[k], std::memory_order_relaxed);
        w->priority = priority_of(r);
        Bucket* b = t.LockBucket(keys[k]);
        b->Enqueue(w);
        b->lock.Unlock();
      }
    }
  }
  auto check = [&](const char* when) {
    SCOPED_TRACE(when);
    std::set<Bucket*> buckets;
    size_t total = 0;
    BucketTable::ReadSection rs(t);
    for (int k = 0; k < kKeys; ++k) {
      Bucket* b = t.LockBucket(keys[k]);
      buckets.insert(b);
      std::vector<ptrdiff_t> order;
      for (Waiter* w = b->head; w != nullptr; w = w->next) {
        if (w->current_key() == keys[k]) order.push_back(index_of(w));
        if (w->next == nullptr) EXPECT_EQ(b->tail, w);
      }
      b->lock.Unlock();
      std::vector<ptrdiff_t> want;
      for (int p = 30; p >= 0; p -= 10) {
        for (int r = 0; r < kPerKey; ++r) {
          if (priority_of(r) == p) want.push_back(k * kPerKey + r);
        }
      }
      EXPECT_EQ(order, want) << "key " << k;
    }
    // Nothing else is queued anywhere: every waiter in these buckets is
    // one of ours, counted once.
    for (Bucket* b : buckets) {
      b->lock.Lock();
      for (Waiter* w = b->head; w != nullptr; w = w->next) ++total;
      b->lock.Unlock();
    }
    EXPECT_EQ(total, static_cast<size_t>(kKeys * kPerKey));
  };
  check("16 buckets");
  ASSERT_TRUE(t.MaybeGrow(20));
  check("128 buckets");
  ASSERT_TRUE(t.MaybeGrow(1000));
  EXPECT_EQ(t.bucket_count(), 4096u);
  check("4096 buckets");
  ASSERT_TRUE(t.MaybeGrow(100000));
  check("524288 buckets");
}

TEST(LockWaiterBucket, FindsTheBucketOfTheCurrentKey) {
  BucketTable t(Options(GrowthPolicy::kThreads));
  Waiter w;
  w.key.store(0x1234000, std::memory_order_relaxed);
  {
    BucketTable::ReadSection rs(t);
    Bucket* b = t.LockBucket(0x1234000);
    b->Enqueue(&w);
    b->lock.Unlock();
  }
  ASSERT_TRUE(t.MaybeGrow(1000));
  BucketTable::ReadSection rs(t);
  Bucket* b = t.LockWaiterBucket(&w);
  EXPECT_EQ(b->head, &w);
  b->Remove(&w, nullptr);
  EXPECT_EQ(b->head, nullptr);
  EXPECT_EQ(b->tail, nullptr);
  b->lock.Unlock();
}

// --- LockBucketPair ---------------------------------------------------------

TEST(LockBucketPair, SameBucketIsLockedOnce) {
  BucketTable t(Options(GrowthPolicy::kFixed, 1));
  BucketTable::ReadSection rs(t);
  auto pair = t.LockBucketPair(0x1000, 0x2000);
  EXPECT_EQ(pair.first, pair.second);
  BucketTable::UnlockBucketPair(pair);
  // Unlocked exactly once and not left locked: it can be taken again.
  Bucket* b = t.LockBucket(0x3000);
  EXPECT_EQ(b, pair.first);
  b->lock.Unlock();
}

TEST(LockBucketPair, ReturnsEachKeysBucket) {
  BucketTable t(Options(GrowthPolicy::kThreads, 1024));
  for (uintptr_t a = 0x1000, b = 0x9000; a < 0x1000 + 64 * 200;
       a += 64, b += 192) {
    Bucket* ba = BucketOf(t, a);
    Bucket* bb = BucketOf(t, b);
    BucketTable::ReadSection rs(t);
    auto pair = t.LockBucketPair(a, b);
    EXPECT_EQ(pair.first, ba);
    EXPECT_EQ(pair.second, bb);
    BucketTable::UnlockBucketPair(pair);
  }
}

// --- Concurrency: readers and pairs racing growth -----------------------

// Reader threads enqueue their own waiter, drop the lock, then find and
// remove it again, while a grower keeps growing the table. A waiter must
// always be found in the current bucket of its key (growth moved it), and
// no reader may touch a freed table (ASan/TSan would report it; a freed
// mapping faults). Retired tables stay mapped, so readers on an old table
// only retry.
// Pairs of threads lock key pairs in opposite orders during growth: the
// index ordering must keep them from deadlocking (the watchdog fires if
// not).
TEST(BucketTableConcurrency, ReadersAndPairsDuringGrowth) {
  testing::Watchdog wd(coretest::WatchdogLimit(absl::Seconds(180)),
                       "ReadersAndPairsDuringGrowth");
  const int tables = static_cast<int>(Scaled(60, 6, 2));
  constexpr int kReaders = 4;
  std::atomic<int64_t> missing{0}, ops{0};
  for (int iter = 0; iter < tables; ++iter) {
    BucketTable t(Options(GrowthPolicy::kThreads, 16, size_t{1} << 14));
    std::atomic<bool> grown{false};
    std::vector<std::thread> threads;
    for (int i = 0; i < kReaders; ++i) {
      threads.emplace_back([&, i] {
        Rng rng(iter * 100 + i);
        Waiter w;
        const uintptr_t key = 0x5000 + 64 * uintptr_t(i);
        w.key.store(key, std::memory_order_relaxed);
        int rounds = 0;
        while (!grown.load(std::memory_order_acquire) || rounds < 50) {
          ++rounds;
          {
            BucketTable::ReadSection rs(t);
            Bucket* b = t.LockBucket(key);
            b->Enqueue(&w);
            b->lock.Unlock();
          }
          coretest::RandomDelay(rng);
          {
            BucketTable::ReadSection rs(t);
            Bucket* b = t.LockBucket(key);
            Waiter* prev = nullptr;
            Waiter* p = b->head;
            while (p != nullptr && p != &w) {
              prev = p;
              p = p->next;
            }
            if (p == &w) {
              b->Remove(&w, prev);
            } else {
              missing.fetch_add(1);
            }
            b->lock.Unlock();
          }
          // Opposite-order pairs: readers 0/1 lock (k, k') and (k', k).
          {
            const uintptr_t other = 0x5000 + 64 * uintptr_t(i ^ 1);
            BucketTable::ReadSection rs(t);
            auto pair = i % 2 ? t.LockBucketPair(key, other)
                              : t.LockBucketPair(other, key);
            BucketTable::UnlockBucketPair(pair);
          }
          ops.fetch_add(1, std::memory_order_relaxed);
        }
      });
    }
    std::thread grower([&] {
      Rng rng(iter);
      for (size_t live = 1; live <= 4096; live += 1 + rng.Below(64)) {
        t.MaybeGrow(live);
        coretest::RandomDelay(rng);
      }
      t.MaybeGrow(1 << 20);  // to the cap
      grown.store(true, std::memory_order_release);
    });
    grower.join();
    for (auto& th : threads) th.join();
    EXPECT_TRUE(t.immutable());
    EXPECT_EQ(t.bucket_count(), size_t{1} << 14);
  }
  EXPECT_EQ(missing.load(), 0);
  RecordProperty("reader_rounds", static_cast<int>(ops.load()));
}

// --- Bucket primitives ------------------------------------------------------

TEST(Bucket, EnqueueRemoveAndHasKey) {
  Bucket b;
  Waiter w[4];
  for (int i = 0; i < 4; ++i) w[i].key.store(i % 2 ? 0xB : 0xA);
  b.lock.Lock();
  for (auto& x : w) b.Enqueue(&x);
  EXPECT_EQ(b.head, &w[0]);
  EXPECT_EQ(b.tail, &w[3]);
  EXPECT_TRUE(b.HasKey(0xA, b.head));
  EXPECT_TRUE(b.HasKey(0xB, b.head));
  EXPECT_FALSE(b.HasKey(0xC, b.head));
  // `from` is inclusive and only looks forward.
  EXPECT_TRUE(b.HasKey(0xA, &w[2]));
  EXPECT_FALSE(b.HasKey(0xA, &w[3]));
  EXPECT_FALSE(b.HasKey(0xA, nullptr));
  // Middle, then tail, then head.
  b.Remove(&w[1], &w[0]);
  EXPECT_EQ(w[0].next, &w[2]);
  EXPECT_EQ(w[1].next, nullptr);
  b.Remove(&w[3], &w[2]);
  EXPECT_EQ(b.tail, &w[2]);
  EXPECT_EQ(w[2].next, nullptr);
  EXPECT_FALSE(b.HasKey(0xB, b.head));
  b.Remove(&w[0], nullptr);
  EXPECT_EQ(b.head, &w[2]);
  EXPECT_EQ(b.tail, &w[2]);
  b.Remove(&w[2], nullptr);
  EXPECT_EQ(b.head, nullptr);
  EXPECT_EQ(b.tail, nullptr);
  // An emptied bucket queues again.
  b.Enqueue(&w[1]);
  EXPECT_EQ(b.head, &w[1]);
  EXPECT_EQ(b.tail, &w[1]);
  b.lock.Unlock();
}

// The waiters of `key` in `b`, in queue order, as indices into `w`.
std::vector<int> QueueOf(const Bucket& b, uintptr_t key, const Waiter* w)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  std::vector<int> order;
  for (const Waiter* x = b.head; x != nullptr; x = x->next) {
    if (x->current_key() == key) order.push_back(static_cast<int>(x - w));
  }
  return order;
}

// Real-time waiters (docs/design.md section 3.15): each key's waiters in
// descending priority, FIFO among equals, non-real-time (0) last; another
// key's waiters, queued in between, do not count; the tail stays right.
TEST(Bucket, EnqueueOrdersEachKeyByPriority) {
  Bucket b;
  Waiter w[10];
  // Key 0xA: priorities 0, 10, 30, 10, 0, 30 in arrival order; key 0xB:
  // 50, 0, 20, 5 interleaved.
  const struct {
    uintptr_t key;
    uint8_t priority;
  } arrivals[10] = {{0xA, 0},  {0xB, 50}, {0xA, 10}, {0xA, 30}, {0xB, 0},
                    {0xA, 10}, {0xB, 20}, {0xA, 0},  {0xA, 30}, {0xB, 5}};
  b.lock.Lock();
  for (int i = 0; i < 10; ++i) {
    w[i].key.store(arrivals[i].key);
    w[i].priority = arrivals[i].priority;
    b.Enqueue(&w[i]);
    Waiter* last = b.head;
    while (last->next != nullptr) last = last->next;
    EXPECT_EQ(b.tail, last) << "after " << i;
  }
  EXPECT_EQ(QueueOf(b, 0xA, w), (std::vector<int>{3, 8, 2, 5, 0, 7}));
  EXPECT_EQ(QueueOf(b, 0xB, w), (std::vector<int>{1, 6, 9, 4}));
  // The whole queue: [3, 8, 2, 5, 0, 1, 6, 9, 4, 7].
  EXPECT_EQ(b.head, &w[3]);
  EXPECT_EQ(b.tail, &w[7]);
  // Removing keeps the order; one that comes back at another priority
  // takes its place by it.
  b.Remove(&w[3], nullptr);
  w[3].priority = 20;
  b.Enqueue(&w[3]);
  EXPECT_EQ(QueueOf(b, 0xA, w), (std::vector<int>{8, 3, 2, 5, 0, 7}));
  EXPECT_EQ(b.head, &w[8]);
  b.lock.Unlock();
}

TEST(Bucket, FairTimeoutExpiresAfterItsRandomDeadline) {
  Bucket b;
  b.lock.Lock();
  constexpr int64_t kMean = 500000;
  int64_t now = 1000000000;
  // Never armed: arms and reports false.
  EXPECT_FALSE(b.FairTimeoutExpired(now, kMean));
  int64_t deadline = b.fair_deadline_ns;
  EXPECT_GE(deadline, now);
  EXPECT_LE(deadline, now + 2 * kMean);
  // Before the deadline: false, and the deadline stays.
  if (deadline > now) {
    EXPECT_FALSE(b.FairTimeoutExpired(deadline - 1, kMean));
    EXPECT_EQ(b.fair_deadline_ns, deadline);
  }
  // At or after it: true, and re-armed from that moment.
  std::set<int64_t> offsets;
  for (int i = 0; i < 200; ++i) {
    now = b.fair_deadline_ns + 1 + i;
    EXPECT_TRUE(b.FairTimeoutExpired(now, kMean));
    EXPECT_GE(b.fair_deadline_ns, now);
    EXPECT_LE(b.fair_deadline_ns, now + 2 * kMean);
    offsets.insert(b.fair_deadline_ns - now);
  }
  // The interval is random, not a constant.
  EXPECT_GT(offsets.size(), 100u);
  // A zero mean makes every unpark after the first fair.
  Bucket z;
  z.lock.Lock();
  EXPECT_FALSE(z.FairTimeoutExpired(5, 0));
  EXPECT_TRUE(z.FairTimeoutExpired(5, 0));
  EXPECT_TRUE(z.FairTimeoutExpired(6, 0));
  z.lock.Unlock();
  b.lock.Unlock();
}

}  // namespace
}  // namespace parklot::internal
