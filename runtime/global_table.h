// The process's bucket table and the lot's start-up: the table is made,
// with the registry, at the lot's first use; the fork step kLot keeps both
// whole across fork() (docs/design.md section 3.11).
#ifndef PARKLOT_RUNTIME_GLOBAL_TABLE_H_
#define PARKLOT_RUNTIME_GLOBAL_TABLE_H_

#include "hash/bucket_table.h"

namespace parklot::internal {

// Whether the lot (registry and table) exists yet. Async-signal-safe.
bool LotInitialized();
// The process's table, created on first use from GetConfig() (which fixes
// the configuration). Thread-safe. Never calls malloc: the table object,
// with a first table of up to BucketTable::kInlineBuckets buckets inside
// it, is static storage; a larger table (configured, or a growth at a
// thread's registration) is mmap-ed, and a failed mapping falls back
// (BucketTable).
BucketTable& GlobalTable();

}  // namespace parklot::internal

#endif  // PARKLOT_RUNTIME_GLOBAL_TABLE_H_
