#include "runtime/thread_data.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <new>

#include "base/anon_mmap.h"
#include "base/futex.h"
#include "base/shared_tls.h"
#include "base/text.h"
#include "runtime/config.h"
#include "runtime/fork.h"
#include "runtime/stats.h"

namespace parklot::internal {
// Initial-exec TLS: the preload shim is loaded at start-up, so this lands
// in the static TLS block; no __tls_get_addr, no allocation on first touch.
constinit __attribute__((tls_model("initial-exec"))) thread_local ThreadData t_data;
constinit __attribute__((tls_model("initial-exec"))) thread_local bool t_registered;
constinit std::atomic<void (*)(ThreadData*)> g_wake_duty_hook{nullptr};
constinit std::atomic<uint32_t> g_sched_generation{0};
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
  // line (one shared counter was 1.3% of a futex_schbench profile, issue
  // 10). A thread always uses the same shard, so no shard goes below 0.
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
alignas(BucketTable) unsigned char g_table_storage[sizeof(BucketTable)];
// 0 none, 1 initializing, 2 ready.
std::atomic<int> g_init{0};

// A slot's entry in the states array: slot ids modulo kMaxSlots, with the
// low 6 bits moved to the top, so that threads with consecutive ids (made
// together, parking together) write to different cache lines (64 entries
// to a line otherwise). A bijection on [0, kMaxSlots).
constexpr uint32_t StateIndex(uint32_t slot) {
  static_assert(kMaxSlots == 1u << 20, "the rotation assumes 20 bits");
  const uint32_t s = slot % kMaxSlots;
  return ((s & 63u) << 14) | (s >> 6);
}

Registry& Reg() { return *reinterpret_cast<Registry*>(g_registry_storage); }

// The spinning heuristic's thread states (1 MiB, .bss: read on contended
// paths by any thread, so never moved or mapped late).
std::atomic<uint8_t> g_states_storage[kMaxSlots];

// The registry's per-index arrays: the live threads' data by registry
// index (for the statistics snapshot and the fork child) and the free
// stack of indices, in chunks of kChunkSlots indices. The first chunk is in
// .bss (nothing to allocate, so nothing can fail at the lot's first use
// when memory is short: docs/design.md section 6, invariant 7); the others are
// mapped when fresh indices first reach them and stay mapped. Before, the whole
// 2^20 of each was in .bss: 12 MiB of address space in every process, which a
// small RLIMIT_AS (ulimit -v) could not spare. Only under Registry::lock (and
// in the fork child, alone).
constexpr uint32_t kChunkSlots = 1u << 14;
struct IndexChunk {
  std::atomic<ThreadData*> by_index[kChunkSlots];
  uint32_t free_stack[kChunkSlots];
};
IndexChunk g_first_chunk;
IndexChunk* g_chunks[kMaxSlots / kChunkSlots] = {&g_first_chunk};

std::atomic<ThreadData*>& ByIndex(uint32_t i) {
  return g_chunks[i / kChunkSlots]->by_index[i % kChunkSlots];
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

// The calling task's real-time priority: its sched_priority, which is
// 1..99 under SCHED_FIFO and SCHED_RR and 0 under every other policy
// (SCHED_DEADLINE included). A raw system call: no errno, and safe in a
// signal handler.
uint8_t OwnRealTimePriority() {
  struct sched_param param = {};
  const long rc = RawSyscall6(SYS_sched_getparam, 0,
                              reinterpret_cast<long>(&param), 0, 0, 0, 0);
  if (rc != 0 || param.sched_priority <= 0) return 0;
  return static_cast<uint8_t>(param.sched_priority > 255 ? 255
                                                         : param.sched_priority);
}

// A process that starts real-time (chrt, a real-time parent, posix_spawn
// with POSIX_SPAWN_SETSCHEDULER) queues by priority from its first park:
// one sched_getparam at load time, before main and any sandbox, the
// start-up exception of docs/design.md section 6, invariant 9. Its threads
// inherit the policy without a call the shim sees.
void ReadStartupScheduling() {
  const uint8_t priority = OwnRealTimePriority();
  if (priority == 0) return;
  uint32_t expected = 0;
  g_sched_generation.compare_exchange_strong(
      expected, 1, std::memory_order_release, std::memory_order_relaxed);
}

// The CPUs at start-up: in the affinity mask (the spin policy's) and online
// (the `cpus` growth policy's). Read by a load-time constructor, before
// main and so before any sandbox the program installs (docs/design.md section
// 6, invariant 9: glibc makes no sched_getaffinity for a program that never
// asks), or by the first use of the lot if that comes earlier (another
// library's constructor). Written once before any thread can read them. The same
// moment reads whether the process starts real-time
// (ReadStartupScheduling).
size_t g_affinity_cpus = 0;
size_t g_online_cpus = 0;

void ReadStartupCpus() {
  if (g_affinity_cpus != 0) return;
  ReadStartupScheduling();
  cpu_set_t set;
  const int n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  g_online_cpus = online > 0 ? static_cast<size_t>(online) : 1;
  g_affinity_cpus = n > 0 ? static_cast<size_t>(n) : 1;
}

void InitOnce() {
  int expected = 0;
  if (g_init.compare_exchange_strong(expected, 1, std::memory_order_acquire)) {
    Registry* r = new (g_registry_storage) Registry();
    r->states = g_states_storage;
    ReadStartupCpus();
    r->cpus = g_affinity_cpus;
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
    TableOptions table = GetConfig().table;
    if (table.cpus == 0) table.cpus = g_online_cpus;
    new (g_table_storage) BucketTable(table);
    if (GetConfig().stats) BucketLock::EnableHoldTiming();
    InstallDeferredUnparkRunner();
    g_init.store(2, std::memory_order_release);
    return;
  }
  while (g_init.load(std::memory_order_acquire) != 2) CpuRelax();
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
  // A wait left by siglongjmp may still have this thread queued; its TLS
  // is about to be freed.
  EvictOwnRecord(td);
  r.lock.Lock();
  AddCounters(&r.retired, td->counters);
  ByIndex(td->index).store(nullptr, std::memory_order_relaxed);
  FreeStackAt(r.free_top++) = td->index;
  r.lock.Unlock();
  r.live.fetch_sub(1, std::memory_order_relaxed);
  td->index = 0;
  td->exited = true;
  new (&td->counters) ThreadCounters();
}

// Guest records (GuestRecords).
constinit GuestSlots g_guests;

// Each guest record's robust list (WatchGuestLife): a head whose
// one entry names the record's key word, which holds the tid of the task
// that claimed the record. Filled at load time and never changed: a task
// whose list still names a record that another task claimed since dies
// without effect on it (the kernel marks the word only if it holds the
// dying task's tid).
struct GuestLife {
  struct robust_list_head head;
  struct robust_list entry;
};
GuestLife g_guest_life[kGuestRecords];

void InitGuestLives() {
  for (size_t i = 0; i < kGuestRecords; ++i) {
    GuestLife& l = g_guest_life[i];
    l.head.list.next = &l.entry;
    l.entry.next = &l.head.list;
    l.head.futex_offset =
        reinterpret_cast<char*>(&g_guests.KeyAt(i)) -
        reinterpret_cast<char*>(&l.entry);
    l.head.list_op_pending = nullptr;
  }
}

// The task that is forking, where the TLS was shared (ForkStep::kSharedTls).
// Written by the forking task only: glibc serializes forks' handlers.
int32_t g_forking_tid;

bool SharedTlsForkPrepare() {
  if (!TlsMayBeShared()) return false;
  g_forking_tid = CurrentTaskId();
  return true;
}

// The child's first step: its one thread owns the TLS from here on, with
// the forking task's own state (docs/design.md section 3.11).
void SharedTlsForkChild() {
  AdoptSectionsInForkChild(g_forking_tid);
  // A task that forked from a signal handler while it was parked on its
  // guest record comes back to a sleep on it: released, as ForkChild
  // releases t_data (the queues are emptied), never to be woken otherwise.
  if (ThreadData* mine = g_guests.Find(g_forking_tid)) {
    mine->unpark_token = 0;  // kDefaultUnparkToken (parking_lot.h)
    mine->wake_duty_count.store(0, std::memory_order_relaxed);
    mine->parker.store(0, std::memory_order_relaxed);
  }
  // The tasks that held the others stayed in the parent.
  g_guests.ResetAll();
}

constexpr ForkHandlers kSharedTlsForkStep{SharedTlsForkPrepare, nullptr,
                                          SharedTlsForkChild};

// fork(): the ForkStep::kLot step (runtime/fork.h runs it, innermost of
// the program's handlers; see BucketTable::LockAllForFork). ForkParent and
// ForkChild run only if ForkPrepare took the locks (g_init may turn 2
// between the two).
bool ForkPrepare() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (g_init.load(std::memory_order_acquire) != 2) return false;
  // Registered first: registering needs the registry lock taken below.
  CurrentThreadData();
  Reg().lock.Lock();
  reinterpret_cast<BucketTable*>(g_table_storage)->LockAllForFork();
  return true;
}

void ForkParent() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  reinterpret_cast<BucketTable*>(g_table_storage)->UnlockAllAfterFork();
  Reg().lock.Unlock();
}

void ForkChild() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  reinterpret_cast<BucketTable*>(g_table_storage)->ResetInChildAfterFork();
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
  r.live.store(mine != 0 ? 1 : 0, std::memory_order_relaxed);
  // The queues were emptied: a record this thread left behind (siglongjmp
  // out of a wait) is gone with them, and so are the threads a wake duty
  // would have woken.
  t_data.parker.store(0, std::memory_order_relaxed);
  // The tasks that held guest records stayed in the parent.
  g_guests.ResetAll();
  t_data.wake_duty_count.store(0, std::memory_order_relaxed);
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
  r.lock.Unlock();
}

constexpr ForkHandlers kLotForkStep{ForkPrepare, ForkParent, ForkChild};

// At load time: the fork step, and what the lot reads of the machine.
__attribute__((constructor)) void AtLoad() {
  RegisterForkStep(ForkStep::kLot, &kLotForkStep);
  RegisterForkStep(ForkStep::kSharedTls, &kSharedTlsForkStep);
  InitGuestLives();
  ReadStartupCpus();
}

}  // namespace

GuestSlots& GuestRecords() { return g_guests; }

void ReleaseGuestData(ThreadData* td, int32_t tid) {
  g_guests.Release(td, tid);
}

uint8_t RefreshQueuePriority(ThreadData* td, uint32_t generation) {
  td->sched_priority = OwnRealTimePriority();
  td->sched_generation = generation;
  return td->sched_priority;
}

void SchedulingChanged(bool real_time) {
  uint32_t g = g_sched_generation.load(std::memory_order_relaxed);
  uint32_t next;
  do {
    // Nobody real-time yet, and nobody becoming so: nothing to re-read.
    if (g == 0 && !real_time) return;
    next = g + 1 == 0 ? 1 : g + 1;  // 0 stays "never real-time"
    // Release: a thread that sees the new generation reads its priority
    // after the change that bumped it.
  } while (!g_sched_generation.compare_exchange_weak(
      g, next, std::memory_order_release, std::memory_order_relaxed));
}

bool GuestTaskDied(const ThreadData* td) {
  const size_t i = g_guests.IndexOf(td);
  return i < kGuestRecords &&
         (g_guests.KeyAt(i).load(std::memory_order_acquire) &
          FUTEX_OWNER_DIED) != 0;
}

void WatchGuestLife(size_t index) {
  struct robust_list_head* const mine = &g_guest_life[index].head;
  long head = 0;
  size_t len = 0;
  if (RawSyscall6(SYS_get_robust_list, 0, reinterpret_cast<long>(&head),
                  reinterpret_cast<long>(&len), 0, 0, 0) != 0) {
    return;
  }
  const auto* current = reinterpret_cast<const GuestLife*>(head);
  if (head == reinterpret_cast<long>(mine)) return;
  // A list this task set up itself (a raw clone child starts with none) is
  // the program's: replacing it would lose its robust futexes.
  if (head != 0 && (current < &g_guest_life[0] ||
                    current >= &g_guest_life[kGuestRecords])) {
    return;
  }
  RawSyscall6(SYS_set_robust_list, reinterpret_cast<long>(mine),
              sizeof(*mine), 0, 0, 0, 0);
}

ThreadData* FindGuestData(int32_t tid) { return g_guests.Find(tid); }

bool LotInitialized() {
  return g_init.load(std::memory_order_acquire) == 2;
}

BucketTable& GlobalTable() {
  if (g_init.load(std::memory_order_acquire) != 2) InitOnce();
  return *reinterpret_cast<BucketTable*>(g_table_storage);
}

ThreadData* RegisterCurrentThread() {
  BucketTable& table = GlobalTable();
  Registry& r = Reg();
  ThreadData* td = &t_data;
  r.lock.Lock();
  uint32_t index = 0;
  if (r.free_top > 0) {
    index = FreeStackAt(--r.free_top);
  } else if (r.next_fresh < kMaxSlots && ChunkFor(r.next_fresh)) {
    index = r.next_fresh++;
  } else {
    const bool full = r.next_fresh >= kMaxSlots;
    r.lock.Unlock();
    // Beyond the first 16,384 live threads, a chunk of 192 KiB; the
    // thread itself has just mapped a larger stack.
    if (full) {
      SayLine("parklot: more than %u live threads", kMaxSlots - 1);
    } else {
      SayLine("parklot: no memory for the thread registry past %u live "
              "threads", r.next_fresh - 1);
    }
    abort();
  }
  td->index = index;
  BucketLock::CountInto(&td->counters.bucket_lock);
  ByIndex(index).store(td, std::memory_order_relaxed);
  // Under the lock: a load-compare-store outside it could let a smaller
  // index overwrite a larger one, hiding a live thread from GetStats.
  if (index > r.highest.load(std::memory_order_relaxed)) {
    r.highest.store(index, std::memory_order_relaxed);
  }
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
  // The value only needs to be non-null to run the exit destructor.
  pthread_setspecific(r.exit_key, td);
  table.MaybeGrow(live);
  return td;
}

// Async-cancel-safe: atomics and the futex system call only.
__attribute__((noinline)) bool SleepOnParkerLoop(ThreadData* td,
                                                 const struct timespec* tsp,
                                                 int op);

bool SleepOnParker(ThreadData* td, const Deadline& deadline) {
  td->interrupted = false;
  struct timespec ts;
  int op;
  const struct timespec* tsp = deadline.FutexWait(&ts, &op);
  int cancel_type = PTHREAD_CANCEL_DEFERRED;
  if (td->cancellation_point != 0) {
    // Acts at once on a pending cancel: the thread unwinds from here.
    pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &cancel_type);
  }
  const bool released = SleepOnParkerLoop(td, tsp, op);
  if (td->cancellation_point != 0) pthread_setcanceltype(cancel_type, nullptr);
  // Before anything else the released thread does: the threads it is to
  // wake wait on nothing but this.
  if (released) RunWakeDuty(td);
  return released;
}

bool SleepOnParkerLoop(ThreadData* td, const struct timespec* tsp, int op) {
  for (;;) {
    uint32_t v = td->parker.load(std::memory_order_acquire);
    if (v == 0) return true;
    if ((v & kParkerAsleep) == 0) {
      // Tells unparkers to FUTEX_WAKE; fails if one (or a signal handler's
      // kParkerAway) changed the word meanwhile: look again.
      if (!td->parker.compare_exchange_strong(v, v | kParkerAsleep,
                                              std::memory_order_acquire)) {
        continue;
      }
      v |= kParkerAsleep;
    }
    long rc = RawFutex(&td->parker, op, v, tsp, nullptr, FUTEX_BITSET_MATCH_ANY);
    if (rc == -ETIMEDOUT) {
      return td->parker.load(std::memory_order_acquire) == 0;
    }
    if (rc == -EINTR && td->interruptible != 0) {
      // A handler ran and the kernel chose not to restart the sleep.
      td->interrupted = true;
      return td->parker.load(std::memory_order_acquire) == 0;
    }
    // 0 (woken, maybe spuriously), -EAGAIN (the word changed), -EINTR
    // (a signal handler ran): re-check the word.
  }
}

bool ReleaseParker(ThreadData* td, uintptr_t token) {
  td->unpark_token = token;
  return (td->parker.exchange(0, std::memory_order_release) & kParkerAsleep) !=
         0;
}

bool ClaimParker(ThreadData* td) {
  uint32_t v = td->parker.load(std::memory_order_relaxed);
  while ((v & kParkerAway) == 0) {
    if (td->parker.compare_exchange_weak(v, v | kParkerClaimed,
                                         std::memory_order_acq_rel,
                                         std::memory_order_relaxed)) {
      return true;
    }
  }
  return false;
}

void WakeParker(ThreadData* td) { FutexWakePrivate(&td->parker, 1); }

void RunWakeDutySlow(ThreadData* td) {
  const uint32_t n = td->wake_duty_count.load(std::memory_order_acquire);
  if (n == 0) return;
  if (auto* hook = g_wake_duty_hook.load(std::memory_order_relaxed)) {
    hook(td);
  }
  for (uint32_t i = 0; i < n && i < kWakeFanout; ++i) {
    FutexWakePrivate(td->wake_duty[i].load(std::memory_order_relaxed), 1);
  }
  // A handler that interrupted the loop above ran the whole duty itself
  // (and perhaps a new one, from a park inside it, which it also ran):
  // nothing is left either way.
  td->wake_duty_count.store(0, std::memory_order_relaxed);
}

namespace registry {

size_t LiveThreads() {
  if (g_init.load(std::memory_order_acquire) != 2) return 0;
  return Reg().live.load(std::memory_order_relaxed);
}

size_t ParkedThreads() {
  if (g_init.load(std::memory_order_acquire) != 2) return 0;
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
      g_init.load(std::memory_order_acquire) != 2) {
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
  if (g_init.load(std::memory_order_acquire) != 2) return 0;
  return Reg().registered.load(std::memory_order_relaxed);
}

uint32_t HighestIndex() {
  if (g_init.load(std::memory_order_acquire) != 2) return 0;
  return Reg().highest.load(std::memory_order_relaxed);
}

}  // namespace registry

void DescribeLot(TextBuffer* out) {
  BucketTable& table = GlobalTable();
  out->Add("config: ");
  DescribeConfig(GetConfig(), out);
  out->Add("\ncpus: %zu in the affinity mask\ntable: %zu buckets now, growth %s\n",
           registry::AllowedCpus(), table.bucket_count(),
           table.immutable() ? "off (immutable)" : "on");
}

Stats GetStats() {
  Stats s;
  if (g_init.load(std::memory_order_acquire) != 2) return s;
  Registry& r = Reg();
  r.lock.Lock();
  s = r.retired;
  const uint32_t hi = r.highest.load(std::memory_order_relaxed);
  for (uint32_t i = 1; i <= hi; ++i) {
    ThreadData* td = ByIndex(i).load(std::memory_order_relaxed);
    if (td != nullptr) AddCounters(&s, td->counters);
  }
  r.lock.Unlock();
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
