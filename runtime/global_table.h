// The process's bucket table and the lot's start-up: the table is made,
// with the registry, at the lot's first use; the fork step kLot keeps both
// whole across fork() (docs/design.md section 3.11).
#ifndef PARKLOT_RUNTIME_GLOBAL_TABLE_H_
#define PARKLOT_RUNTIME_GLOBAL_TABLE_H_

#include <atomic>

#include "hash/bucket_table.h"

namespace parklot::internal {

// The lot's start-up state: 0 none, 1 initializing, 2 ready. Written by
// GlobalTable's first call only; read inline because the spin decision
// (registry::StateOf) asks on every spinning round.
extern constinit std::atomic<int> g_init;

// Whether the lot (registry and table) exists yet. Async-signal-safe.
inline bool LotInitialized() {
  return g_init.load(std::memory_order_acquire) == 2;
}
// The process's table, created on first use from GetConfig() (which fixes
// the configuration). Thread-safe. Never calls malloc: the table object,
// with a first table of up to BucketTable::kInlineBuckets buckets inside
// it, is static storage; a larger table (configured, or a growth at a
// thread's registration) is mmap-ed, and a failed mapping falls back
// (BucketTable).
BucketTable& GlobalTable();
// Reads the online CPU count the `cpus` growth policy sizes the table by,
// once, and only where GetConfig() (which it fixes) chose that policy.
// The shim calls it at load time, so the read comes before any sandbox;
// the lot's first use calls it otherwise. Thread-safe (racing calls store
// the same count).
void ReadOnlineCpus();

}  // namespace parklot::internal

#endif  // PARKLOT_RUNTIME_GLOBAL_TABLE_H_
