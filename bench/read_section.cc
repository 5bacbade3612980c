// The read-side cost of the bucket table alone: one
// BucketTable::ReadSection (the thread's lock section: a thread-local depth
// count; retired tables stay mapped, so nothing is pinned) per iteration on
// a growable table vs on an immutable table (kFixed), which since the
// lock-section merge cost the same, vs no section at all; and LockBucket +
// UnlockBucket of one of 1,024 keys, in turn, inside each (futex_hash's
// per-wait table work without the park).
// One thread, no contention: the figures are the instructions and cycles
// the section adds to every Park/Unpark, nothing else.
//
//   bazel run //bench:read_section -- --benchmark_repetitions=7
//       --benchmark_enable_random_interleaving=true          (one line)
//   valgrind --tool=callgrind bazel-bin/bench/read_section
//       --benchmark_min_time=0.01    (one line; instructions per call)
#include <atomic>
#include <cstdint>
#include <memory>

#include "benchmark/benchmark.h"
#include "hash/bucket_table.h"

namespace parklot::internal {
namespace {

constexpr size_t kBuckets = 1024;
constexpr int kKeys = 1024;  // as futex_hash's words per thread

// Both tables have 1,024 buckets; the growable one's cap, the default, is
// far above its size, so it never freezes.
// kind 1: fixed (immutable); 2: `threads` (growable); 3: `adaptive`
// (growable, and samples collisions on every LockBucket).
BucketTable& Table(int64_t kind) {
  static BucketTable* tables[4] = {};
  static const bool made = [] {
    const GrowthPolicy policies[] = {GrowthPolicy::kFixed, GrowthPolicy::kFixed,
                                     GrowthPolicy::kThreads,
                                     GrowthPolicy::kAdaptive};
    for (int k = 1; k < 4; ++k) {
      TableOptions o;
      o.policy = policies[k];
      o.buckets = kBuckets;
      tables[k] = new BucketTable(o);
    }
    return true;
  }();
  (void)made;
  return *tables[kind == 0 ? 1 : kind];
}

const uintptr_t* Keys() {
  static std::atomic<uint32_t>* words = new std::atomic<uint32_t>[kKeys]();
  static uintptr_t* keys = [] {
    auto* k = new uintptr_t[kKeys];
    for (int i = 0; i < kKeys; ++i) {
      k[i] = reinterpret_cast<uintptr_t>(&words[i]);
    }
    return k;
  }();
  return keys;
}

// Arg 0: 0 = no section, 1 = ReadSection on the immutable table,
// 2 = ReadSection on the growable table.
void Setup(benchmark::State& state, BucketTable** table) {
  *table = &Table(state.range(0));
  if (state.range(0) >= 2 && (*table)->immutable()) {
    state.SkipWithError("growable table is immutable");
  }
  static const char* const kLabels[] = {
      "no section", "immutable table", "growable table",
      "adaptive table (collision sampling)"};
  state.SetLabel(kLabels[state.range(0)]);
}

void BM_Section(benchmark::State& state) {
  BucketTable* table;
  Setup(state, &table);
  const bool section = state.range(0) != 0;
  for (auto _ : state) {
    if (section) {
      BucketTable::ReadSection rs(*table);
      benchmark::ClobberMemory();
    } else {
      benchmark::ClobberMemory();
    }
  }
}
BENCHMARK(BM_Section)->Arg(0)->Arg(1)->Arg(2)->Arg(3);

// LockBucket + UnlockBucket inside the section. Arg 0 locks the immutable
// table without a section (what its ReadSection amounts to).
void BM_SectionLockUnlock(benchmark::State& state) {
  BucketTable* table;
  Setup(state, &table);
  const bool section = state.range(0) != 0;
  const uintptr_t* keys = Keys();
  int i = 0;
  for (auto _ : state) {
    if (section) {
      BucketTable::ReadSection rs(*table);
      BucketTable::UnlockBucket(table->LockBucket(keys[i]));
    } else {
      BucketTable::UnlockBucket(table->LockBucket(keys[i]));
    }
    i = (i + 1) & (kKeys - 1);
  }
}
BENCHMARK(BM_SectionLockUnlock)->Arg(0)->Arg(1)->Arg(2)->Arg(3);

}  // namespace
}  // namespace parklot::internal

BENCHMARK_MAIN();
