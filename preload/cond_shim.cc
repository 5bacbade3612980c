// pthread_cond_* and C11 cnd_* in place on glibc's pthread_cond_t.
#include <errno.h>
#include <threads.h>

#include "preload/shim.h"
#include "sync/condvar.h"
#include "sync/mutex.h"

namespace parklot::preload {


namespace {

clockid_t ClockOf(const pthread_cond_t* c) {
  return (c->__data.__wrefs & kCondMonotonic) ? CLOCK_MONOTONIC
                                              : CLOCK_REALTIME;
}

// Waits on a condvar the shim owns. `abstime` == nullptr: no deadline.
int Wait(pthread_cond_t* c, pthread_mutex_t* m, const struct timespec* abstime,
         clockid_t clock) {
  if (abstime != nullptr && !ValidTimespec(abstime)) return EINVAL;
  // A cancellation point (POSIX): act on a pending cancel before waiting.
  pthread_testcancel();
  if (g_stats) CountOp(Op::kCondWait);
  CancellationPoint cancellation_point;
  const Deadline deadline = abstime == nullptr
                                ? Deadline::Never()
                                : Deadline::FromTimespec(*abstime, clock);
  if (MutexIsGlibcOwned(m)) {
    // A robust or process-shared mutex with a private condvar: no requeue
    // onto a lock parklot does not run.
    return CondVarCore::WaitAny(
               CondWord(c), [m] { __pthread_mutex_unlock(m); },
               [m] { __pthread_mutex_lock(m); }, deadline)
               ? 0
               : ETIMEDOUT;
  }
  const int kind = m->__data.__kind & ~kKindElision;
  if (kind == kKindDestroyed) return EINVAL;
  std::atomic<uint32_t>* word = MutexWord(m);
  const int type = kind & kKindMask;
  const bool checked =
      type == PTHREAD_MUTEX_RECURSIVE || type == PTHREAD_MUTEX_ERRORCHECK;
  if (checked && !MutexCore::HeldByCurrentThread(word)) return EPERM;
  // A recursive mutex is released fully for the wait and its depth
  // restored after (glibc would deadlock on depth > 1; POSIX leaves it
  // undefined).
  const unsigned depth = m->__data.__count;
  const bool ok = CondVarCore::Wait(CondWord(c), word, MutexEma(m), deadline);
  if (type == PTHREAD_MUTEX_RECURSIVE) m->__data.__count = depth;
  return ok ? 0 : ETIMEDOUT;
}

}  // namespace
}  // namespace parklot::preload

using namespace parklot;           // NOLINT
using namespace parklot::preload;  // NOLINT

extern "C" {

int pthread_cond_init(pthread_cond_t* c, const pthread_condattr_t* attr) {
  // glibc validates the attributes and records clock and pshared in
  // __wrefs; the rest, our word included, is zeroed.
  return RealGlibc().cond_init(c, attr);
}

int pthread_cond_destroy(pthread_cond_t* c) {
  if (CondIsGlibcOwned(c)) return RealGlibc().cond_destroy(c);
  // Waiters are woken by then (POSIX); nothing of ours outlives the word.
  return 0;
}

int pthread_cond_wait(pthread_cond_t* c, pthread_mutex_t* m) {
  if (CondIsGlibcOwned(c)) return RealGlibc().cond_wait(c, m);
  return Wait(c, m, nullptr, CLOCK_REALTIME);
}

int pthread_cond_timedwait(pthread_cond_t* c, pthread_mutex_t* m,
                           const struct timespec* abstime) {
  if (CondIsGlibcOwned(c)) return RealGlibc().cond_timedwait(c, m, abstime);
  if (abstime == nullptr) return EINVAL;
  return Wait(c, m, abstime, ClockOf(c));
}

int pthread_cond_clockwait(pthread_cond_t* c, pthread_mutex_t* m,
                           clockid_t clock, const struct timespec* abstime) {
  if (CondIsGlibcOwned(c)) {
    return RealGlibc().cond_clockwait(c, m, clock, abstime);
  }
  if (!ValidClock(clock) || abstime == nullptr) return EINVAL;
  return Wait(c, m, abstime, clock);
}

int pthread_cond_signal(pthread_cond_t* c) {
  if (CondIsGlibcOwned(c)) return RealGlibc().cond_signal(c);
  if (g_stats) CountOp(Op::kCondSignal);
  CondVarCore::NotifyOne(CondWord(c));
  return 0;
}

int pthread_cond_broadcast(pthread_cond_t* c) {
  if (CondIsGlibcOwned(c)) return RealGlibc().cond_broadcast(c);
  if (g_stats) CountOp(Op::kCondBroadcast);
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
