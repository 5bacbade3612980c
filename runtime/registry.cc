#include "runtime/registry.h"

#include <limits.h>
#include <pthread.h>

#include <cstddef>
#include <cstdlib>
#include <new>

#include "base/anon_mmap.h"
#include "base/text.h"
#include "hash/lock_section.h"
#include "runtime/config.h"
#include "runtime/global_table.h"
#include "runtime/stats.h"
#include "runtime/thread_data.h"

namespace parklot::internal {
namespace {

// Live threads at once; also the size of the state table, which slot ids
// index modulo its size (ids that share an entry only blur the spinning
// heuristic; see StateOf).
constexpr uint32_t kMaxSlots = 1u << 20;

// Registry state. Indices are recycled through a free stack so that a
// process creating and ending threads forever keeps a bounded registry.
struct Registry {
  BucketLock lock;  // guards free_top, next_fresh, the free stack
  uint32_t next_fresh = 1;
  uint32_t free_top = 0;
  std::atomic<uint8_t>* states = nullptr;      // by StateIndex(slot id)
  std::atomic<size_t> live{0};
  // Parked threads, sharded by slot id: a park and its wake-up each add to
  // one shard, so threads in different shards never contend on a cache
  // line (one shared counter was 1.3% of a futex_schbench profile). A
  // thread always uses the same shard, so no shard goes below 0.
  struct alignas(64) Shard {
    std::atomic<size_t> n{0};
  };
  static constexpr uint32_t kParkedShards = 16;
  Shard parked[kParkedShards];
  std::atomic<uint64_t> registered{0};
  std::atomic<uint32_t> highest{0};
  size_t cpus = 1;
  pthread_key_t exit_key;
  // Counters of exited threads.
  Stats retired;
};

alignas(Registry) unsigned char g_registry_storage[sizeof(Registry)];

// A slot's entry in the states array: slot ids modulo kMaxSlots, with the
// two 6-bit fields below bit 12 swapped, so that threads with consecutive
// ids (made together, parking together) write to different cache lines (64
// entries to a line otherwise) while 4,096 consecutive ids share one page
// (one TLB entry for a park and its wake-up, where spreading the ids over
// the whole array put each on a page of its own). A bijection on
// [0, kMaxSlots).
constexpr uint32_t StateIndex(uint32_t slot) {
  static_assert(kMaxSlots == 1u << 20, "ids fit the array");
  const uint32_t s = slot % kMaxSlots;
  return (s & ~4095u) | ((s & 63u) << 6) | ((s >> 6) & 63u);
}

Registry& Reg() { return *reinterpret_cast<Registry*>(g_registry_storage); }

// The registry's lock is held inside a lock section, as a bucket's is: a
// signal handler of the holder that parks would register and wait for it,
// so the shim defers the handler to the section's end (hash/lock_section.h).
void LockRegistry(Registry& r) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  EnterSection();
  r.lock.Lock();
}
void UnlockRegistry(Registry& r) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  r.lock.Unlock();
  LeaveSection(nullptr);
}

// The spinning heuristic's thread states (1 MiB, .bss: read on contended
// paths by any thread, so never moved or mapped late).
PARKLOT_LARGE_BSS std::atomic<uint8_t> g_states_storage[kMaxSlots];

// The registry's per-index arrays: the live threads' data by registry
// index (for the statistics snapshot and the fork child), their queue
// records (ThreadData::record: dense, so that an unparker walking many
// threads' records meets few pages; 64 bytes each, a cache line apiece, so
// no two threads' records share one) and the free stack of indices, in
// chunks of kChunkSlots indices. The first chunk is in
// .bss (nothing to allocate, so nothing can fail at the lot's first use
// when memory is short: docs/design.md section 6, invariant 7); the others are
// mapped when fresh indices first reach them and stay mapped. Before, the whole
// 2^20 of each was in .bss: 12 MiB of address space in every process, which a
// small RLIMIT_AS (ulimit -v) could not spare. Only under Registry::lock (and
// in the fork child, alone).
constexpr uint32_t kChunkSlots = 1u << 12;
struct IndexChunk {
  ParkRecord records[kChunkSlots];
  std::atomic<ThreadData*> by_index[kChunkSlots];
  uint32_t free_stack[kChunkSlots] = {};
};
// constinit: zero-initialized in .bss, so no constructor runs at load time
// and no page of it is touched before the first registration (a dynamic
// initializer wrote all 304 KiB, 76 pages, in every process).
constinit PARKLOT_LARGE_BSS IndexChunk g_first_chunk;
IndexChunk* g_chunks[kMaxSlots / kChunkSlots] = {&g_first_chunk};

std::atomic<ThreadData*>& ByIndex(uint32_t i) {
  return g_chunks[i / kChunkSlots]->by_index[i % kChunkSlots];
}
ParkRecord& RecordAt(uint32_t i) {
  return g_chunks[i / kChunkSlots]->records[i % kChunkSlots];
}
uint32_t& FreeStackAt(uint32_t pos) {
  return g_chunks[pos / kChunkSlots]->free_stack[pos % kChunkSlots];
}
// Makes index `i` (and free-stack position `i`) addressable: maps its
// chunk if it has none. False if the mapping failed. Under the lock.
bool ChunkFor(uint32_t i) {
  IndexChunk*& c = g_chunks[i / kChunkSlots];
  if (c == nullptr) {
    c = static_cast<IndexChunk*>(
        MapAnonymous(sizeof(IndexChunk), /*reserve=*/true));
  }
  return c != nullptr;
}

void OnThreadExit(void* arg);

// Says once per process that threads run without a registry index: after
// the first, the line would only repeat at every registration while memory
// stays short. `fresh` is the first index never handed out.
void SayNoIndex(uint32_t fresh) {
  static std::atomic<bool> said{false};
  if (said.exchange(true, std::memory_order_relaxed)) return;
  if (fresh >= kMaxSlots) {
    SayLine("parklot: more than %u live threads: the threads past them run "
            "without a registry index (counted in statistics at their exit)",
            kMaxSlots - 1);
  } else {
    SayLine("parklot: no memory for the thread registry past %u live "
            "threads: the threads past them run without a registry index "
            "(counted in statistics at their exit)",
            fresh - 1);
  }
}

void AddCounters(Stats* s, const ThreadCounters& c) {
  s->parks += c.parks.load(std::memory_order_relaxed);
  s->unparks += c.unparks.load(std::memory_order_relaxed);
  s->timeouts += c.timeouts.load(std::memory_order_relaxed);
  s->invalid += c.invalid.load(std::memory_order_relaxed);
  s->spins += c.spins.load(std::memory_order_relaxed);
  s->spin_acquired += c.spin_acquired.load(std::memory_order_relaxed);
  s->handoffs += c.handoffs.load(std::memory_order_relaxed);
  const BucketLockCounters& b = c.bucket_lock;
  s->bucket_lock_contended += b.contended.load(std::memory_order_relaxed);
  s->bucket_lock_spin_won += b.spin_won.load(std::memory_order_relaxed);
  s->bucket_lock_slept += b.slept.load(std::memory_order_relaxed);
  s->bucket_lock_sleeps += b.sleeps.load(std::memory_order_relaxed);
  s->bucket_lock_wakes += b.wakes.load(std::memory_order_relaxed);
  s->bucket_lock_hold_samples += b.hold_samples.load(std::memory_order_relaxed);
  s->bucket_lock_hold_ns += b.hold_ns.load(std::memory_order_relaxed);
  s->bucket_lock_long_holds += b.long_holds.load(std::memory_order_relaxed);
}

// The thread-exit hook (a TSD destructor): retires the thread's slot and
// counters. Destructors that run after it (other libraries') may still lock
// and park: the thread stays registered with its slot id, so it is counted
// once and never registers again.
void OnThreadExit(void*) {
  Registry& r = Reg();
  ThreadData* td = &t_data;
  if (td->exited) return;
  // Parks from here on (later destructors, signal handlers) use own_record:
  // the registry record goes to the next thread that takes this index.
  ParkRecord* const mine = td->Record();
  td->record = nullptr;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  // A wait left by siglongjmp may still have this thread queued.
  EvictOwnRecord(mine);
  LockRegistry(r);
  AddCounters(&r.retired, td->counters);
  if (td->index != 0) {  // 0: it ran without one (RegisterCurrentThread)
    ByIndex(td->index).store(nullptr, std::memory_order_relaxed);
    FreeStackAt(r.free_top++) = td->index;
  }
  UnlockRegistry(r);
  r.live.fetch_sub(1, std::memory_order_relaxed);
  td->index = 0;
  td->exited = true;
  new (&td->counters) ThreadCounters();
}

}  // namespace

ThreadData* RegisterCurrentThread() {
  BucketTable& table = GlobalTable();
  Registry& r = Reg();
  ThreadData* td = &t_data;
  LockRegistry(r);
  uint32_t index = 0;
  if (r.free_top > 0) {
    index = FreeStackAt(--r.free_top);
  } else if (r.next_fresh < kMaxSlots && ChunkFor(r.next_fresh)) {
    index = r.next_fresh++;
  }
  // index 0 (no chunk could be mapped, or 2^20 - 1 indices are live): the
  // thread runs without one, on its own_record (docs/design.md section
  // 3.9). Registration is an optimisation and must not end the process
  // (invariant 7); the slot id below, which locks record as their owner,
  // needs no index.
  td->index = index;
  const uint32_t fresh = r.next_fresh;
  if (index != 0) {
    // The record's last owner left every queue before its index was freed
    // (OnThreadExit); a FUTEX_WAKE it was still due may land here later, a
    // spurious wake-up.
    td->record = new (&RecordAt(index)) ParkRecord();
    ByIndex(index).store(td, std::memory_order_relaxed);
    // Under the lock: a load-compare-store outside it could let a smaller
    // index overwrite a larger one, hiding a live thread from GetStats.
    if (index > r.highest.load(std::memory_order_relaxed)) {
      r.highest.store(index, std::memory_order_relaxed);
    }
  }
  BucketLock::CountInto(&td->counters.bucket_lock);
  // The section stays open until the thread counts as registered: a
  // handler delivered in between that parked would register it again.
  r.lock.Unlock();
  const uint64_t serial = r.registered.fetch_add(1, std::memory_order_relaxed);
  td->slot = static_cast<uint32_t>(serial % kMaxSlotId) + 1;
  const size_t live = r.live.fetch_add(1, std::memory_order_relaxed) + 1;
  // Registered from here on: what follows may lock pthread mutexes, which
  // under the shim are this lot's and need this thread's data. glibc's
  // pthread_setspecific allocates (calloc, whose malloc may take a mutex)
  // when the program created 32 keys before ours; that must not re-enter
  // registration.
  t_registered = true;
  LeaveSection(nullptr);
  if (index == 0) SayNoIndex(fresh);
  // The value only needs to be non-null to run the exit destructor.
  pthread_setspecific(r.exit_key, td);
  table.MaybeGrow(live);
  return td;
}

namespace registry {

size_t LiveThreads() {
  if (!LotInitialized()) return 0;
  return Reg().live.load(std::memory_order_relaxed);
}

size_t ParkedThreads() {
  if (!LotInitialized()) return 0;
  size_t n = 0;
  for (const auto& shard : Reg().parked) {
    n += shard.n.load(std::memory_order_relaxed);
  }
  return n;
}

size_t AllowedCpus() {
  GlobalTable();
  return Reg().cpus;
}

ThreadState StateOf(uint32_t slot) {
  if (slot == kNoSlot || slot > kMaxSlotId ||
      !LotInitialized()) {
    return ThreadState::kRunning;
  }
  return static_cast<ThreadState>(
      Reg().states[StateIndex(slot)].load(std::memory_order_relaxed));
}

void SetState(ThreadData* td, ThreadState state) {
  if (td->slot == kNoSlot) return;  // a guest record (AcquireGuestData)
  Registry& r = Reg();
  const auto old = static_cast<ThreadState>(
      r.states[StateIndex(td->slot)].exchange(static_cast<uint8_t>(state),
                                  std::memory_order_relaxed));
  auto& shard = r.parked[td->slot % Registry::kParkedShards].n;
  if (old != ThreadState::kParked && state == ThreadState::kParked) {
    shard.fetch_add(1, std::memory_order_relaxed);
  } else if (old == ThreadState::kParked && state != ThreadState::kParked) {
    shard.fetch_sub(1, std::memory_order_relaxed);
  }
}

uint64_t ThreadsRegistered() {
  if (!LotInitialized()) return 0;
  return Reg().registered.load(std::memory_order_relaxed);
}

uint32_t HighestIndex() {
  if (!LotInitialized()) return 0;
  return Reg().highest.load(std::memory_order_relaxed);
}

Layout DebugLayout() {
  return Layout{g_chunks, &Reg().highest, kMaxSlots / kChunkSlots, kChunkSlots,
                static_cast<uint32_t>(offsetof(IndexChunk, by_index))};
}

void Init(size_t cpus) {
  Registry* r = new (g_registry_storage) Registry();
  r->states = g_states_storage;
  r->cpus = cpus;
  if (const int rc = pthread_key_create(&r->exit_key, OnThreadExit)) {
    // No key left (PTHREAD_KEYS_MAX): run on without exit accounting.
    // PTHREAD_KEYS_MAX is no key, so pthread_setspecific on it fails
    // with EINVAL and never touches another library's key.
    r->exit_key = PTHREAD_KEYS_MAX;
    // Secure mode writes nothing (docs/design.md section 6, invariant 8).
    if (!SecureMode()) {
      SayLine("parklot: pthread_key_create failed (error %d): exited "
              "threads will stay counted as live",
              rc);
    }
  }
}

void LockForFork() ABSL_NO_THREAD_SAFETY_ANALYSIS { Reg().lock.Lock(); }

void UnlockAfterFork() ABSL_NO_THREAD_SAFETY_ANALYSIS { Reg().lock.Unlock(); }

void ResetInForkChild() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // Only this thread lives on: every other index is free again, and no
  // other thread is parked.
  Registry& r = Reg();
  const uint32_t mine =
      t_registered && !t_data.exited ? t_data.index : 0;
  r.free_top = 0;
  const uint32_t hi = r.highest.load(std::memory_order_relaxed);
  for (uint32_t i = hi; i >= 1; --i) {
    if (i == mine) continue;
    if (ThreadData* gone = ByIndex(i).load(std::memory_order_relaxed)) {
      r.states[StateIndex(gone->slot)].store(0, std::memory_order_relaxed);
      ByIndex(i).store(nullptr, std::memory_order_relaxed);
    }
    FreeStackAt(r.free_top++) = i;
  }
  // Registered without an index (mine 0) counts as live all the same.
  r.live.store(t_registered && !t_data.exited ? 1 : 0,
               std::memory_order_relaxed);
  // The queues were emptied: a record this thread left behind (siglongjmp
  // out of a wait) is gone with them, and so are the threads a wake duty
  // would have woken. Both of its records: the registry record, and
  // own_record, which it may be on already (a fork from a handler that
  // interrupted OnThreadExit before the registry record was evicted).
  ParkRecord* const records[] = {&t_data.own_record,
                                 mine != 0 ? &RecordAt(mine) : nullptr};
  for (ParkRecord* rec : records) {
    if (rec == nullptr) continue;
    rec->parker.store(0, std::memory_order_relaxed);
    rec->wake_duty_count.store(0, std::memory_order_relaxed);
  }
  // The tasks that held guest records stayed in the parent.
  GuestRecords().ResetAll();
  for (auto& shard : r.parked) shard.n.store(0, std::memory_order_relaxed);
  // The forking thread may be parked itself (fork() from a signal handler
  // that runs on it): its state stays kParked, and its wake-up, when the
  // handler returns to the emptied queue, takes it off the count.
  if (t_registered &&
      r.states[StateIndex(t_data.slot)].load(std::memory_order_relaxed) ==
          static_cast<uint8_t>(ThreadState::kParked)) {
    r.parked[t_data.slot % Registry::kParkedShards].n.store(
        1, std::memory_order_relaxed);
  }
  r.lock.Unlock();  // taken by LockForFork in the parent
}

}  // namespace registry

Stats GetStats() {
  Stats s;
  if (!LotInitialized()) return s;
  Registry& r = Reg();
  LockRegistry(r);
  s = r.retired;
  const uint32_t hi = r.highest.load(std::memory_order_relaxed);
  for (uint32_t i = 1; i <= hi; ++i) {
    ThreadData* td = ByIndex(i).load(std::memory_order_relaxed);
    if (td != nullptr) AddCounters(&s, td->counters);
  }
  UnlockRegistry(r);
  BucketTable& t = GlobalTable();
  s.growths = t.growths();
  s.growth_failures = t.allocation_failures();
  s.collision_growths = t.collision_growths();
  s.retired_tables = t.retired_tables();
  s.retired_bytes = t.retired_bytes();
  s.sampled_locks = t.sampled_locks();
  s.sampled_collisions = t.sampled_collisions();
  s.buckets = t.bucket_count();
  s.live_threads = r.live.load(std::memory_order_relaxed);
  s.threads_registered = r.registered.load(std::memory_order_relaxed);
  return s;
}

}  // namespace parklot::internal
