// Parking-lot statistics. Counting costs the uncontended path nothing: only
// slow paths (park, unpark, spin phases) count, into per-thread counters
// that are summed on demand.
#ifndef PARKLOT_RUNTIME_STATS_H_
#define PARKLOT_RUNTIME_STATS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/text.h"

namespace parklot::internal {

struct Stats {
  uint64_t parks = 0;
  uint64_t unparks = 0;
  uint64_t timeouts = 0;
  uint64_t invalid = 0;
  uint64_t spins = 0;
  uint64_t spin_acquired = 0;
  uint64_t handoffs = 0;
  // Bucket locks (hash/bucket_lock.h, BucketLockCounters): acquisitions
  // that found the lock held, won it spinning, slept first; FUTEX_WAITs
  // and FUTEX_WAKEs on bucket locks; with PARKLOT_STATS, sampled hold
  // times (count, sum in ns) and sampled holds of 20 us or more (the
  // holder was descheduled while holding).
  uint64_t bucket_lock_contended = 0;
  uint64_t bucket_lock_spin_won = 0;
  uint64_t bucket_lock_slept = 0;
  uint64_t bucket_lock_sleeps = 0;
  uint64_t bucket_lock_wakes = 0;
  uint64_t bucket_lock_hold_samples = 0;
  uint64_t bucket_lock_hold_ns = 0;
  uint64_t bucket_lock_long_holds = 0;
  uint64_t growths = 0;
  // Table allocations that failed (memory short): growths that did not
  // happen, and an initial table smaller than configured. The table in
  // use keeps serving (BucketTable::allocation_failures()).
  uint64_t growth_failures = 0;
  // Of `growths`: those driven by measured collisions (policy adaptive;
  // BucketTable::kCollisionWindow); the others followed live threads.
  uint64_t collision_growths = 0;
  // Tables replaced by growths, which stay mapped for the life of the
  // process, and the bytes they map (less than the current table's).
  uint64_t retired_tables = 0;
  uint64_t retired_bytes = 0;
  // The adaptive policy's samples (1 in BucketTable::kCollisionSampleEvery
  // bucket locks, of the windows judged so far) and, of them, collisions
  // (the bucket's record, its last sample of another key, was another
  // thread's).
  uint64_t sampled_locks = 0;
  uint64_t sampled_collisions = 0;
  size_t buckets = 0;
  size_t live_threads = 0;
  uint64_t threads_registered = 0;
};

// A snapshot: counters of exited threads plus those of live threads (read
// without stopping them, so figures of running threads may lag). Thread-safe.
Stats GetStats();

// Multi-line human-readable form of `stats`, appended to `out`; no
// allocation.
void FormatStats(const Stats& stats, TextBuffer* out);
inline std::string FormatStats(const Stats& stats) {
  char buf[2048];
  TextBuffer out(buf, sizeof(buf));
  FormatStats(stats, &out);
  return std::string(out.view());
}

// What `parklot info` prints of this process's lot, one item per line:
// the configuration in force (DescribeConfig), the CPUs in the affinity
// mask, and the table's size and whether it may grow. Fixes the
// configuration and initializes the lot, as its first use would.
// Thread-safe; appended to `out`, no allocation (not for lock paths: it
// may initialize the lot).
void DescribeLot(TextBuffer* out);
inline std::string DescribeLot() {
  char buf[1024];
  TextBuffer out(buf, sizeof(buf));
  DescribeLot(&out);
  return std::string(out.view());
}

}  // namespace parklot::internal

#endif  // PARKLOT_RUNTIME_STATS_H_
