#include "runtime/parking_lot.h"

#include <errno.h>
#include <linux/futex.h>

#include <cstddef>

#include "base/shared_tls.h"
#include "hash/bucket_table.h"
#include "hash/lock_section.h"
#include "runtime/config.h"
#include "runtime/global_table.h"
#include "runtime/registry.h"
#include "runtime/thread_data.h"

namespace parklot::internal {
namespace {

ParkRecord* RecordOf(Waiter* w) {
  static_assert(offsetof(ParkRecord, waiter) == 0, "Waiter leads ParkRecord");
  return reinterpret_cast<ParkRecord*>(w);
}

// Threads released under a bucket lock that still need a FUTEX_WAKE. Wakes
// are issued after the lock is dropped, so woken threads do not run into a
// held bucket; if more than fit are pending, the excess is woken in place
// (never an allocation: this runs under pthread_mutex_lock in the shim).
class WakeList {
 public:
  WakeList() = default;
  WakeList(const WakeList&) = delete;
  WakeList& operator=(const WakeList&) = delete;

  // Releases `r` with `token`. `r` must be off every queue.
  void Release(ParkRecord* r, UnparkToken token) {
    if (ReleaseParker(r, token)) Add(r);
  }
  // Queues the FUTEX_WAKE of `r`, released already and asleep.
  void Add(ParkRecord* r) {
    if (n_ == kCapacity) Flush();
    pending_[n_++] = r;
  }
  void Flush() {
    for (size_t i = 0; i < n_; ++i) WakeParker(pending_[i]);
    n_ = 0;
  }
  // A guest record was met (TakeWaiters): its task may die at any moment,
  // so ReleaseChain gives no wake duty to anyone in this unpark.
  void NoteGuest() { saw_guest_ = true; }
  bool saw_guest() const { return saw_guest_; }

 private:
  static constexpr size_t kCapacity = 32;
  ParkRecord* pending_[kCapacity];
  size_t n_ = 0;
  bool saw_guest_ = false;
};

// Tasks on shared TLS that found no guest record (ParkWithoutRecord) sleep
// on g_overflow_seq in the kernel. Such a sleeper reads the sequence, then
// arms g_overflow_armed, then validates under its key's bucket lock; every
// unpark, after its bucket section, clears an armed flag and then bumps the
// sequence and wakes every sleeper (WakeOverflowSleepers). Every arm is
// thus followed by a bump by whoever clears it, after the sleeper's read:
// no sleeper misses the unpark its validation raced with. A flag left
// armed by a sleeper that timed out, left by siglongjmp or died costs one
// spurious round of wakes, no more. docs/design.md section 2.11.
constinit std::atomic<uint32_t> g_overflow_seq{0};
constinit std::atomic<uint32_t> g_overflow_armed{0};

void WakeOverflowSleepersSlow() {
  if (g_overflow_armed.exchange(0, std::memory_order_acq_rel) == 0) return;
  g_overflow_seq.fetch_add(1, std::memory_order_release);
  RawFutex(&g_overflow_seq, FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr,
           0);
}

// After an unpark's bucket section (ordered after its lock's acquisition,
// so after the arm of any sleeper that validated before it): one relaxed
// load of a line no one writes while no task is without a record.
inline void WakeOverflowSleepers() {
  if (__builtin_expect(
          g_overflow_armed.load(std::memory_order_relaxed) != 0, 0)) {
    WakeOverflowSleepersSlow();
  }
}

// Unlinks every waiter on `key` for which `take(r, &stop)` returns true
// (scanning in queue order, highest priority first and FIFO among equals
// (Bucket::Enqueue), stopping when it sets *stop) into a chain linked
// through `next`, in that order, and returns the chain head. With `claim`
// (the chain is to be woken, perhaps handed a resource), each waiter is
// claimed before `take` sees it. A waiter that a signal handler runs on
// (kParkerAway) is never offered to `take`: it may never come back to its
// wait, so it is unlinked and released at once with the default token
// into `wakes`, and the scan goes on to the next waiter.
template <typename Take>
Waiter* TakeWaiters(Bucket* b, uintptr_t key, bool claim, Take take,
                    size_t* count, WakeList* wakes)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(b->lock) {
  Waiter* chain_head = nullptr;
  Waiter* chain_tail = nullptr;
  Waiter* prev = nullptr;
  Waiter* w = b->head;
  while (w != nullptr) {
    Waiter* next = w->next;
    if (w->current_key() != key) {
      prev = w;
      w = next;
      continue;
    }
    ParkRecord* r = RecordOf(w);
    if (__builtin_expect(IsGuestRecord(r), 0)) {
      wakes->NoteGuest();
      if (GuestTaskDied(r)) {
        // Its task was killed while it waited: the kernel drops a dead
        // task from its futex queues, and so does this. The record, off
        // every queue now, waits for a claimer to reclaim it
        // (ReclaimDeadGuest).
        b->Remove(w, prev);
        r->parker.store(0, std::memory_order_relaxed);
        w = next;
        continue;
      }
    }
    const bool away =
        claim ? !ClaimParker(r)
              : (r->parker.load(std::memory_order_relaxed) & kParkerAway) != 0;
    if (away) {
      b->Remove(w, prev);
      wakes->Release(r, kDefaultUnparkToken);
      w = next;
      continue;
    }
    bool stop = false;
    if (take(r, &stop)) {
      b->Remove(w, prev);
      if (chain_tail == nullptr) {
        chain_head = w;
      } else {
        chain_tail->next = w;
      }
      chain_tail = w;
      ++*count;
      w = next;
      if (stop) break;
      continue;
    }
    if (claim) r->parker.fetch_and(~kParkerClaimed, std::memory_order_relaxed);
    if (stop) break;
    prev = w;
    w = next;
  }
  return chain_head;
}

// The wake tree's shape (measured: docs/investigations/multi_wake.md).
// Up to kWakeSerialMax threads (parking_lot.h), the unparker wakes each
// itself: a tree's extra hops cost the last waiter more than the serial
// wakes do. Above it, the unparker wakes kWakeRoots threads, and every
// woken thread wakes up to kWakeFanout more (ParkRecord::wake_duty) before
// it returns from its park.
constexpr size_t kWakeRoots = 2;

// Releases the `count` threads of `chain` with `token`, under the bucket
// lock, as one wake tree (docs/design.md section 3.3). The chain, in queue
// order, is the pre-order walk of a forest of up to kWakeRoots trees in
// which every node has up to kWakeFanout children and subtrees are as equal
// as can be. The walk keeps the path from the root to the current node on a
// stack (nodes not yet released) and releases a node only once its whole
// subtree is released, leaves first:
//   - a released child that was asleep is written into its parent's wake
//     duty (the parent is not yet released, so its record is still ours);
//   - a released root that was asleep goes into `wakes`, which the unparker
//     flushes after unlocking;
//   - a node's duty is complete before its own release publishes it, and
//     every thread it names is released before the node can run it.
// So no record is touched after its release (invariant 2: only the parker
// word's address survives, for a FUTEX_WAKE), every release still happens
// under the bucket lock in one hold (invariant 1, timeouts: a waiter that
// times out after being dequeued finds itself released, as before), and
// the unparker makes at most kWakeRoots wake calls for any count above
// kWakeSerialMax. Up to kWakeSerialMax, the unparker releases and wakes
// each thread itself, as before the tree.
void ReleaseChain(Waiter* chain, size_t count, UnparkToken token,
                  WakeList* wakes) {
  // A guest record's task may be killed between its release and its wake
  // duty, stranding the threads the duty names: with one in the chain,
  // the unparker wakes every thread itself.
  if (count <= kWakeSerialMax || wakes->saw_guest()) {
    while (chain != nullptr) {
      // Once released the thread may park again and reuse `next`.
      Waiter* next = chain->next;
      wakes->Release(RecordOf(chain), token);
      chain = next;
    }
    return;
  }
  // 16 bytes a frame, 384 in all: this may run on a signal handler's
  // stack (sem_post, a served FUTEX_WAKE).
  struct Frame {
    ParkRecord* r;   // nullptr: the unparker, parent of the roots
    uint32_t left;   // nodes of the subtree still to visit, below r
    uint16_t parts;  // children still to visit
    uint16_t duty;   // wake duty entries written so far
  };
  // Balanced subtrees: depth <= 1 + log2(count), and count is bounded by
  // the live threads (each waiter is one; < 2^20 registered at once), so 24
  // levels always suffice; deeper would be handled below anyway.
  constexpr size_t kMaxDepth = 24;
  static_assert(sizeof(Frame) == 16, "keep the stack small");
  Frame stack[kMaxDepth];
  size_t depth = 0;
  stack[depth++] = {nullptr, static_cast<uint32_t>(count), kWakeRoots, 0};
  Waiter* w = chain;
  while (depth > 0) {
    Frame& top = stack[depth - 1];
    if (top.left == 0) {
      --depth;
      ParkRecord* r = top.r;
      if (r == nullptr) break;  // the unparker's frame: all released
      r->wake_duty_count.store(top.duty, std::memory_order_relaxed);
      if (!ReleaseParker(r, token)) continue;  // not asleep: no wake due
      Frame& parent = stack[depth - 1];
      if (parent.r == nullptr) {
        wakes->Add(r);
      } else {
        parent.r->wake_duty[parent.duty++].store(&r->parker,
                                                 std::memory_order_relaxed);
      }
      continue;
    }
    const uint32_t size = (top.left + top.parts - 1) / top.parts;
    top.left -= size;
    --top.parts;
    if (depth == kMaxDepth) {
      // Out of stack: the unparker wakes this subtree itself.
      for (uint32_t i = 0; i < size; ++i) {
        Waiter* next = w->next;
        wakes->Release(RecordOf(w), token);
        w = next;
      }
      continue;
    }
    ParkRecord* r = RecordOf(w);
    // Read before r's release (which comes after its subtree's).
    w = w->next;
    const uint32_t below = size - 1;
    stack[depth++] = {
        r, below,
        static_cast<uint16_t>(below < kWakeFanout ? below : kWakeFanout), 0};
  }
}

// Unlinks up to `limit` (>= 1) waiters on `key` whose park token shares a
// bit with `token_mask` (any waiter for kAnyParkToken), in queue order, as
// TakeWaiters.
Waiter* TakeUpTo(Bucket* b, uintptr_t key, bool claim, size_t limit,
                 ParkToken token_mask, size_t* count, WakeList* wakes)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(b->lock) {
  size_t taken = 0;
  return TakeWaiters(
      b, key, claim,
      [&taken, limit, token_mask](ParkRecord* r, bool* stop) {
        if (token_mask != kAnyParkToken && (r->park_token & token_mask) == 0) {
          return false;
        }
        if (++taken >= limit) *stop = true;
        return true;
      },
      count, wakes);
}

// Unlinks up to `limit` (>= 1) waiters on `key`, in queue order, whatever
// their park tokens, claimed for a wake-up (TakeWaiters): the first
// waiters, as every unpark but UnparkFilter and UnparkUpTo takes them.
Waiter* TakeFirst(Bucket* b, uintptr_t key, size_t limit, size_t* count,
                  WakeList* wakes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(b->lock) {
  return TakeUpTo(b, key, /*claim=*/true, limit, kAnyParkToken, count, wakes);
}

// Moves up to `limit` (>= 1) waiters on `from` (in `bf`) to `to`'s queue in
// `bt`, in queue order, each by its priority behind those of its priority
// already there, counting them into `*count`. They
// stay parked: only their key and queue change. Away waiters met on the way
// are released into `wakes` (TakeWaiters).
void RequeueFirst(Bucket* bf, uintptr_t from, Bucket* bt, uintptr_t to,
                  size_t limit, size_t* count, WakeList* wakes,
                  bool retag = false)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(bf->lock, bt->lock) {
  Waiter* chain = TakeUpTo(bf, from, /*claim=*/false, limit, kAnyParkToken,
                           count, wakes);
  while (chain != nullptr) {
    Waiter* next = chain->next;
    if (retag) RecordOf(chain)->park_token = kRequeuedParkToken;
    chain->key.store(to, std::memory_order_relaxed);
    bt->Enqueue(chain);
    chain = next;
  }
}

// Adds `n` to the unparks counted for `self` (nullptr: a thread that has
// not registered, whose unparks go uncounted).
void CountUnparks(ThreadData* self, size_t n) {
  if (self != nullptr) self->counters.Add(self->counters.unparks, n);
}

// The frame of every unpark on one key: pins the table (ReadSection), locks
// `key`'s bucket, runs `body(bucket, &wakes)`, unlocks, and issues the
// FUTEX_WAKEs `body` queued once the bucket's section has closed. Takes a
// bucket lock: callers outside a lock section only. An outer section spans
// the wakes too: the threads `body` took off the queue are woken only here,
// so a signal handler must not run (and leave by siglongjmp) in between; a
// signal that lands there is delivered after the wakes (hash/lock_section.h).
template <typename Body>
void WithBucket(uintptr_t key, Body body) {
  BucketTable& table = GlobalTable();
  SectionScope until_woken(&table);
  WakeList wakes;
  {
    BucketTable::ReadSection rs(table);
    Bucket* b = table.LockBucket(key);
    body(b, &wakes);
    BucketTable::UnlockBucket(b);
  }
  wakes.Flush();
  WakeOverflowSleepers();
}

// WithBucket for two keys: `body(from's bucket, to's bucket, &wakes)` runs
// with both locked (one bucket, locked once, if they share it).
template <typename Body>
void WithBucketPair(uintptr_t from, uintptr_t to, Body body) {
  BucketTable& table = GlobalTable();
  SectionScope until_woken(&table);  // as in WithBucket
  WakeList wakes;
  {
    BucketTable::ReadSection rs(table);
    auto pair = table.LockBucketPair(from, to);
    body(pair.first, pair.second, &wakes);
    BucketTable::UnlockBucketPair(pair);
  }
  wakes.Flush();
  WakeOverflowSleepers();
}

bool Fair(Bucket* b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(b->lock) {
  const int64_t mean = GetConfig().fair_mean_ns;
  // fair_mean_ns 0 means "always fair" (config.h), the first unpark from a
  // bucket included, whose never-armed timer would report false.
  if (mean <= 0) return true;
  return b->FairTimeoutExpired(MonotonicNanos(), mean);
}

// How LeaveQueue ended.
enum class Leave {
  kLeft,           // the thread left its queue; `left_queue` ran
  kUnparkedFirst,  // an unparker had released it: nothing was done
};

// A park ending without an unpark (timeout, signal, cancellation, eviction
// of a record left by siglongjmp): leaves the queue and runs
// `left_queue(current key, was_last_thread)` under the bucket lock, unless
// an unparker released the thread first (it does so under the same bucket
// lock). A requeue may have moved the thread: its current key is the one
// used.
Leave LeaveQueue(ParkRecord* r, BucketTable& table,
                 absl::FunctionRef<void(uintptr_t, bool)> left_queue) {
  BucketTable::ReadSection rs(table);
  Bucket* b = table.LockWaiterBucket(&r->waiter);
  if (r->parker.load(std::memory_order_acquire) == 0) {
    BucketTable::UnlockBucket(b);
    // Released as part of a wake tree: wake this thread's share first.
    RunWakeDuty(r);
    return Leave::kUnparkedFirst;
  }
  const uintptr_t current = r->waiter.current_key();
  // Not queued although not released: an unparker took it off the queue
  // and was killed before it released it (a task on shared TLS:
  // Bucket::RepairAfterDeadHolder). It leaves as if it had been queued.
  b->RemoveIfQueued(&r->waiter);
  r->parker.store(0, std::memory_order_relaxed);
  left_queue(current, !b->HasKey(current, b->head));
  BucketTable::UnlockBucket(b);
  return Leave::kLeft;
}

// Unparks up to `count` threads parked on `key` whose park token matches
// `token_mask` (TakeUpTo), each with `token`; returns how many. Takes a
// bucket lock: callers outside a lock section only.
size_t UnparkMatching(uintptr_t key, size_t count, ParkToken token_mask,
                      UnparkToken token) {
  size_t n = 0;
  WithBucket(key, [&](Bucket* b, WakeList* wakes) {
    Waiter* chain =
        TakeUpTo(b, key, /*claim=*/true, count, token_mask, &n, wakes);
    ReleaseChain(chain, n, token, wakes);
  });
  return n;
}

// Wakes every thread parked anywhere (the deferred-unpark overflow: more
// distinct keys than a thread can hold). Each receives the default token,
// which every primitive takes as a spurious wake-up. A table growth moves
// waiters between indices, so the walk repeats until the size holds still.
void UnparkEveryone() {
  BucketTable& table = GlobalTable();
  for (;;) {
    size_t size = 0;
    for (size_t i = 0;; ++i) {
      SectionScope until_woken(&table);  // as in WithBucket
      WakeList wakes;
      {
        BucketTable::ReadSection rs(table);
        Bucket* b = table.LockBucketAt(i, &size);
        if (b == nullptr) break;
        while (b->head != nullptr) {
          size_t n = 0;
          Waiter* chain =
              TakeFirst(b, b->head->current_key(), SIZE_MAX, &n, &wakes);
          ReleaseChain(chain, n, kDefaultUnparkToken, &wakes);
        }
        BucketTable::UnlockBucket(b);
      }
      wakes.Flush();
    }
    WakeOverflowSleepers();
    if (table.bucket_count() == size) return;
  }
}

// The section-exit hook (SetSectionExitHook): runs the unparks
// that signal handlers deferred while this thread was in a lock section.
// Runs outside any section, so handlers arriving meanwhile do their own
// work instead of deferring; those that interrupt the UnparkUpTo below,
// inside its section, defer again and this hook runs again, nested.
void RunDeferredUnparks() {
  ThreadData* td = &t_data;
  for (DeferredUnpark& d : td->deferred) {
    const uintptr_t key = d.key.load(std::memory_order_relaxed);
    if (key == 0) continue;
    const size_t count = d.count.exchange(0, std::memory_order_relaxed);
    const uintptr_t mask = d.token_mask.exchange(0, std::memory_order_relaxed);
    d.key.store(0, std::memory_order_relaxed);
    UnparkUpTo(key, count, mask);
  }
  if (td->deferred_overflow.exchange(false, std::memory_order_relaxed)) {
    UnparkEveryone();
  }
}

// Queues an unpark for RunDeferredUnparks, merging it with one already
// queued for the same key. Called by a signal handler inside its thread's
// lock section. Every step is a single atomic instruction on the thread's
// own data, so a handler that interrupts this one can queue too.
void DeferUnpark(ThreadData* td, uintptr_t key, size_t count,
                 ParkToken token_mask) {
  for (DeferredUnpark& d : td->deferred) {
    uintptr_t k = d.key.load(std::memory_order_relaxed);
    if (k == 0 && !d.key.compare_exchange_strong(k, key,
                                                 std::memory_order_relaxed)) {
      // A nested handler took the slot first; k is its key.
    } else if (k == 0) {
      k = key;
    }
    if (k != key) continue;
    // Saturating: a wake of "all" is SIZE_MAX.
    size_t c = d.count.load(std::memory_order_relaxed);
    while (!d.count.compare_exchange_weak(
        c, c > SIZE_MAX - count ? SIZE_MAX : c + count,
        std::memory_order_relaxed)) {
    }
    d.token_mask.fetch_or(token_mask, std::memory_order_relaxed);
    RequestSectionExitHook();
    return;
  }
  td->deferred_overflow.store(true, std::memory_order_relaxed);
  RequestSectionExitHook();
}

}  // namespace

bool EvictQueuedOwnRecord(ParkRecord* r) {
  BucketTable& table = GlobalTable();
  if (LeaveQueue(r, table, [](uintptr_t, bool) {}) == Leave::kUnparkedFirst) {
    return false;
  }
  r->unpark_token = kDefaultUnparkToken;
  return true;
}

void InstallDeferredUnparkRunner() {
  SetSectionExitHook(&RunDeferredUnparks);
}

namespace {

// Park on `td`'s record: the calling thread's own, or a guest record's
// (NoteTlsSharingTask).
ParkResult ParkOn(ThreadData* td, uintptr_t key,
                  absl::FunctionRef<bool()> validate,
                  absl::FunctionRef<void()> before_sleep,
                  absl::FunctionRef<void(uintptr_t, bool)> left_queue,
                  ParkToken park_token, Deadline deadline) {
  BucketTable& table = GlobalTable();
  ParkRecord* const r = td->Record();
  // Still queued: either a wait this thread left by siglongjmp, or the
  // wait of the code a signal handler interrupted (which this Park, run
  // from that handler, turns into a spurious wake-up). The token that code
  // will read is restored on the way out (RestoreToken).
  EvictOwnRecord(r);
  struct RestoreToken {
    ParkRecord* r;
    UnparkToken token;
    ~RestoreToken() { r->unpark_token = token; }
  } restore_token{r, r->unpark_token};
  // Outside the bucket lock: in a process that uses real-time scheduling
  // it may ask the kernel (docs/design.md section 3.15).
  const uint8_t priority = QueuePriority(td);
  {
    BucketTable::ReadSection rs(table);
    Bucket* b = table.LockBucket(key);
    if (!validate()) {
      BucketTable::UnlockBucket(b);
      td->counters.Bump(td->counters.invalid);
      return {ParkResult::kInvalid, 0};
    }
    r->waiter.key.store(key, std::memory_order_relaxed);
    r->waiter.priority = priority;
    r->park_token = park_token;
    r->parker.store(kParkerQueued, std::memory_order_relaxed);
    b->Enqueue(&r->waiter);
    BucketTable::UnlockBucket(b);
  }
  td->parked_since_ns = ClockNanos(CLOCK_REALTIME_COARSE);
  before_sleep();
  td->counters.Bump(td->counters.parks);
  registry::SetState(td, ThreadState::kParked);
  // Runs only if thread cancellation unwinds the sleep (CancellationPoint).
  struct UnwindGuard {
    ThreadData* td;
    ParkRecord* r;
    BucketTable& table;
    absl::FunctionRef<void(uintptr_t, bool)> left_queue;
    bool armed = true;
    ~UnwindGuard() {
      if (!armed) return;
      registry::SetState(td, ThreadState::kRunning);
      td->unwound_unparked =
          LeaveQueue(r, table, left_queue) == Leave::kUnparkedFirst;
      td->unwound_token = r->unpark_token;
    }
  } guard{td, r, table, left_queue};
  const bool released = SleepOnParker(td, r, deadline);
  guard.armed = false;
  registry::SetState(td, ThreadState::kRunning);
  if (released) {
    return {ParkResult::kUnparked, r->unpark_token, r->park_token};
  }

  // Timed out (or interrupted): leave the queue unless an unparker dequeued
  // us meanwhile (it releases the parker under the same bucket lock). A
  // requeue may have moved us to another key: the callback is told the
  // current one.
  const bool interrupted = td->interrupted;
  if (LeaveQueue(r, table, left_queue) == Leave::kUnparkedFirst) {
    return {ParkResult::kUnparked, r->unpark_token, r->park_token};
  }
  if (interrupted) return {ParkResult::kInterrupted, 0};
  td->counters.Bump(td->counters.timeouts);
  return {ParkResult::kTimedOut, 0};
}

// A guest record for task `tid` that a task which died holding it left:
// taken off its queue, if an unparker has not done so (TakeWaiters), under
// its bucket's lock, where the claim is made too, so that no unparker
// hands the record anything meanwhile. nullptr if none.
ThreadData* ReclaimDeadGuest(int32_t tid) {
  GuestSlots& guests = GuestRecords();
  BucketTable& table = GlobalTable();
  for (size_t i = 0; i < kGuestRecords; ++i) {
    std::atomic<int32_t>& word = guests.KeyAt(i);
    if ((word.load(std::memory_order_relaxed) & FUTEX_OWNER_DIED) == 0) {
      continue;
    }
    ThreadData* td = &guests.At(i);
    ParkRecord* r = td->Record();
    bool won = false;
    {
      BucketTable::ReadSection rs(table);
      Bucket* b = table.LockWaiterBucket(&r->waiter);
      int32_t dead = word.load(std::memory_order_acquire);
      won = (dead & FUTEX_OWNER_DIED) != 0 &&
            word.compare_exchange_strong(dead, tid, std::memory_order_acquire);
      // Its task may have died after marking the record queued and before
      // linking it, or while an unparker that unlinked it was killed too.
      if (won && r->parker.load(std::memory_order_relaxed) != 0) {
        b->RemoveIfQueued(&r->waiter);
      }
      BucketTable::UnlockBucket(b);
    }
    if (!won) continue;
    // A record released as its task died may carry a wake duty (none is
    // given to guest records, ReleaseChain; a FUTEX_WAKE too many is
    // harmless): run it rather than drop it.
    RunWakeDuty(r);
    new (td) ThreadData();
    return td;
  }
  return nullptr;
}

// The record task `tid` parks on: its own (kept by a park it left by
// siglongjmp), a free one, or one a dead task left; then watched for the
// task's death. nullptr when all are held by live tasks.
ThreadData* AcquireGuestData(int32_t tid) {
  GuestSlots& guests = GuestRecords();
  ThreadData* td = guests.FindOrClaim(tid);
  if (td == nullptr) td = ReclaimDeadGuest(tid);
  if (td != nullptr) WatchGuestLife(guests.IndexOf(td));
  return td;
}

// Park for a task on shared TLS that got no guest record: every record is
// held by a live task, perhaps one waiting for this one. It must not wait
// for a record (docs/design.md section 2.11): it validates as a park
// would, then sleeps in the kernel on g_overflow_seq, which every unpark
// bumps while such a sleeper is armed. It is in no queue, so an unpark
// meant for it ends its sleep as a spurious wake-up (the default token, as
// UnparkEveryone gives), after which the caller re-checks its word; a
// timeout or an interruption calls left_queue as a queued waiter's would.
ParkResult ParkWithoutRecord(uintptr_t key, absl::FunctionRef<bool()> validate,
                             absl::FunctionRef<void()> before_sleep,
                             absl::FunctionRef<void(uintptr_t, bool)> left_queue,
                             ParkToken park_token, Deadline deadline,
                             bool interruptible) {
  BucketTable& table = GlobalTable();
  const uint32_t seq = g_overflow_seq.load(std::memory_order_acquire);
  g_overflow_armed.store(1, std::memory_order_seq_cst);
  {
    BucketTable::ReadSection rs(table);
    Bucket* b = table.LockBucket(key);
    const bool valid = validate();
    BucketTable::UnlockBucket(b);
    if (!valid) return {ParkResult::kInvalid, 0};
  }
  before_sleep();
  struct timespec ts;
  int op;
  const struct timespec* tsp = deadline.FutexWait(&ts, &op);
  const long rc = RawFutex(&g_overflow_seq, op, seq, tsp, nullptr,
                           FUTEX_BITSET_MATCH_ANY);
  if (rc == -ETIMEDOUT || (rc == -EINTR && interruptible)) {
    {
      BucketTable::ReadSection rs(table);
      Bucket* b = table.LockBucket(key);
      left_queue(key, !b->HasKey(key, b->head));
      BucketTable::UnlockBucket(b);
    }
    return {rc == -ETIMEDOUT ? ParkResult::kTimedOut : ParkResult::kInterrupted,
            0};
  }
  return {ParkResult::kUnparked, kDefaultUnparkToken, park_token};
}

// Park for a task on another task's TLS (NoteTlsSharingTask): never on the
// owner's record, which the owner may be parked on this moment, and
// without registering the owner's TLS (the owner's state is the owner's
// to write).
ParkResult ParkForeign(int32_t tid, uintptr_t key,
                       absl::FunctionRef<bool()> validate,
                       absl::FunctionRef<void()> before_sleep,
                       absl::FunctionRef<void(uintptr_t, bool)> left_queue,
                       ParkToken park_token, Deadline deadline) {
  GlobalTable();
  const bool interruptible = t_data.interruptible != 0;
  ThreadData* guest = AcquireGuestData(tid);
  if (guest == nullptr) {
    return ParkWithoutRecord(key, validate, before_sleep, left_queue,
                             park_token, deadline, interruptible);
  }
  // (ParkOn evicts the guest record if a park this task left by siglongjmp
  // kept it queued.)
  guest->interruptible = interruptible ? 1 : 0;
  const ParkResult r = ParkOn(guest, key, validate, before_sleep, left_queue,
                              park_token, deadline);
  ReleaseGuestData(guest, tid);
  return r;
}

}  // namespace

ParkResult Park(uintptr_t key, absl::FunctionRef<bool()> validate,
                absl::FunctionRef<void()> before_sleep,
                absl::FunctionRef<void(uintptr_t, bool)> left_queue,
                ParkToken park_token, Deadline deadline) {
  if (__builtin_expect(TlsMayBeShared(), 0)) {
    if (const int32_t tid = ForeignTaskId(); tid != 0) {
      return ParkForeign(tid, key, validate, before_sleep, left_queue,
                         park_token, deadline);
    }
  }
  ThreadData* td = CurrentThreadData();
  return ParkOn(td, key, validate, before_sleep, left_queue, park_token,
                deadline);
}

CancellationPoint::CancellationPoint() { ++CurrentThreadData()->cancellation_point; }
CancellationPoint::~CancellationPoint() { --CurrentThreadData()->cancellation_point; }

InterruptiblePark::InterruptiblePark() { ++CurrentThreadData()->interruptible; }
InterruptiblePark::~InterruptiblePark() { --CurrentThreadData()->interruptible; }

ParkResult Park(uintptr_t key, absl::FunctionRef<bool()> validate) {
  return Park(
      key, validate, [] {}, [](uintptr_t, bool) {}, kDefaultParkToken,
      Deadline::Never());
}

UnparkResult UnparkOne(uintptr_t key,
                       absl::FunctionRef<UnparkToken(UnparkResult)> callback) {
  // Registered before any bucket is locked: a registration may grow the
  // table, which no thread may do inside a ReadSection.
  ThreadData* self = CurrentThreadData();
  UnparkResult result;
  WithBucket(key, [&](Bucket* b, WakeList* wakes) {
    Waiter* w = TakeFirst(b, key, 1, &result.unparked_threads, wakes);
    if (w != nullptr) {
      result.have_more_threads = b->HasKey(key, b->head);
      result.be_fair = Fair(b);
    }
    const UnparkToken token = callback(result);
    if (w != nullptr) wakes->Release(RecordOf(w), token);
  });
  CountUnparks(self, result.unparked_threads);
  return result;
}

size_t UnparkAll(uintptr_t key, UnparkToken token) {
  ThreadData* self = CurrentThreadData();
  const size_t n = UnparkMatching(key, SIZE_MAX, kAnyParkToken, token);
  CountUnparks(self, n);
  return n;
}

size_t UnparkUpTo(uintptr_t key, size_t count, ParkToken token_mask) {
  if (count == 0 || !LotInitialized()) return 0;
  if (InLockSection()) {
    DeferUnpark(&t_data, key, count, token_mask);
    return 0;
  }
  // Never registers (not async-signal-safe): an unregistered thread pins
  // the table (ReadSection) and its wakes go uncounted. Leaves the
  // caller's own record alone: this also runs from a section's end inside
  // Park, between queueing and sleeping (and an away record of its own,
  // met below, is evicted like any other).
  const size_t n =
      UnparkMatching(key, count, token_mask, kDefaultUnparkToken);
  CountUnparks(CurrentThreadDataIfAny(), n);
  return n;
}

bool OnlyUnparkUpToIsSafe() {
  return CurrentThreadDataIfAny() == nullptr || InLockSection();
}

namespace {

// Threads parked on `key` in `b`, counted up to `limit`.
size_t CountParked(const Bucket* b, uintptr_t key, size_t limit)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(b->lock) {
  size_t n = 0;
  for (const Waiter* w = b->head; w != nullptr && n < limit; w = w->next) {
    if (w->current_key() == key) ++n;
  }
  return n;
}

// UnparkRequeue with `validate(parked)`; `count` says whether to count.
UnparkResult RequeueWith(
    uintptr_t from, uintptr_t to, bool count,
    absl::FunctionRef<RequeueOp(size_t)> validate,
    absl::FunctionRef<UnparkToken(RequeueOp, UnparkResult)> callback) {
  // Registered before any bucket is locked: a registration may grow the
  // table, which no thread may do inside a ReadSection.
  ThreadData* self = CurrentThreadData();
  UnparkResult result;
  WithBucketPair(from, to, [&](Bucket* bf, Bucket* bt, WakeList* wakes) {
    const RequeueOp op =
        validate(count ? CountParked(bf, from, kWakeTreeMin) : 0);
    if (op == RequeueOp::kAbort) return;
    if (op == RequeueOp::kUnparkAll) {
      Waiter* chain =
          TakeFirst(bf, from, SIZE_MAX, &result.unparked_threads, wakes);
      result.have_more_threads = false;
      const UnparkToken token = callback(op, result);
      ReleaseChain(chain, result.unparked_threads, token, wakes);
      return;
    }
    Waiter* wake = nullptr;
    if (op == RequeueOp::kUnparkOne || op == RequeueOp::kUnparkOneRequeueRest) {
      wake = TakeFirst(bf, from, 1, &result.unparked_threads, wakes);
    }
    if (op == RequeueOp::kRequeueOne || op == RequeueOp::kRequeueAll ||
        op == RequeueOp::kUnparkOneRequeueRest ||
        op == RequeueOp::kRequeueAllRetagged) {
      const size_t limit = op == RequeueOp::kRequeueOne ? 1 : SIZE_MAX;
      RequeueFirst(bf, from, bt, to, limit, &result.requeued_threads, wakes,
                   op == RequeueOp::kRequeueAllRetagged);
    }
    result.have_more_threads = bf->HasKey(from, bf->head);
    if (wake != nullptr) result.be_fair = Fair(bf);
    const UnparkToken token = callback(op, result);
    if (wake != nullptr) wakes->Release(RecordOf(wake), token);
  });
  CountUnparks(self, result.unparked_threads);
  return result;
}

}  // namespace

UnparkResult UnparkRequeue(
    uintptr_t from, uintptr_t to, absl::FunctionRef<RequeueOp()> validate,
    absl::FunctionRef<UnparkToken(RequeueOp, UnparkResult)> callback) {
  return RequeueWith(
      from, to, /*count=*/false, [&validate](size_t) { return validate(); },
      callback);
}

UnparkResult UnparkRequeueCounted(
    uintptr_t from, uintptr_t to,
    absl::FunctionRef<RequeueOp(size_t parked)> validate,
    absl::FunctionRef<UnparkToken(RequeueOp, UnparkResult)> callback) {
  return RequeueWith(from, to, /*count=*/true, validate, callback);
}

UnparkResult UnparkFilter(
    uintptr_t key, absl::FunctionRef<FilterOp(ParkToken)> filter,
    absl::FunctionRef<UnparkToken(UnparkResult)> callback) {
  // Registered before any bucket is locked: a registration may grow the
  // table, which no thread may do inside a ReadSection.
  ThreadData* self = CurrentThreadData();
  UnparkResult result;
  WithBucket(key, [&](Bucket* b, WakeList* wakes) {
    Waiter* chain = TakeWaiters(
        b, key, /*claim=*/true,
        [&](ParkRecord* r, bool* stop) {
          switch (filter(r->park_token)) {
            case FilterOp::kUnpark:
              return true;
            case FilterOp::kSkip:
              return false;
            case FilterOp::kStop:
              break;
          }
          *stop = true;
          return false;
        },
        &result.unparked_threads, wakes);
    result.have_more_threads = b->HasKey(key, b->head);
    if (result.unparked_threads != 0) result.be_fair = Fair(b);
    const UnparkToken token = callback(result);
    ReleaseChain(chain, result.unparked_threads, token, wakes);
  });
  CountUnparks(self, result.unparked_threads);
  return result;
}

PairResult UnparkPair(uintptr_t from, uintptr_t to,
                      absl::FunctionRef<bool(PairPlan*)> plan,
                      UnparkToken token) {
  // Registered before any bucket is locked: a registration may grow the
  // table, which no thread may do inside a ReadSection.
  ThreadData* self = CurrentThreadData();
  PairResult result;
  WithBucketPair(from, to, [&](Bucket* bf, Bucket* bt, WakeList* wakes) {
    PairPlan p;
    if (!plan(&p)) {
      result.aborted = true;
      return;
    }
    Waiter* woken_from = nullptr;
    if (p.unpark_from != 0) {
      woken_from = TakeFirst(bf, from, p.unpark_from, &result.unparked_from,
                             wakes);
    }
    if (p.requeue != 0) {
      RequeueFirst(bf, from, bt, to, p.requeue, &result.requeued, wakes);
    }
    Waiter* woken_to = nullptr;
    if (p.unpark_to != 0) {
      woken_to = TakeFirst(bt, to, p.unpark_to, &result.unparked_to, wakes);
    }
    ReleaseChain(woken_from, result.unparked_from, token, wakes);
    ReleaseChain(woken_to, result.unparked_to, token, wakes);
  });
  CountUnparks(self, result.unparked_from + result.unparked_to);
  return result;
}

namespace {
// The queue record of the task a handler runs on: a task on another task's
// TLS has the guest record it holds (nullptr: it is in no wait), never the
// TLS owner's, which may be queued in a wait of its own that the handler
// must not mark, and whose wake duty is the owner's to run.
ParkRecord* HandlerTaskRecord() {
  if (__builtin_expect(TlsMayBeShared(), 0)) {
    if (const int32_t tid = ForeignTaskId(); tid != 0) {
      ThreadData* guest = FindGuestData(tid);
      return guest != nullptr ? guest->Record() : nullptr;
    }
  }
  return t_registered ? t_data.Record() : nullptr;
}
}  // namespace

namespace {
// Spins on a claimed record before EnterSignalHandler asks whether its
// claimer is gone (about a millisecond: a claim lasts a few instructions).
constexpr uint32_t kStaleClaimCheck = 1 << 14;

// A claim is made and ended under the record's bucket lock, so one still
// set once that lock is held belongs to an unparker that was killed
// holding it (a task on shared TLS, whose lock the next locker took over:
// BucketLock::Lock). Clears it, so that the handler can mark the record.
// Not from inside a lock section (the lock may be this task's own).
void ClearStaleClaim(ParkRecord* r) {
  if (InLockSection()) return;
  BucketTable& table = GlobalTable();
  SectionScope section(&table);
  BucketTable::ReadSection rs(table);
  Bucket* b = table.LockWaiterBucket(&r->waiter);
  r->parker.fetch_and(~kParkerClaimed, std::memory_order_relaxed);
  BucketTable::UnlockBucket(b);
}
}  // namespace

void EnterSignalHandler(SignalHandlerScope* scope) {
  scope->marked = nullptr;
  ParkRecord* r = HandlerTaskRecord();
  if (r == nullptr) return;
  uint32_t spins = 0;
  std::atomic<uint32_t>& parker = r->parker;
  uint32_t v = parker.load(std::memory_order_acquire);
  for (;;) {
    // Not queued, or already marked by the handler this one interrupted.
    if ((v & kParkerQueued) == 0 || (v & kParkerAway) != 0) {
      // Released (perhaps just now, while this waited out a claim) with a
      // wake duty not yet run, or run halfway: run it before the program's
      // handler, which may leave by siglongjmp and never come back to it.
      RunWakeDuty(r);
      return;
    }
    if ((v & kParkerClaimed) != 0) {
      // An unparker on another thread is releasing us under its bucket
      // lock, now: wait the few instructions it needs.
      CpuRelax();
      if (++spins % kStaleClaimCheck == 0) ClearStaleClaim(r);
      v = parker.load(std::memory_order_acquire);
      continue;
    }
    if (parker.compare_exchange_weak(v, v | kParkerAway,
                                     std::memory_order_acq_rel,
                                     std::memory_order_acquire)) {
      scope->marked = r;
      return;
    }
  }
}

void LeaveSignalHandler(const SignalHandlerScope& scope) {
  if (scope.marked == nullptr) return;
  std::atomic<uint32_t>& parker = scope.marked->parker;
  uint32_t v = parker.load(std::memory_order_relaxed);
  // Evicted meanwhile (0, or queued afresh by a Park in the handler, which
  // evicted the record first): nothing of ours is left to clear.
  while ((v & kParkerAway) != 0 &&
         !parker.compare_exchange_weak(v, v & ~kParkerAway,
                                       std::memory_order_acq_rel,
                                       std::memory_order_relaxed)) {
  }
}

}  // namespace parklot::internal
