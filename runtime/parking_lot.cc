#include "runtime/parking_lot.h"

#include <cstddef>

#include "hash/bucket_table.h"
#include "runtime/config.h"
#include "runtime/thread_data.h"

namespace parklot {
namespace {

ThreadData* DataOf(Waiter* w) {
  static_assert(offsetof(ThreadData, waiter) == 0, "Waiter leads ThreadData");
  return reinterpret_cast<ThreadData*>(w);
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

  // Releases `td` with `token`. `td` must be off every queue.
  void Release(ThreadData* td, UnparkToken token) {
    if (!ReleaseParker(td, token)) return;
    if (n_ == kCapacity) Flush();
    pending_[n_++] = td;
  }
  void Flush() {
    for (size_t i = 0; i < n_; ++i) WakeParker(pending_[i]);
    n_ = 0;
  }

 private:
  static constexpr size_t kCapacity = 32;
  ThreadData* pending_[kCapacity];
  size_t n_ = 0;
};

// Unlinks every waiter on `key` for which `take(td, &stop)` returns true
// (scanning in FIFO order, stopping when it sets *stop) into a chain linked
// through `next`, in FIFO order, and returns the chain head. With `claim`
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
    ThreadData* td = DataOf(w);
    const bool away =
        claim ? !ClaimParker(td)
              : (td->parker.load(std::memory_order_relaxed) & kParkerAway) != 0;
    if (away) {
      b->Remove(w, prev);
      wakes->Release(td, kDefaultUnparkToken);
      w = next;
      continue;
    }
    bool stop = false;
    if (take(td, &stop)) {
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
    if (claim) td->parker.fetch_and(~kParkerClaimed, std::memory_order_relaxed);
    if (stop) break;
    prev = w;
    w = next;
  }
  return chain_head;
}

// Moves every thread in `chain` to `to`'s queue in `bt`, in order. They
// stay parked: only their key and queue change.
void MoveChain(Waiter* chain, uintptr_t to, Bucket* bt)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(bt->lock) {
  while (chain != nullptr) {
    Waiter* next = chain->next;
    chain->key.store(to, std::memory_order_relaxed);
    bt->Enqueue(chain);
    chain = next;
  }
}

// Releases every thread in `chain` with `token`.
void ReleaseChain(Waiter* chain, UnparkToken token, WakeList* wakes) {
  while (chain != nullptr) {
    // Once released the thread may park again and reuse `next`.
    Waiter* next = chain->next;
    wakes->Release(DataOf(chain), token);
    chain = next;
  }
}

// Unlinks up to `limit` (>= 1) waiters on `key` whose park token shares a
// bit with `token_mask` (any waiter for kAnyParkToken), FIFO, as
// TakeWaiters.
Waiter* TakeUpTo(Bucket* b, uintptr_t key, bool claim, size_t limit,
                 ParkToken token_mask, size_t* count, WakeList* wakes)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(b->lock) {
  size_t taken = 0;
  return TakeWaiters(
      b, key, claim,
      [&taken, limit, token_mask](ThreadData* td, bool* stop) {
        if (token_mask != kAnyParkToken && (td->park_token & token_mask) == 0) {
          return false;
        }
        if (++taken >= limit) *stop = true;
        return true;
      },
      count, wakes);
}

bool Fair(Bucket* b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(b->lock) {
  const int64_t mean = GetConfig().fair_mean_ns;
  // fair_mean_ns 0 means "always fair" (config.h), the first unpark from a
  // bucket included, whose never-armed timer would report false.
  if (mean <= 0) return true;
  return b->FairTimeoutExpired(MonotonicNanos(), mean);
}

// A park ending without an unpark (timeout, signal, cancellation): leaves
// the queue and runs `timed_out(current key, was_last_thread)` under the
// bucket lock. Returns false, leaving the queue alone, if an unparker
// released the thread first (it does so under the same bucket lock). A
// requeue may have moved the thread: its current key is the one used.
bool LeaveQueue(ThreadData* td, BucketTable& table,
                absl::FunctionRef<void(uintptr_t, bool)> timed_out) {
  BucketTable::ReadSection rs(table);
  Bucket* b = table.LockWaiterBucket(&td->waiter);
  if (td->parker.load(std::memory_order_acquire) == 0) {
    BucketTable::UnlockBucket(b);
    return false;
  }
  const uintptr_t current = td->waiter.current_key();
  Waiter* prev = nullptr;
  for (Waiter* w = b->head; w != &td->waiter; w = w->next) prev = w;
  b->Remove(&td->waiter, prev);
  td->parker.store(0, std::memory_order_relaxed);
  timed_out(current, !b->HasKey(current, b->head));
  BucketTable::UnlockBucket(b);
  return true;
}

// Unparks up to `count` threads parked on `key` whose park token matches
// `token_mask` (TakeUpTo), each with `token`; returns how many. Takes a
// bucket lock: callers outside a lock section only.
size_t UnparkMatching(uintptr_t key, size_t count, ParkToken token_mask,
                      UnparkToken token) {
  BucketTable& table = GlobalTable();
  WakeList wakes;
  size_t n = 0;
  {
    BucketTable::ReadSection rs(table);
    Bucket* b = table.LockBucket(key);
    ReleaseChain(TakeUpTo(b, key, /*claim=*/true, count, token_mask, &n,
                          &wakes),
                 token, &wakes);
    BucketTable::UnlockBucket(b);
  }
  wakes.Flush();
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
      WakeList wakes;
      {
        BucketTable::ReadSection rs(table);
        Bucket* b = table.LockBucketAt(i, &size);
        if (b == nullptr) break;
        while (b->head != nullptr) {
          size_t n = 0;
          ReleaseChain(TakeUpTo(b, b->head->current_key(), /*claim=*/true,
                                SIZE_MAX, kAnyParkToken, &n, &wakes),
                       kDefaultUnparkToken, &wakes);
        }
        BucketTable::UnlockBucket(b);
      }
      wakes.Flush();
    }
    if (table.bucket_count() == size) return;
  }
}

// The section-exit hook (BucketTable::SetSectionExitHook): runs the unparks
// that signal handlers deferred while this thread was in a lock section.
// Runs outside any section, so handlers arriving meanwhile do their own
// work instead of deferring; those that interrupt the UnparkUpTo below,
// inside its section, defer again and this hook runs again, nested.
void RunDeferredUnparks() {
  ThreadData* td = &internal::t_data;
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
    BucketTable::RequestSectionExitHook();
    return;
  }
  td->deferred_overflow.store(true, std::memory_order_relaxed);
  BucketTable::RequestSectionExitHook();
}

}  // namespace

bool internal::EvictOwnRecord(ThreadData* td) {
  if (td->parker.load(std::memory_order_acquire) == 0) return false;
  BucketTable& table = GlobalTable();
  if (!LeaveQueue(td, table, [](uintptr_t, bool) {})) return false;
  td->unpark_token = kDefaultUnparkToken;
  return true;
}

void internal::InstallDeferredUnparkRunner() {
  BucketTable::SetSectionExitHook(&RunDeferredUnparks);
}

ParkResult Park(uintptr_t key, absl::FunctionRef<bool()> validate,
                absl::FunctionRef<void()> before_sleep,
                absl::FunctionRef<void(uintptr_t, bool)> timed_out,
                ParkToken park_token, Deadline deadline) {
  ThreadData* td = CurrentThreadData();
  BucketTable& table = GlobalTable();
  // Still queued: either a wait this thread left by siglongjmp, or the
  // wait of the code a signal handler interrupted (which this Park, run
  // from that handler, turns into a spurious wake-up). The token that code
  // will read is restored on the way out (RestoreToken).
  internal::EvictOwnRecord(td);
  struct RestoreToken {
    ThreadData* td;
    UnparkToken token;
    ~RestoreToken() { td->unpark_token = token; }
  } restore_token{td, td->unpark_token};
  {
    BucketTable::ReadSection rs(table);
    Bucket* b = table.LockBucket(key);
    if (!validate()) {
      BucketTable::UnlockBucket(b);
      td->counters.Bump(td->counters.invalid);
      return {ParkResult::kInvalid, 0};
    }
    td->waiter.key.store(key, std::memory_order_relaxed);
    td->park_token = park_token;
    td->parker.store(kParkerQueued, std::memory_order_relaxed);
    b->Enqueue(&td->waiter);
    BucketTable::UnlockBucket(b);
  }
  before_sleep();
  td->counters.Bump(td->counters.parks);
  registry::SetState(td, ThreadState::kParked);
  // Runs only if thread cancellation unwinds the sleep (CancellationPoint).
  struct UnwindGuard {
    ThreadData* td;
    BucketTable& table;
    absl::FunctionRef<void(uintptr_t, bool)> timed_out;
    bool armed = true;
    ~UnwindGuard() {
      if (!armed) return;
      registry::SetState(td, ThreadState::kRunning);
      td->unwound_unparked = !LeaveQueue(td, table, timed_out);
      td->unwound_token = td->unpark_token;
    }
  } guard{td, table, timed_out};
  const bool released = SleepOnParker(td, deadline);
  guard.armed = false;
  registry::SetState(td, ThreadState::kRunning);
  if (released) return {ParkResult::kUnparked, td->unpark_token};

  // Timed out (or interrupted): leave the queue unless an unparker dequeued
  // us meanwhile (it releases the parker under the same bucket lock). A
  // requeue may have moved us to another key: the callback is told the
  // current one.
  const bool interrupted = td->interrupted;
  if (!LeaveQueue(td, table, timed_out)) {
    return {ParkResult::kUnparked, td->unpark_token};
  }
  if (interrupted) return {ParkResult::kInterrupted, 0};
  td->counters.Bump(td->counters.timeouts);
  return {ParkResult::kTimedOut, 0};
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
  // Registering makes the thread an RCU reader (see ReadSection).
  ThreadData* self = CurrentThreadData();
  BucketTable& table = GlobalTable();
  WakeList wakes;
  UnparkResult result;
  {
    BucketTable::ReadSection rs(table);
    Bucket* b = table.LockBucket(key);
    size_t n = 0;
    Waiter* w = TakeUpTo(b, key, /*claim=*/true, 1, kAnyParkToken, &n, &wakes);
    if (w != nullptr) {
      result.unparked_threads = 1;
      result.have_more_threads = b->HasKey(key, b->head);
      result.be_fair = Fair(b);
    }
    const UnparkToken token = callback(result);
    if (w != nullptr) wakes.Release(DataOf(w), token);
    BucketTable::UnlockBucket(b);
  }
  wakes.Flush();
  self->counters.Add(self->counters.unparks, result.unparked_threads);
  return result;
}

size_t UnparkAll(uintptr_t key, UnparkToken token) {
  ThreadData* self = CurrentThreadData();
  const size_t n = UnparkMatching(key, SIZE_MAX, kAnyParkToken, token);
  self->counters.Add(self->counters.unparks, n);
  return n;
}

size_t UnparkUpTo(uintptr_t key, size_t count, ParkToken token_mask) {
  if (count == 0 || !internal::LotInitialized()) return 0;
  if (BucketTable::InLockSection()) {
    DeferUnpark(&internal::t_data, key, count, token_mask);
    return 0;
  }
  // Never registers (not async-signal-safe): an unregistered thread pins
  // the table (ReadSection) and its wakes go uncounted. Leaves the
  // caller's own record alone: this also runs from a section's end inside
  // Park, between queueing and sleeping (and an away record of its own,
  // met below, is evicted like any other).
  const size_t n =
      UnparkMatching(key, count, token_mask, kDefaultUnparkToken);
  if (ThreadData* self = CurrentThreadDataIfAny()) {
    self->counters.Add(self->counters.unparks, n);
  }
  return n;
}

bool OnlyUnparkUpToIsSafe() {
  return CurrentThreadDataIfAny() == nullptr || BucketTable::InLockSection();
}

UnparkResult UnparkRequeue(
    uintptr_t from, uintptr_t to, absl::FunctionRef<RequeueOp()> validate,
    absl::FunctionRef<UnparkToken(RequeueOp, UnparkResult)> callback) {
  // Registering makes the thread an RCU reader (see ReadSection).
  ThreadData* self = CurrentThreadData();
  BucketTable& table = GlobalTable();
  WakeList wakes;
  UnparkResult result;
  {
    BucketTable::ReadSection rs(table);
    auto pair = table.LockBucketPair(from, to);
    Bucket* bf = pair.first;
    Bucket* bt = pair.second;
    const RequeueOp op = validate();
    if (op == RequeueOp::kAbort) {
      BucketTable::UnlockBucketPair(pair);
      return result;
    }
    Waiter* wake = nullptr;
    if (op == RequeueOp::kUnparkOne || op == RequeueOp::kUnparkOneRequeueRest) {
      wake = TakeUpTo(bf, from, /*claim=*/true, 1, kAnyParkToken,
                      &result.unparked_threads, &wakes);
    }
    if (op == RequeueOp::kRequeueOne || op == RequeueOp::kRequeueAll ||
        op == RequeueOp::kUnparkOneRequeueRest) {
      const size_t limit = op == RequeueOp::kRequeueOne ? 1 : SIZE_MAX;
      MoveChain(TakeUpTo(bf, from, /*claim=*/false, limit, kAnyParkToken,
                         &result.requeued_threads, &wakes),
                to, bt);
    }
    result.have_more_threads = bf->HasKey(from, bf->head);
    if (wake != nullptr) result.be_fair = Fair(bf);
    const UnparkToken token = callback(op, result);
    if (wake != nullptr) wakes.Release(DataOf(wake), token);
    BucketTable::UnlockBucketPair(pair);
  }
  wakes.Flush();
  self->counters.Add(self->counters.unparks, result.unparked_threads);
  return result;
}

UnparkResult UnparkFilter(
    uintptr_t key, absl::FunctionRef<FilterOp(ParkToken)> filter,
    absl::FunctionRef<UnparkToken(UnparkResult)> callback) {
  // Registering makes the thread an RCU reader (see ReadSection).
  ThreadData* self = CurrentThreadData();
  BucketTable& table = GlobalTable();
  WakeList wakes;
  UnparkResult result;
  {
    BucketTable::ReadSection rs(table);
    Bucket* b = table.LockBucket(key);
    size_t n = 0;
    Waiter* chain = TakeWaiters(
        b, key, /*claim=*/true,
        [&](ThreadData* td, bool* stop) {
          switch (filter(td->park_token)) {
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
        &n, &wakes);
    result.unparked_threads = n;
    result.have_more_threads = b->HasKey(key, b->head);
    if (n != 0) result.be_fair = Fair(b);
    const UnparkToken token = callback(result);
    ReleaseChain(chain, token, &wakes);
    BucketTable::UnlockBucket(b);
  }
  wakes.Flush();
  self->counters.Add(self->counters.unparks, result.unparked_threads);
  return result;
}

PairResult UnparkPair(uintptr_t from, uintptr_t to,
                      absl::FunctionRef<bool(PairPlan*)> plan,
                      UnparkToken token) {
  // Registering makes the thread an RCU reader (see ReadSection).
  ThreadData* self = CurrentThreadData();
  BucketTable& table = GlobalTable();
  WakeList wakes;
  PairResult result;
  {
    BucketTable::ReadSection rs(table);
    auto pair = table.LockBucketPair(from, to);
    Bucket* bf = pair.first;
    Bucket* bt = pair.second;
    PairPlan p;
    if (!plan(&p)) {
      BucketTable::UnlockBucketPair(pair);
      result.aborted = true;
      return result;
    }
    Waiter* woken_from = nullptr;
    if (p.unpark_from != 0) {
      woken_from = TakeUpTo(bf, from, /*claim=*/true, p.unpark_from, kAnyParkToken,
                            &result.unparked_from, &wakes);
    }
    if (p.requeue != 0) {
      MoveChain(TakeUpTo(bf, from, /*claim=*/false, p.requeue, kAnyParkToken,
                         &result.requeued, &wakes),
                to, bt);
    }
    Waiter* woken_to = nullptr;
    if (p.unpark_to != 0) {
      woken_to = TakeUpTo(bt, to, /*claim=*/true, p.unpark_to, kAnyParkToken,
                          &result.unparked_to, &wakes);
    }
    ReleaseChain(woken_from, token, &wakes);
    ReleaseChain(woken_to, token, &wakes);
    BucketTable::UnlockBucketPair(pair);
  }
  wakes.Flush();
  self->counters.Add(self->counters.unparks, result.unparked_from + result.unparked_to);
  return result;
}

void EnterSignalHandler(SignalHandlerScope* scope) {
  scope->marked_away = false;
  if (!internal::t_registered) return;
  std::atomic<uint32_t>& parker = internal::t_data.parker;
  uint32_t v = parker.load(std::memory_order_acquire);
  for (;;) {
    // Not queued, or already marked by the handler this one interrupted.
    if ((v & kParkerQueued) == 0 || (v & kParkerAway) != 0) return;
    if ((v & kParkerClaimed) != 0) {
      // An unparker on another thread is releasing us under its bucket
      // lock, now: wait the few instructions it needs.
      CpuRelax();
      v = parker.load(std::memory_order_acquire);
      continue;
    }
    if (parker.compare_exchange_weak(v, v | kParkerAway,
                                     std::memory_order_acq_rel,
                                     std::memory_order_acquire)) {
      scope->marked_away = true;
      return;
    }
  }
}

void LeaveSignalHandler(const SignalHandlerScope& scope) {
  if (!scope.marked_away) return;
  std::atomic<uint32_t>& parker = internal::t_data.parker;
  uint32_t v = parker.load(std::memory_order_relaxed);
  // Evicted meanwhile (0, or queued afresh by a Park in the handler, which
  // evicted the record first): nothing of ours is left to clear.
  while ((v & kParkerAway) != 0 &&
         !parker.compare_exchange_weak(v, v & ~kParkerAway,
                                       std::memory_order_acq_rel,
                                       std::memory_order_relaxed)) {
  }
}

}  // namespace parklot
