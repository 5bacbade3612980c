// Per-thread state of the parking lot: ThreadData, its queue record
// (ParkRecord) and parker, the guest records of tasks on a shared TLS, and
// the real-time queue priority. The
// registry that numbers threads is runtime/registry.h; the table and the
// lot's start-up, runtime/global_table.h.
//
// Thread-safety: a ThreadData is written by its own thread (and its signal
// handlers); a ParkRecord by its owner while it is in no queue and, while
// it is queued, under that queue's bucket lock, its parker word atomically.
#ifndef PARKLOT_RUNTIME_THREAD_DATA_H_
#define PARKLOT_RUNTIME_THREAD_DATA_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "hash/bucket_table.h"
#include "runtime/deadline.h"

namespace parklot::internal {

// Slot ids name a thread as a lock owner (locks store their owner's slot
// in their word; waiters look up its state). Each registration takes the
// next id, 1..kMaxSlotId, so a thread never passes for the owner of a lock
// an exited thread held until kMaxSlotId more threads have registered (16.7
// million; glibc's owner TIDs recur after pid_max, 4.2 million at most).
// 0 means "no thread". 24 bits: SharedMutex keeps the owner in 24.
inline constexpr uint32_t kNoSlot = 0;
inline constexpr uint32_t kMaxSlotId = (1u << 24) - 1;

// Per-thread counters: written only by their thread (relaxed stores, no
// read-modify-write), read by the statistics code.
struct ThreadCounters {
  std::atomic<uint64_t> parks{0};
  std::atomic<uint64_t> unparks{0};  // threads this thread woke
  std::atomic<uint64_t> timeouts{0};
  std::atomic<uint64_t> invalid{0};  // parks refused by validate
  std::atomic<uint64_t> spins{0};    // spin phases entered
  std::atomic<uint64_t> spin_acquired{0};  // spin phases that won
  std::atomic<uint64_t> handoffs{0};       // fair direct handoffs done
  BucketLockCounters bucket_lock;          // hash/bucket_lock.h

  void Bump(std::atomic<uint64_t>& c) { Add(c, 1); }
  void Add(std::atomic<uint64_t>& c, uint64_t n) {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
};

// The parker word's bits. 0 means released (not queued).
inline constexpr uint32_t kParkerQueued = 1;  // in a bucket queue
inline constexpr uint32_t kParkerAsleep = 2;  // and asleep in FUTEX_WAIT
// An unparker, under the bucket lock, has chosen this thread to wake (and
// may hand it a resource); set and cleared within one bucket-lock hold.
inline constexpr uint32_t kParkerClaimed = 4;
// A signal handler runs on the queued thread (EnterSignalHandler): it may
// leave its wait by siglongjmp, so it receives no handoff; an unparker that
// meets it evicts it with a plain wake-up (a spurious one, if the handler
// returns) and wakes the next waiter instead.
inline constexpr uint32_t kParkerAway = 8;

// The wake tree (runtime/parking_lot.cc ReleaseChain, docs/design.md
// section 3.3): when one unpark releases many threads (more than 32), the
// unparker issues the FUTEX_WAKEs of only the first two, and every thread
// woken that way wakes up to kWakeFanout others before it returns from its
// park. The parker words a thread must wake are its wake duty, written into
// its ParkRecord by the unparker, under the bucket lock, before the
// thread's release.
inline constexpr size_t kWakeFanout = 2;

// An unpark that a signal handler asked for while its thread was inside a
// lock section, run when the section closes (UnparkUpTo).
struct DeferredUnpark {
  std::atomic<uintptr_t> key{0};  // 0: free slot
  std::atomic<size_t> count{0};
  std::atomic<uintptr_t> token_mask{0};
};
inline constexpr size_t kDeferredUnparks = 16;

// A thread's queue record: the part of its parking state that unparkers
// touch, one cache line. A registered thread's lives in the registry's
// dense array, at the thread's registry index (registry.cc), not in its
// TLS: an unparker that walks a queue of many threads then meets a few
// pages, where records in each thread's TLS would each cost a TLB miss as
// well as a cache miss (docs/design.md section 3.2). Guest records and
// threads past their exit use the record inside their ThreadData
// (ThreadData::own_record). The owner writes it outside a queue; while it
// is queued, only under its bucket lock, except `parker` (atomic).
struct alignas(64) ParkRecord {
  Waiter waiter;  // key and queue link, guarded by the bucket lock
  // The parker: kParker* bits. Unparkers set 0 under the bucket lock and
  // FUTEX_WAKE only if kParkerAsleep was set.
  std::atomic<uint32_t> parker{0};
  std::atomic<uint32_t> wake_duty_count{0};  // entries of wake_duty
  uintptr_t park_token = 0;    // guarded by the bucket lock
  uintptr_t unpark_token = 0;  // written before parker is released
  // The wake duty (see kWakeFanout): the parker words of threads released
  // together with this one that this one FUTEX_WAKEs once it finds itself
  // released (RunWakeDuty). Written by the unparker while this thread is
  // claimed, before its release (which publishes them); run and cleared by
  // this thread or a signal handler on it. A wake may be issued twice (a
  // handler that interrupts RunWakeDuty runs the whole duty again), which
  // is harmless: a released thread only ever sees a spurious wake-up.
  std::atomic<std::atomic<uint32_t>*> wake_duty[kWakeFanout] = {};
};
static_assert(sizeof(ParkRecord) == 64, "one cache line per record");

// A thread's parking state. Lives in static TLS (no heap, no constructor);
// set up at the thread's first use of the lot: its first park, unpark or
// parklot lock operation (locks record their owner's slot).
struct ThreadData {
  // The thread's registry record (registry.cc), from its registration
  // until its exit; nullptr before and after, and in a guest record: then
  // Record() is own_record.
  ParkRecord* record = nullptr;
  // When the thread last queued: CLOCK_REALTIME_COARSE in ns (a few ns per
  // park through the vDSO; a debugger's "waiting since", live and in a core
  // file, whose own time is wall-clock). Read only by debuggers.
  int64_t parked_since_ns = 0;
  // How the last park that thread cancellation unwound had ended: whether
  // an unparker had released the thread first, and with what token.
  uintptr_t unwound_token = 0;
  bool unwound_unparked = false;
  // Parks end on a signal handler's EINTR while this is non-zero (see
  // InterruptiblePark in parking_lot.h); SleepOnParker then sets
  // `interrupted`.
  bool interrupted = false;
  // The thread's registry index was released at its exit (OnThreadExit);
  // its later lot use, from destructors that run after parklot's, keeps
  // its slot id and never registers it again, and parks on own_record.
  bool exited = false;
  uint32_t interruptible = 0;
  // Parks are POSIX cancellation points while this is non-zero (see
  // CancellationPoint in parking_lot.h).
  uint32_t cancellation_point = 0;
  // The thread's real-time priority as last read (QueuePriority), and the
  // scheduling generation it was read in (0: never). Touched only by this
  // thread and its handlers.
  uint32_t sched_generation = 0;
  uint8_t sched_priority = 0;
  // Keeps `slot` where released headers read it (below).
  uint8_t reserved_[15] = {};
  // Owner id, see kMaxSlotId. Its offset, 56, is ABI: the installed
  // headers' inline fast paths read it through t_data, which
  // libparklot.so.0 exports (dist/libparklot.lds), so it stays put within
  // one SONAME.
  uint32_t slot = kNoSlot;
  // Dense registry index, reused after exit; 0: none (before registration,
  // after exit, or a thread that got none: registry.cc RegisterCurrentThread).
  uint32_t index = 0;
  // Unparks deferred by signal handlers (see UnparkUpTo); touched only by
  // this thread and its handlers. `deferred_overflow`: more distinct keys
  // than slots, so the runner wakes every parked thread instead.
  DeferredUnpark deferred[kDeferredUnparks];
  std::atomic<bool> deferred_overflow{false};
  ThreadCounters counters;
  // The queue record of a guest and of a thread past its exit (`record`).
  ParkRecord own_record;

  // The record this thread (or guest task) parks on. Owner paths only.
  ParkRecord* Record() {
    ParkRecord* r = record;
    return r != nullptr ? r : &own_record;
  }
};
static_assert(offsetof(ThreadData, slot) == 56,
              "ThreadData::slot's offset is ABI (see the field)");

extern constinit __attribute__((tls_model("initial-exec"))) thread_local ThreadData
    t_data;
extern constinit __attribute__((tls_model("initial-exec"))) thread_local bool
    t_registered;
ThreadData* RegisterCurrentThread();
// If `r` (the calling thread's record, ThreadData::Record) is still queued
// from a wait it left without the lot's help (siglongjmp out of a signal
// handler), removes it, released with kDefaultUnparkToken. Returns whether
// it did. Inline below RunWakeDuty: every park asks, and almost never is
// the record queued.
inline bool EvictOwnRecord(ParkRecord* r);
// EvictOwnRecord once the record is found queued. Defined in
// parking_lot.cc.
bool EvictQueuedOwnRecord(ParkRecord* r);
// Makes the table run the deferred-unpark runner at section exits (see
// UnparkUpTo). Called once, when the lot is initialized.
void InstallDeferredUnparkRunner();
// The parking records of tasks on another task's TLS (base/shared_tls.h:
// OnForeignTls), whose ThreadData is their owner's: kGuestRecords records
// in .bss, each claimed for the kernel thread id of the task parking on it
// (AcquireGuestData in parking_lot.cc) until ReleaseGuestData(td, tid). Not
// registered (slot kNoSlot: no owner state, no counters that reach the
// statistics); each queues on its own_record. A record `tid` claimed before and never released (its park
// left by siglongjmp) is found again as it was, perhaps still queued: Park
// evicts it as it evicts a thread's own. A record's key word is the one
// entry of its task's robust list (WatchGuestLife), so the kernel marks it
// FUTEX_OWNER_DIED when the task dies holding it: unparkers then drop the
// record from its queue (GuestTaskDied) and a claimer that finds no free
// record reclaims it (docs/design.md section 2.11).
inline constexpr size_t kGuestRecords = 32;
using GuestSlots = TaskSlots<ThreadData, kGuestRecords>;
extern GuestSlots g_guest_records;
inline GuestSlots& GuestRecords() { return g_guest_records; }
// Whether queue record `r` is a guest record's (unparkers ask of every
// waiter they take: two compares).
inline bool IsGuestRecord(const ParkRecord* r) {
  return GuestRecords().Contains(r);
}
void ReleaseGuestData(ThreadData* td, int32_t tid);
// The guest record task `tid` holds (it is parking or parked), or nullptr.
// Lock-free, async-signal-safe.
ThreadData* FindGuestData(int32_t tid);
// Whether `r` is a guest record whose task died holding it. Under the
// lock of the bucket `r` is queued in (or of its key).
bool GuestTaskDied(const ParkRecord* r);
// Makes guest record `index`'s key word the calling task's robust list
// (set_robust_list), unless the task has a robust list of its own (the
// program's: left alone, and the task's death goes unseen). One or two
// system calls; called once per claim.
void WatchGuestLife(size_t index);
// Tests only: called by RunWakeDuty with the thread's record, its duty
// written, before it wakes anyone (a slow, forking or vanishing helper).
// nullptr (the default) in every program.
extern std::atomic<void (*)(ParkRecord*)> g_wake_duty_hook;

// The calling thread's data, registered on first call (counts the thread as
// live, gives it a slot, may grow the table). Must not be called inside a
// table ReadSection. After the first call: one TLS load, no allocation.
// The first call per thread may allocate, outside the lot's own code:
// glibc's pthread_setspecific callocs a second-level key block when the
// program holds 32 or more keys; a table growth it triggers maps memory
// (GlobalTable). The lot's own storage is static TLS (ThreadData) and .bss
// (the registry and the first 4,096 queue records; later ones are mapped
// as the registry grows, registry.cc).
inline ThreadData* CurrentThreadData() {
  if (__builtin_expect(t_registered, 1)) return &t_data;
  return RegisterCurrentThread();
}

// The calling thread's data if it has registered, else nullptr. Never
// registers.
inline ThreadData* CurrentThreadDataIfAny() {
  return t_registered ? &t_data : nullptr;
}

// The calling thread's slot id (registers it on first call). Cheap: one
// initial-exec TLS load after the first call.
inline uint32_t CurrentSlot() { return CurrentThreadData()->slot; }

// Sleeps until `r->parker` becomes 0 (returns true) or `deadline` passes
// (returns false; the parker may still be 1). `r` is the record the park
// queued (td->Record() when it began: a whole park stays on one record).
// Retries on EINTR and spurious wake-ups, except with td->interruptible
// set: then EINTR also returns false, with td->interrupted set (it is
// cleared on entry). Called by the
// owning thread only. With td->cancellation_point set, the sleep runs in
// asynchronous cancellation mode, so pthread_cancel unwinds out of it; it
// must stay out of line and free of cleanups, so that unwinding from any of
// its instructions finds no landing pad to miss.
__attribute__((noinline)) bool SleepOnParker(ThreadData* td, ParkRecord* r,
                                             const Deadline& deadline);

// Marks `r` released and returns whether it needs a FUTEX_WAKE (it was
// asleep in the kernel). Call under the bucket lock; after it the thread may
// return from Park, so `r` must only be passed to WakeParker.
bool ReleaseParker(ParkRecord* r, uintptr_t token);
// Under the bucket lock of the queue holding `r`: marks it claimed for a
// wake-up, or returns false if a signal handler runs on it (kParkerAway),
// which must then be evicted instead.
bool ClaimParker(ParkRecord* r);
// FUTEX_WAKE on the parker word. Harmless if the thread has since moved
// on, or exited and its registry record went to another thread (a
// spurious wake-up there).
void WakeParker(ParkRecord* r);
// Runs and clears `r`'s wake duty (ParkRecord::wake_duty), if any: one
// FUTEX_WAKE per word, nothing else (async-signal-safe, no lock, never
// touches the woken threads' memory). Called by the thread owning `r` at
// every point where it finds itself released (SleepOnParker, LeaveQueue,
// EvictOwnRecord) and by EnterSignalHandler, so that a handler that leaves
// by siglongjmp cannot strand the threads it was to wake. The check is
// inline: every park passes here, and almost none has a duty.
void RunWakeDutySlow(ParkRecord* r);
inline void RunWakeDuty(ParkRecord* r) {
  // Acquire: pairs with the release by which this thread saw itself
  // released (the duty was written before it), also when a signal handler
  // runs this after its own acquire load of the parker.
  if (r->wake_duty_count.load(std::memory_order_acquire) != 0) {
    RunWakeDutySlow(r);
  }
}

inline bool EvictOwnRecord(ParkRecord* r) {
  if (r->parker.load(std::memory_order_acquire) == 0) {
    // A wake duty still due here means the wait it came with was left
    // without the lot's help (siglongjmp from a handler the shim did not
    // wrap): run it now rather than never.
    RunWakeDuty(r);
    return false;
  }
  return EvictQueuedOwnRecord(r);
}

// Real-time queue order (docs/design.md section 3.15). A waiter queues
// with its thread's real-time priority (Waiter::priority). The priority is
// known without a system call while the process has never been seen to
// use real-time scheduling: g_sched_generation is 0 then, and every park
// queues at 0. Once it has been (the process started real-time, or
// SchedulingChanged said so), every change of any thread's scheduling that
// the lot hears of bumps the generation, and each thread reads its own
// priority again (one sched_getparam) at its next park.
extern constinit std::atomic<uint32_t> g_sched_generation;
// Reads the calling task's priority (sched_getparam) into `td` for
// `generation` and returns it. Async-signal-safe; leaves errno alone.
uint8_t RefreshQueuePriority(ThreadData* td, uint32_t generation);
// At the lot's start-up (global_table.cc ReadStartupCpus): a process that
// starts real-time queues by priority from its first park.
void ReadStartupScheduling();

// The priority the calling task queues with, parking on `td` (its own
// record, or a guest record: those are shared by tasks over time, so their
// cache is never trusted). One relaxed load and a predictable branch in a
// process that never used real-time scheduling. Call outside any bucket
// lock (it may make a system call).
inline uint8_t QueuePriority(ThreadData* td) {
  const uint32_t generation =
      g_sched_generation.load(std::memory_order_acquire);
  if (__builtin_expect(generation == 0, 1)) return 0;
  if (td->sched_generation == generation && td->slot != kNoSlot) {
    return td->sched_priority;
  }
  return RefreshQueuePriority(td, generation);
}

}  // namespace parklot::internal

#endif  // PARKLOT_RUNTIME_THREAD_DATA_H_
