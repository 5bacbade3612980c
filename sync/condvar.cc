#include "sync/condvar.h"

namespace parklot::internal {
namespace {

std::atomic<uint32_t>* MutexWordAt(uintptr_t state) {
  return reinterpret_cast<std::atomic<uint32_t>*>(state);
}

// A thread woken by a notify (not the mutex) gets this token.
constexpr UnparkToken kNotifiedToken = 0;

// Within its scope the calling thread's parks are no cancellation points,
// even inside a CancellationPoint scope: re-taking the mutex after a wait
// is not one (pthread_mutex_lock is none), so a cancellation never unwinds
// out of a wait without the mutex.
class NotCancellable {
 public:
  NotCancellable()
      : td_(CurrentThreadData()), saved_(td_->cancellation_point) {
    td_->cancellation_point = 0;
  }
  ~NotCancellable() { td_->cancellation_point = saved_; }
  NotCancellable(const NotCancellable&) = delete;
  NotCancellable& operator=(const NotCancellable&) = delete;

 private:
  ThreadData* const td_;
  const uint32_t saved_;
};

// A notify's requeue decision, in UnparkRequeue's validate (both buckets
// locked, so the waiters' mutex cannot change): kAbort, setting *stale, if
// the condvar's waiters no longer use the mutex word `s` (the caller
// re-reads); else `onto_mutex` if that mutex is held, marked so that its
// unlock wakes them (waking a thread only for it to block on a held mutex
// is a wasted context switch), or `wake` if it is free.
RequeueOp RequeueOrWake(std::atomic<uintptr_t>* cv, uintptr_t s, bool* stale,
                        RequeueOp onto_mutex, RequeueOp wake) {
  if (cv->load(std::memory_order_relaxed) != s) {
    *stale = true;
    return RequeueOp::kAbort;
  }
  return MutexCore::MarkWaitersParkedIfLocked(MutexWordAt(s)) ? onto_mutex
                                                              : wake;
}

// What the first of a broadcast's requeued crowd gives the rest when it
// wakes them (neither kNotifiedToken nor the mutex's tokens): they relock
// as any notified waiter, without waking anyone.
constexpr UnparkToken kCrowdToken = 2;

// A waiter moved onto the mutex as one of a broadcast's crowd
// (kRequeuedParkToken), woken by the mutex's unlock: wakes the crowd
// members queued behind it on the mutex, FIFO up to the first waiter that
// is none (a wake tree above 32), so that they are runnable together. The
// mutex is not released to them: they compete for it as notified waiters
// do. Under the bucket lock, the parked bit is cleared if nobody is left
// (as a last waiter leaving by a timeout does), so that they spin before
// parking again.
void WakeCrowd(std::atomic<uint32_t>* mutex_word) {
  UnparkFilter(
      KeyOf(mutex_word),
      [](ParkToken t) {
        return t == kRequeuedParkToken ? FilterOp::kUnpark : FilterOp::kStop;
      },
      [mutex_word](UnparkResult r) {
        if (!r.have_more_threads) MutexCore::ClearWaitersParked(mutex_word);
        return kCrowdToken;
      });
}

// Condvar waiters park with this token (a value no other parker of the
// lot uses: the rwlock's and the served futex's fit in 32 bits), so that
// PassOn can tell a condvar's waiter from another object's at the same
// address.
constexpr ParkToken kCondWaiterParkToken = ParkToken{0x636f6e64} << 32;

// A cancelled waiter's duty (POSIX: a cancelled waiter must not consume a
// notification other waiters could have had): wakes the first condvar
// waiter still queued on `cv`'s key, if there is one. The word is touched
// only then, in the callback, under the bucket lock while that waiter is
// queued, when the condvar is still in use (destroying one with blocked
// waiters is undefined). A waiter that was woken or requeued has left the
// condvar: after the broadcast (or the signal to the last waiter) that
// did it, the program may destroy and free the condvar (POSIX's
// pthread_cond_destroy rationale), so with nobody queued the word is not
// read at all (docs/design.md section 4, CondVar, "Cancellation"). Memory
// reused by another condvar with waiters gets a spurious wake-up, which
// POSIX allows; another object's waiters are left alone (the token).
void PassOn(std::atomic<uintptr_t>* cv) {
  bool found = false;
  UnparkFilter(
      KeyOf(cv),
      [&found](ParkToken t) {
        if (found) return FilterOp::kStop;
        if (t != kCondWaiterParkToken) return FilterOp::kSkip;
        found = true;
        return FilterOp::kUnpark;
      },
      [cv](UnparkResult r) {
        if (r.unparked_threads != 0 && !r.have_more_threads) {
          cv->store(CondVarCore::kNoWaiters, std::memory_order_relaxed);
        }
        return kNotifiedToken;
      });
}

}  // namespace

bool CondVarCore::Wait(std::atomic<uintptr_t>* cv,
                       std::atomic<uint32_t>* mutex_word,
                       MutexMeta* mutex_meta,
                       const Deadline& deadline) {
  const uintptr_t mine = KeyOf(mutex_word);
  bool requeued = false;
  // Thread cancellation (the shim makes this a cancellation point): POSIX
  // wants the mutex held again before cleanup handlers run, and a
  // notification this waiter consumed passed on to another.
  // A waiter has consumed a notification if it was unparked, or if a
  // notify requeued it onto the mutex (then Park's unwinding, like a
  // timeout, reports the mutex's key and sets `requeued`), whether or not
  // the mutex's unlock had woken it yet. Either way it has left the
  // condvar, which may be gone: PassOn reads it only if a waiter is still
  // queued there.
  struct UnwindGuard {
    std::atomic<uintptr_t>* cv;
    std::atomic<uint32_t>* mutex_word;
    MutexMeta* mutex_meta;
    const bool* requeued;
    bool armed = true;
    ~UnwindGuard() {
      if (!armed) return;
      const ThreadData* td = CurrentThreadData();
      if (td->unwound_unparked &&
          td->unwound_token == MutexCore::kHandoffToken) {
        MutexCore::TakeHandoff(mutex_meta);
      } else {
        NotCancellable not_cancellable;
        MutexCore::LockOneStep(mutex_word, mutex_meta);
      }
      if (td->unwound_unparked || *requeued) PassOn(cv);
    }
  } guard{cv, mutex_word, mutex_meta, &requeued};
  const ParkResult r = Park(
      KeyOf(cv),
      [cv, mine] {
        // Under the condvar's bucket lock: record our mutex for requeue.
        const uintptr_t s = cv->load(std::memory_order_relaxed);
        if (s == kNoWaiters) {
          cv->store(mine, std::memory_order_relaxed);
        } else if (s != mine) {
          cv->store(kNoRequeue, std::memory_order_relaxed);
        }
        return true;
      },
      // Queued first, unlocked second: a notify after our unlock finds us.
      [mutex_word, mutex_meta] { MutexCore::UnlockOneStep(mutex_word, mutex_meta); },
      [cv, &requeued](uintptr_t key, bool was_last_thread) {
        // Timed out while requeued onto the mutex: not a condvar timeout;
        // the lock is re-acquired below like any wake-up.
        requeued = key != KeyOf(cv);
        if (!requeued && was_last_thread) {
          cv->store(kNoWaiters, std::memory_order_relaxed);
        }
      },
      kCondWaiterParkToken, deadline);
  guard.armed = false;
  if (r.unparked() && r.token != kCrowdToken &&
      r.park_token == kRequeuedParkToken) {
    WakeCrowd(mutex_word);
  }
  if (r.unparked() && r.token == MutexCore::kHandoffToken) {
    // Requeued onto the mutex and handed the lock by its unlock.
    MutexCore::TakeHandoff(mutex_meta);
    return true;
  }
  {
    NotCancellable not_cancellable;
    MutexCore::LockOneStep(mutex_word, mutex_meta);
  }
  return !r.timed_out() || requeued;
}

bool CondVarCore::WaitAny(std::atomic<uintptr_t>* cv, void (*unlock)(void*),
                          void (*relock)(void*), void* lock,
                          const Deadline& deadline) {
  struct UnwindGuard {
    void (*relock)(void*);
    void* lock;
    std::atomic<uintptr_t>* cv;
    bool armed = true;
    ~UnwindGuard() {
      if (!armed) return;
      if (CurrentThreadData()->unwound_unparked) PassOn(cv);
      NotCancellable not_cancellable;
      relock(lock);
    }
  } guard{relock, lock, cv};
  const ParkResult r = Park(
      KeyOf(cv),
      [cv] {
        cv->store(kNoRequeue, std::memory_order_relaxed);
        return true;
      },
      [unlock, lock] { unlock(lock); },
      [cv](uintptr_t, bool was_last_thread) {
        if (was_last_thread) cv->store(kNoWaiters, std::memory_order_relaxed);
      },
      kCondWaiterParkToken, deadline);
  guard.armed = false;
  {
    NotCancellable not_cancellable;
    relock(lock);
  }
  return !r.timed_out();
}

// A notify resets the word to kNoWaiters only when it took the last waiter
// off the queue: one that finds nobody queued leaves the word, whose waiters
// may be another process's (a private condvar in shared memory, which glibc
// tolerates), so that their own process's notify still finds them
// (docs/design.md section 4, CondVar).
bool CondVarCore::NotifyOne(std::atomic<uintptr_t>* cv) {
  for (;;) {
    const uintptr_t s = cv->load(std::memory_order_relaxed);
    if (s == kNoWaiters) return false;
    if (s == kNoRequeue) {
      return UnparkOne(KeyOf(cv), [cv](UnparkResult r) {
               if (r.unparked_threads != 0 && !r.have_more_threads) {
                 cv->store(kNoWaiters, std::memory_order_relaxed);
               }
               return kNotifiedToken;
             }).unparked_threads != 0;
    }
    bool stale = false;
    const UnparkResult r = UnparkRequeue(
        KeyOf(cv), s,
        [cv, s, &stale] {
          return RequeueOrWake(cv, s, &stale, RequeueOp::kRequeueOne,
                               RequeueOp::kUnparkOne);
        },
        [cv](RequeueOp, UnparkResult r) {
          if (r.unparked_threads + r.requeued_threads != 0 &&
              !r.have_more_threads) {
            cv->store(kNoWaiters, std::memory_order_relaxed);
          }
          return kNotifiedToken;
        });
    if (stale) continue;
    return r.unparked_threads + r.requeued_threads != 0;
  }
}

namespace {

// NotifyAll past its no-waiter check, out of line so that the check stays
// a load and a branch in a frameless function.
__attribute__((noinline)) size_t NotifyAllSlow(std::atomic<uintptr_t>* cv) {
  constexpr uintptr_t kNoWaiters = CondVarCore::kNoWaiters;
  constexpr uintptr_t kNoRequeue = CondVarCore::kNoRequeue;
  for (;;) {
    const uintptr_t s = cv->load(std::memory_order_relaxed);
    if (s == kNoWaiters) return 0;
    if (s == kNoRequeue) {
      return UnparkFilter(
                 KeyOf(cv), [](ParkToken) { return FilterOp::kUnpark; },
                 [cv](UnparkResult r) {
                   if (r.unparked_threads != 0) {
                     cv->store(kNoWaiters, std::memory_order_relaxed);
                   }
                   return kNotifiedToken;
                 })
          .unparked_threads;
    }
    bool stale = false;
    const UnparkResult r = UnparkRequeueCounted(
        KeyOf(cv), s,
        [cv, s, &stale](size_t parked) {
          // A crowd (more than 32) is not left to pass the mutex one
          // unlock's wake-up at a time, each link a FUTEX_WAKE and a
          // sleeping thread's wake-up (docs/design.md section 4): if the
          // mutex is held, they are requeued tagged, and the first that an
          // unlock wakes wakes the rest by a wake tree (WakeCrowd); if it
          // is free, all are woken now. Either way they are runnable
          // together and pass the mutex one after another, as after
          // glibc's broadcast, but without contending with the notifier
          // for the mutex it holds.
          const bool crowd = parked >= kWakeTreeMin;
          const RequeueOp op = RequeueOrWake(
              cv, s, &stale,
              crowd ? RequeueOp::kRequeueAllRetagged : RequeueOp::kRequeueAll,
              crowd ? RequeueOp::kUnparkAll
                    : RequeueOp::kUnparkOneRequeueRest);
          // Every waiter leaves the condvar's queue.
          if (op != RequeueOp::kAbort && parked != 0) {
            cv->store(kNoWaiters, std::memory_order_relaxed);
          }
          return op;
        },
        [s](RequeueOp op, UnparkResult r) {
          // The woken thread will lock the mutex, so an unlock is coming
          // that will see this bit and wake the next requeued thread.
          if (op == RequeueOp::kUnparkOneRequeueRest &&
              r.requeued_threads != 0) {
            MutexCore::MarkWaitersParked(MutexWordAt(s));
          }
          return kNotifiedToken;
        });
    if (stale) continue;
    return r.unparked_threads + r.requeued_threads;
  }
}

}  // namespace

size_t CondVarCore::NotifyAll(std::atomic<uintptr_t>* cv) {
  if (cv->load(std::memory_order_relaxed) == kNoWaiters) return 0;
  return NotifyAllSlow(cv);
}

}  // namespace parklot::internal
