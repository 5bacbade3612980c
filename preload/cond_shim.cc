// pthread_cond_* and C11 cnd_* in place on glibc's pthread_cond_t.
#include <errno.h>
#include <threads.h>
#include <unistd.h>

#include "hash/fibonacci_hash.h"
#include "preload/diag/deadlock.h"
#include "preload/diag/profile.h"
#include "preload/shim.h"
#include "sync/condvar.h"
#include "sync/mutex.h"

namespace parklot::internal::preload {


namespace {

clockid_t ClockOf(const pthread_cond_t* c) {
  return (c->__data.__wrefs & kCondMonotonic) ? CLOCK_MONOTONIC
                                              : CLOCK_REALTIME;
}

// What glibc's unlock inside a condvar wait returns for `m`, a mutex glibc
// owns, unlocked by the calling thread: EINVAL for a kind glibc does not
// know; EPERM where it checks the owner (every kind but the plain normal
// and adaptive ones; glibc records the owner's thread id in __owner for all
// of them) and the caller is not the owner; else 0.
int GlibcUnlockError(const pthread_mutex_t* m) {
  const int kind = m->__data.__kind;
  const int flags = kind & (kKindRobust | kKindPrioInherit | kKindPrioProtect);
  if ((kind & 12) != 0 ||
      (flags != 0 && flags != kKindRobust && flags != kKindPrioInherit &&
       flags != (kKindPrioInherit | kKindRobust) &&
       flags != kKindPrioProtect)) {
    return EINVAL;
  }
  const int type = kind & kKindMask;
  const bool checked = (kind & (kKindRobust | kKindPrioInherit)) != 0 ||
                       type == PTHREAD_MUTEX_RECURSIVE ||
                       type == PTHREAD_MUTEX_ERRORCHECK;
  return checked && m->__data.__owner != CurrentTid() ? EPERM : 0;
}

// The mutex's side of a condvar wait on a mutex the shim runs, as glibc's
// wait treats it (its unlock inside the wait, its relock after). The one
// place that restores the mutex, in the destructor, so on every way out of
// the wait: return, timeout, spurious wake-up and the unwinding of thread
// cancellation (the mutex is held again before the first cleanup handler
// runs, exactly as the caller held it).
class WaitingMutex {
 public:
  explicit WaitingMutex(pthread_mutex_t* m) : m_(m) {}
  WaitingMutex(const WaitingMutex&) = delete;
  WaitingMutex& operator=(const WaitingMutex&) = delete;

  // Checks the mutex as glibc's unlock inside the wait does: EINVAL for a
  // destroyed mutex or an unknown kind, EPERM for a recursive or
  // error-checking one the caller does not hold. On 0 the wait may go on,
  // and the thread counts as a user of the mutex (pthread_mutex_destroy
  // says EBUSY) until the destructor.
  int Enter() {
    const int type = ShimMutexType(m_->__data.__kind);
    if (type < 0) return EINVAL;
    if ((type == PTHREAD_MUTEX_RECURSIVE || type == PTHREAD_MUTEX_ERRORCHECK) &&
        !MutexCore::HeldByCurrentThread(MutexWord(m_), MutexMetaOf(m_))) {
      return EPERM;
    }
    recursive_ = type == PTHREAD_MUTEX_RECURSIVE;
    depth_ = m_->__data.__count;
    MutexCondWaiters(m_)->fetch_add(1, std::memory_order_relaxed);
    entered_ = true;
    // The wait releases the mutex (unless KeepsLock): off the held list
    // until the destructor re-takes it (deadlock.h).
    if (DeadlockOn() && !KeepsLock()) site_ = DeadlockReleased(m_);
    // A thread waiting for the mutex may be let in by this release: the
    // wait's stack is that release's (profile.h). Its site is not known
    // here: a lock's condvar-wait releases share one.
    if (ProfileOn() && !KeepsLock()) ProfileRelease(m_, nullptr);
    // The wait releases it: nobody's, as glibc's unlock inside the wait
    // leaves it, until the destructor re-takes it.
    if (!KeepsLock()) ClearMutexOwner(m_);
    return 0;
  }

  // glibc's unlock releases one level of a recursive mutex: held more
  // than once, it stays held through the wait (and a signaller that needs
  // it waits for the waiter's timeout), as POSIX warns.
  bool KeepsLock() const { return recursive_ && depth_ > 1; }

  // Releases the lock word, for a wait that does not release and re-take
  // it itself (CondVarCore::Wait does); the destructor re-takes it.
  void Release() {
    MutexCore::UnlockOneStep(MutexWord(m_), MutexMetaOf(m_));
    relock_ = true;
  }

  ~WaitingMutex() {
    if (!entered_) return;
    if (relock_) MutexCore::LockOneStep(MutexWord(m_), MutexMetaOf(m_));
    NoteMutexOwner(m_);
    if (DeadlockOn() && !KeepsLock()) {
      DeadlockBeforeLock(m_, LockMode::kExclusive, site_);
      DeadlockAcquired(m_, LockMode::kExclusive, site_);
    }
    // Another thread may have locked and unlocked it meanwhile.
    if (recursive_) m_->__data.__count = depth_;
    MutexCondWaiters(m_)->fetch_sub(1, std::memory_order_relaxed);
  }

 private:
  pthread_mutex_t* const m_;
  unsigned depth_ = 0;
  bool recursive_ = false;
  bool entered_ = false;
  bool relock_ = false;
  const void* site_ = nullptr;  // where the caller took the mutex
};

// Waits on a condvar the shim owns. `abstime`: valid, or nullptr for no
// deadline (the caller has checked it and `clock`).
// `caller`: ProgramDeadline's.
int Wait(pthread_cond_t* c, pthread_mutex_t* m, const struct timespec* abstime,
         clockid_t clock, const void* caller = nullptr) {
  const auto deadline_of = [abstime, clock, caller] {
    return abstime == nullptr ? Deadline::Never()
                              : ProgramDeadline(*abstime, clock, caller);
  };
  if (MutexIsGlibcOwned(m)) {
    if (const int rc = GlibcUnlockError(m); rc != 0) return rc;
    // A cancellation point (POSIX): act on a pending cancel before waiting.
    pthread_testcancel();
    if (StatsOn()) CountOp(Op::kCondWait);
    CancellationPoint cancellation_point;
    // A robust or process-shared mutex with a private condvar: no requeue
    // onto a lock parklot does not run; glibc's own unlock and lock restore
    // it as glibc's wait would. glibc's wait keeps the thread in __nusers
    // (pthread_mutex_destroy's EBUSY) where its unlock and lock do not, so
    // it is counted by hand while held. As glibc's wait, it returns the
    // relock's error (EOWNERDEAD, ENOTRECOVERABLE) over its own result.
    ++m->__data.__nusers;
    int relock_rc = 0;
    const bool ok = CondVarCore::WaitAny(
        CondWord(c), [m] { __pthread_mutex_unlock(m); },
        [m, &relock_rc] {
          relock_rc = __pthread_mutex_lock(m);
          if (relock_rc == 0 || relock_rc == EOWNERDEAD) --m->__data.__nusers;
        },
        deadline_of());
    if (relock_rc != 0) return relock_rc;
    return ok ? 0 : ETIMEDOUT;
  }
  WaitingMutex waiting(m);
  if (const int rc = waiting.Enter(); rc != 0) return rc;
  pthread_testcancel();
  if (StatsOn()) CountOp(Op::kCondWait);
  CancellationPoint cancellation_point;
  // A recursive mutex held more than once: nothing to release or re-take.
  const bool ok = waiting.KeepsLock()
                      ? CondVarCore::WaitAny(
                            CondWord(c), [] {}, [] {}, deadline_of())
                      : CondVarCore::Wait(CondWord(c), MutexWord(m),
                                          MutexMetaOf(m), deadline_of());
  return ok ? 0 : ETIMEDOUT;
}

// A process-shared condvar (glibc's) with a mutex the shim owns. glibc's
// wait would unlock and relock that mutex with its own lock protocol on our
// lock word (losing parked waiters and mutual exclusion), so glibc waits
// on a stand-in instead: a private mutex that only glibc's functions touch,
// one of a few picked by the condvar's address. The waiter takes the
// stand-in before it releases the user's mutex, and glibc releases the
// stand-in only once the waiter is registered on the condvar; signallers in
// this process take the stand-in too, so one that locked the user's mutex
// after the waiter released it cannot signal before the waiter is
// registered. (A signaller in another process cannot hold this process's
// private mutex, so no such ordering is owed to it.)
constexpr size_t kStandIns = 64;
pthread_mutex_t g_stand_ins[kStandIns];  // zero-filled: normal, unlocked
// Set by the first stand-in wait; until then signallers skip the stand-in.
std::atomic<bool> g_stand_ins_used{false};

pthread_mutex_t* StandInFor(const pthread_cond_t* c) {
  static_assert(kStandIns == 64, "StandInFor takes 6 bits");
  return &g_stand_ins[FibonacciHash(reinterpret_cast<uintptr_t>(c), 6)];
}

enum class WaitHow { kUntimed, kCondClock, kGivenClock };

int StandInWait(pthread_cond_t* c, pthread_mutex_t* m, WaitHow how,
                clockid_t clock, const struct timespec* abstime) {
  // glibc checks the arguments before it touches the mutex.
  if (how != WaitHow::kUntimed && !ValidTimespec(abstime)) return EINVAL;
  if (how == WaitHow::kGivenClock && !ValidClock(clock)) return EINVAL;
  WaitingMutex waiting(m);
  if (const int rc = waiting.Enter(); rc != 0) return rc;
  pthread_mutex_t* stand_in = StandInFor(c);
  // Published by the unlock below to whoever locks the mutex next.
  if (!g_stand_ins_used.load(std::memory_order_relaxed)) {
    g_stand_ins_used.store(true, std::memory_order_release);
  }
  __pthread_mutex_lock(stand_in);
  // Released before `waiting` re-takes the user's mutex, also when thread
  // cancellation unwinds out of glibc's wait (glibc's cleanup has re-taken
  // the stand-in): a signaller holding the user's mutex takes the stand-in.
  struct StandInRelease {
    pthread_mutex_t* stand_in;
    ~StandInRelease() { __pthread_mutex_unlock(stand_in); }
  } release{stand_in};
  if (!waiting.KeepsLock()) waiting.Release();
  switch (how) {
    case WaitHow::kUntimed:
      return RealGlibc().pthread_cond_wait(c, stand_in);
    case WaitHow::kCondClock:
      return RealGlibc().pthread_cond_timedwait(c, stand_in, abstime);
    case WaitHow::kGivenClock:
      break;
  }
  return RealGlibc().pthread_cond_clockwait(c, stand_in, clock, abstime);
}

// glibc's signal or broadcast on a process-shared condvar, ordered against
// stand-in waiters (see StandInWait).
int GlibcNotify(pthread_cond_t* c, int (*notify)(pthread_cond_t*)) {
  if (!g_stand_ins_used.load(std::memory_order_acquire)) return notify(c);
  pthread_mutex_t* stand_in = StandInFor(c);
  __pthread_mutex_lock(stand_in);
  const int rc = notify(c);
  __pthread_mutex_unlock(stand_in);
  return rc;
}

}  // namespace

// fork(): a stand-in held by another thread of the parent would stay held
// in the child for ever.
void ResetStandInsInChild() {
  for (pthread_mutex_t& m : g_stand_ins) m = PTHREAD_MUTEX_INITIALIZER;
}

}  // namespace parklot::internal::preload

using namespace parklot;           // NOLINT
using namespace parklot::internal;  // NOLINT
using namespace parklot::internal::preload;  // NOLINT

extern "C" {

int pthread_cond_init(pthread_cond_t* c, const pthread_condattr_t* attr) {
  // glibc validates the attributes and records clock and pshared in
  // __wrefs; the rest, our word included, is zeroed.
  return RealGlibc().pthread_cond_init(c, attr);
}

int pthread_cond_destroy(pthread_cond_t* c) {
  if (CondIsGlibcOwned(c)) return RealGlibc().pthread_cond_destroy(c);
  // Waiters are woken by then (POSIX); nothing of ours outlives the word.
  return 0;
}

int pthread_cond_wait(pthread_cond_t* c, pthread_mutex_t* m) {
  if (CondIsGlibcOwned(c)) {
    if (!MutexIsGlibcOwned(m)) {
      return StandInWait(c, m, WaitHow::kUntimed, CLOCK_REALTIME, nullptr);
    }
    return RealGlibc().pthread_cond_wait(c, m);
  }
  return Wait(c, m, nullptr, CLOCK_REALTIME);
}

int pthread_cond_timedwait(pthread_cond_t* c, pthread_mutex_t* m,
                           const struct timespec* abstime) {
  // glibc 2.36 dereferences a null abstime (SIGSEGV); EINVAL, its answer
  // to every other invalid abstime, instead, also for its own condvars.
  if (!ValidTimespec(abstime)) return EINVAL;
  if (CondIsGlibcOwned(c)) {
    if (!MutexIsGlibcOwned(m)) {
      return StandInWait(c, m, WaitHow::kCondClock, CLOCK_REALTIME, abstime);
    }
    return RealGlibc().pthread_cond_timedwait(c, m, abstime);
  }
  return Wait(c, m, abstime, ClockOf(c), __builtin_return_address(0));
}

int pthread_cond_clockwait(pthread_cond_t* c, pthread_mutex_t* m,
                           clockid_t clock, const struct timespec* abstime) {
  // As pthread_cond_timedwait (glibc checks abstime before the clock).
  if (!ValidTimespec(abstime)) return EINVAL;
  if (CondIsGlibcOwned(c)) {
    if (!MutexIsGlibcOwned(m)) {
      return StandInWait(c, m, WaitHow::kGivenClock, clock, abstime);
    }
    return RealGlibc().pthread_cond_clockwait(c, m, clock, abstime);
  }
  if (!ValidClock(clock)) return EINVAL;
  return Wait(c, m, abstime, clock);
}

int pthread_cond_signal(pthread_cond_t* c) {
  if (CondIsGlibcOwned(c)) return GlibcNotify(c, RealGlibc().pthread_cond_signal);
  if (StatsOn()) CountOp(Op::kCondSignal);
  CondVarCore::NotifyOne(CondWord(c));
  return 0;
}

int pthread_cond_broadcast(pthread_cond_t* c) {
  if (CondIsGlibcOwned(c)) return GlibcNotify(c, RealGlibc().pthread_cond_broadcast);
  if (StatsOn()) CountOp(Op::kCondBroadcast);
  CondVarCore::NotifyAll(CondWord(c));
  return 0;
}

// C11 threads.
int cnd_init(cnd_t* c) {
  return pthread_cond_init(reinterpret_cast<pthread_cond_t*>(c), nullptr) == 0
             ? thrd_success
             : thrd_error;
}

void cnd_destroy(cnd_t* c) {
  pthread_cond_destroy(reinterpret_cast<pthread_cond_t*>(c));
}

int cnd_wait(cnd_t* c, mtx_t* m) {
  return pthread_cond_wait(reinterpret_cast<pthread_cond_t*>(c),
                           reinterpret_cast<pthread_mutex_t*>(m)) == 0
             ? thrd_success
             : thrd_error;
}

int cnd_timedwait(cnd_t* __restrict c, mtx_t* __restrict m,
                  const struct timespec* __restrict abstime) {
  // <pthread.h> declares pthread_cond_timedwait's abstime nonnull: a null
  // one must not reach it (the shim answers EINVAL, see the README).
  if (IsNull(abstime)) return thrd_error;
  const int rc = pthread_cond_timedwait(
      reinterpret_cast<pthread_cond_t*>(c),
      reinterpret_cast<pthread_mutex_t*>(m), abstime);
  return rc == 0 ? thrd_success : rc == ETIMEDOUT ? thrd_timedout : thrd_error;
}

int cnd_signal(cnd_t* c) {
  return pthread_cond_signal(reinterpret_cast<pthread_cond_t*>(c)) == 0
             ? thrd_success
             : thrd_error;
}

int cnd_broadcast(cnd_t* c) {
  return pthread_cond_broadcast(reinterpret_cast<pthread_cond_t*>(c)) == 0
             ? thrd_success
             : thrd_error;
}

}  // extern "C"
