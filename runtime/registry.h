// The registry of threads that have used the parking lot: registry
// indices (dense, reused after exit), slot ids, the threads' states as lock
// waiters see them, and the counters of exited threads.
//
// Thread-safety: the registry functions may be called from any thread and
// never block on the lot (they read relaxed atomics, so counts are
// snapshots).
#ifndef PARKLOT_RUNTIME_REGISTRY_H_
#define PARKLOT_RUNTIME_REGISTRY_H_

#include <cstddef>
#include <cstdint>

#include "runtime/thread_data.h"

namespace parklot::internal {

// What a registered thread is doing, as lock waiters see it: parked in the
// lot (inside Park, queued, from just before its sleep until it wakes), or
// anything else. Owner-aware spinning only asks "is the owner parked?", so
// spinning is not published (it would cost a shared store per spin phase
// for no reader).
enum class ThreadState : uint8_t { kRunning = 0, kParked = 1 };

// The registry of threads that have used the parking lot.
namespace registry {

// Threads registered and not yet exited (0 before the lot's first use).
size_t LiveThreads();
// Registered threads currently parked (a snapshot while it changes; sums
// 16 per-shard counts, so meant for slow paths).
size_t ParkedThreads();
// CPUs in the process's affinity mask at start-up (>= 1). Initializes the
// lot if needed.
size_t AllowedCpus();
// State of the thread in `slot` (kRunning for kNoSlot, a free slot or an
// out-of-range one). A snapshot: the thread may change state at once.
ThreadState StateOf(uint32_t slot);
// Publishes `td`'s state and keeps ParkedThreads() in step. Called by the
// thread owning `td`, on slow paths only (two atomic RMWs: on the slot's
// state byte and on its shard of the parked count).
void SetState(ThreadData* td, ThreadState state);
// Total threads ever registered (exited ones included).
uint64_t ThreadsRegistered();
// The highest registry index handed out so far; bounded by the peak number
// of live threads, since exited threads' indices are reused (slot ids are
// not).
uint32_t HighestIndex();

// The lot's own steps (global_table.cc), in the order it runs them.
// At the lot's first use, before the table: sets up the registry, with
// `cpus` (AllowedCpus) and the thread-exit hook.
void Init(size_t cpus);
// The fork step kLot's registry part: its lock held across fork(); in the
// child, only the forking thread registered and nothing parked (after the
// table's reset), and the lock released.
void LockForFork();
void UnlockAfterFork();
void ResetInForkChild();

// Where the registry keeps its threads, for a reader in another process
// (`parklot top`, through the shim's parklot_debug_info, preload/debug_info.cc):
// `chunks` is an array of `chunk_count` pointers (nullptr: not mapped), each
// to a chunk whose `by_index_offset` holds `chunk_slots` ThreadData pointers
// (nullptr: a free index); `highest` is HighestIndex()'s word. Addresses in
// this process.
struct Layout {
  const void* chunks;
  const void* highest;
  uint32_t chunk_count;
  uint32_t chunk_slots;
  uint32_t by_index_offset;
};
Layout DebugLayout();

}  // namespace registry

}  // namespace parklot::internal

#endif  // PARKLOT_RUNTIME_REGISTRY_H_
