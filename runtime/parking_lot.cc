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

// Unlinks every waiter on `key` for which `take(td)` returns true (scanning
// in FIFO order, stopping when it returns false with *stop set) into a
// chain linked through `next`, in FIFO order. Returns the chain head.
template <typename Take>
Waiter* TakeWaiters(Bucket* b, uintptr_t key, Take take, size_t* count)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(b->lock) {
  Waiter* chain_head = nullptr;
  Waiter* chain_tail = nullptr;
  Waiter* prev = nullptr;
  Waiter* w = b->head;
  while (w != nullptr) {
    Waiter* next = w->next;
    if (w->current_key() == key) {
      bool stop = false;
      if (take(DataOf(w), &stop)) {
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
      if (stop) break;
    }
    prev = w;
    w = next;
  }
  return chain_head;
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

// Unlinks up to `limit` (>= 1) waiters on `key`, FIFO, as TakeWaiters.
Waiter* TakeUpTo(Bucket* b, uintptr_t key, size_t limit, size_t* count)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(b->lock) {
  size_t taken = 0;
  return TakeWaiters(
      b, key,
      [&taken, limit](ThreadData*, bool* stop) {
        if (++taken >= limit) *stop = true;
        return true;
      },
      count);
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
    b->lock.Unlock();
    return false;
  }
  const uintptr_t current = td->waiter.current_key();
  Waiter* prev = nullptr;
  for (Waiter* w = b->head; w != &td->waiter; w = w->next) prev = w;
  b->Remove(&td->waiter, prev);
  td->parker.store(0, std::memory_order_relaxed);
  timed_out(current, !b->HasKey(current, b->head));
  b->lock.Unlock();
  return true;
}

}  // namespace

ParkResult Park(uintptr_t key, absl::FunctionRef<bool()> validate,
                absl::FunctionRef<void()> before_sleep,
                absl::FunctionRef<void(uintptr_t, bool)> timed_out,
                ParkToken park_token, Deadline deadline) {
  ThreadData* td = CurrentThreadData();
  BucketTable& table = GlobalTable();
  {
    BucketTable::ReadSection rs(table);
    Bucket* b = table.LockBucket(key);
    if (!validate()) {
      b->lock.Unlock();
      td->counters.Bump(td->counters.invalid);
      return {ParkResult::kInvalid, 0};
    }
    td->waiter.key.store(key, std::memory_order_relaxed);
    td->park_token = park_token;
    td->parker.store(1, std::memory_order_relaxed);
    b->Enqueue(&td->waiter);
    b->lock.Unlock();
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
    Waiter* w = TakeWaiters(
        b, key,
        [](ThreadData*, bool* stop) {
          *stop = true;
          return true;
        },
        &n);
    if (w != nullptr) {
      result.unparked_threads = 1;
      result.have_more_threads = b->HasKey(key, b->head);
      result.be_fair = Fair(b);
    }
    const UnparkToken token = callback(result);
    if (w != nullptr) wakes.Release(DataOf(w), token);
    b->lock.Unlock();
  }
  wakes.Flush();
  if (result.unparked_threads != 0) self->counters.Bump(self->counters.unparks);
  return result;
}

size_t UnparkAll(uintptr_t key, UnparkToken token) {
  ThreadData* self = CurrentThreadData();
  BucketTable& table = GlobalTable();
  WakeList wakes;
  size_t n = 0;
  {
    BucketTable::ReadSection rs(table);
    Bucket* b = table.LockBucket(key);
    Waiter* chain = TakeWaiters(
        b, key, [](ThreadData*, bool*) { return true; }, &n);
    ReleaseChain(chain, token, &wakes);
    b->lock.Unlock();
  }
  wakes.Flush();
  auto& c = self->counters.unparks;
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  return n;
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
    size_t n = 0;
    if (op == RequeueOp::kUnparkOne || op == RequeueOp::kUnparkOneRequeueRest) {
      wake = TakeWaiters(
          bf, from,
          [](ThreadData*, bool* stop) {
            *stop = true;
            return true;
          },
          &n);
      result.unparked_threads = n;
    }
    Waiter* moved = nullptr;
    size_t m = 0;
    if (op == RequeueOp::kRequeueOne) {
      moved = TakeWaiters(
          bf, from,
          [](ThreadData*, bool* stop) {
            *stop = true;
            return true;
          },
          &m);
    } else if (op == RequeueOp::kRequeueAll ||
               op == RequeueOp::kUnparkOneRequeueRest) {
      moved = TakeWaiters(
          bf, from, [](ThreadData*, bool*) { return true; }, &m);
    }
    result.requeued_threads = m;
    // Requeued threads stay parked: only their key and queue change.
    while (moved != nullptr) {
      Waiter* next = moved->next;
      moved->key.store(to, std::memory_order_relaxed);
      bt->Enqueue(moved);
      moved = next;
    }
    result.have_more_threads = bf->HasKey(from, bf->head);
    if (wake != nullptr) result.be_fair = Fair(bf);
    const UnparkToken token = callback(op, result);
    if (wake != nullptr) wakes.Release(DataOf(wake), token);
    BucketTable::UnlockBucketPair(pair);
  }
  wakes.Flush();
  if (result.unparked_threads != 0) self->counters.Bump(self->counters.unparks);
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
        b, key,
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
        &n);
    result.unparked_threads = n;
    result.have_more_threads = b->HasKey(key, b->head);
    if (n != 0) result.be_fair = Fair(b);
    const UnparkToken token = callback(result);
    ReleaseChain(chain, token, &wakes);
    b->lock.Unlock();
  }
  wakes.Flush();
  auto& c = self->counters.unparks;
  c.store(c.load(std::memory_order_relaxed) + result.unparked_threads,
          std::memory_order_relaxed);
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
      woken_from = TakeUpTo(bf, from, p.unpark_from, &result.unparked_from);
    }
    if (p.requeue != 0) {
      Waiter* moved = TakeUpTo(bf, from, p.requeue, &result.requeued);
      // Requeued threads stay parked: only their key and queue change.
      while (moved != nullptr) {
        Waiter* next = moved->next;
        moved->key.store(to, std::memory_order_relaxed);
        bt->Enqueue(moved);
        moved = next;
      }
    }
    Waiter* woken_to = nullptr;
    if (p.unpark_to != 0) {
      woken_to = TakeUpTo(bt, to, p.unpark_to, &result.unparked_to);
    }
    ReleaseChain(woken_from, token, &wakes);
    ReleaseChain(woken_to, token, &wakes);
    BucketTable::UnlockBucketPair(pair);
  }
  wakes.Flush();
  auto& c = self->counters.unparks;
  c.store(c.load(std::memory_order_relaxed) + result.unparked_from +
              result.unparked_to,
          std::memory_order_relaxed);
  return result;
}

}  // namespace parklot
