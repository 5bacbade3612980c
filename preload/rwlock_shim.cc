// pthread_rwlock_* in place on glibc's pthread_rwlock_t.
//
// Layout: bytes 0-7 the SharedMutexCore word, 8-11 its spin average
// (glibc's __readers/__writers and __wrphase_futex); glibc's own init sets
// __flags (the kind) and __shared, which this file only reads. All-zero
// memory (PTHREAD_RWLOCK_INITIALIZER) is an unlocked reader-preferring lock,
// as in glibc; PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP sets
// __flags and works untouched. Process-shared rwlocks stay glibc's.
#include <errno.h>
#include <pthread.h>

#include "preload/shim.h"
#include "sync/shared_mutex.h"

extern "C" {
int __pthread_rwlock_init(pthread_rwlock_t*, const pthread_rwlockattr_t*);
int __pthread_rwlock_destroy(pthread_rwlock_t*);
int __pthread_rwlock_rdlock(pthread_rwlock_t*);
int __pthread_rwlock_wrlock(pthread_rwlock_t*);
int __pthread_rwlock_tryrdlock(pthread_rwlock_t*);
int __pthread_rwlock_trywrlock(pthread_rwlock_t*);
int __pthread_rwlock_unlock(pthread_rwlock_t*);
}

namespace parklot::preload {
namespace {

using Core = SharedMutexCore;

std::atomic<uint64_t>* Word(pthread_rwlock_t* rw) {
  return reinterpret_cast<std::atomic<uint64_t>*>(rw);
}
std::atomic<int32_t>* Ema(pthread_rwlock_t* rw) {
  return reinterpret_cast<std::atomic<int32_t>*>(
      reinterpret_cast<char*>(rw) + 8);
}
bool GlibcOwned(const pthread_rwlock_t* rw) { return rw->__data.__shared != 0; }

Core::Kind KindOf(const pthread_rwlock_t* rw) {
  return rw->__data.__flags == PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP
             ? Core::Kind::kPreferWriter
             : Core::Kind::kPreferReader;
}

// `abstime` == nullptr: no deadline. EDEADLK, as glibc, when the caller
// already holds the lock for writing.
int RdLock(pthread_rwlock_t* rw, const struct timespec* abstime,
           clockid_t clock) {
  if (abstime != nullptr && !ValidTimespec(abstime)) return EINVAL;
  if (Core::HeldExclusivelyByCurrentThread(Word(rw))) return EDEADLK;
  const Deadline d = abstime == nullptr ? Deadline::Never()
                                        : Deadline::FromTimespec(*abstime, clock);
  return Core::LockShared(Word(rw), Ema(rw), d);
}

int WrLock(pthread_rwlock_t* rw, const struct timespec* abstime,
           clockid_t clock) {
  if (abstime != nullptr && !ValidTimespec(abstime)) return EINVAL;
  if (Core::HeldExclusivelyByCurrentThread(Word(rw))) return EDEADLK;
  const Deadline d = abstime == nullptr ? Deadline::Never()
                                        : Deadline::FromTimespec(*abstime, clock);
  return Core::Lock(Word(rw), Ema(rw), KindOf(rw), d);
}

}  // namespace
}  // namespace parklot::preload

using namespace parklot;           // NOLINT
using namespace parklot::preload;  // NOLINT

extern "C" {

int pthread_rwlock_init(pthread_rwlock_t* rw,
                        const pthread_rwlockattr_t* attr) {
  // glibc validates the attributes, zeroes the lock and records the kind
  // and pshared flag.
  return __pthread_rwlock_init(rw, attr);
}

int pthread_rwlock_destroy(pthread_rwlock_t* rw) {
  if (GlibcOwned(rw)) return __pthread_rwlock_destroy(rw);
  // POSIX allows EBUSY for a held lock; glibc would not notice.
  return Word(rw)->load(std::memory_order_relaxed) != 0 &&
                 (Core::ReaderCount(Word(rw)) != 0 || Core::WriterActive(Word(rw)))
             ? EBUSY
             : 0;
}

int pthread_rwlock_rdlock(pthread_rwlock_t* rw) {
  if (GlibcOwned(rw)) return __pthread_rwlock_rdlock(rw);
  return RdLock(rw, nullptr, CLOCK_REALTIME);
}

int pthread_rwlock_timedrdlock(pthread_rwlock_t* rw,
                               const struct timespec* abstime) {
  if (GlibcOwned(rw)) return RealGlibc().rwlock_timedrdlock(rw, abstime);
  if (abstime == nullptr) return EINVAL;
  return RdLock(rw, abstime, CLOCK_REALTIME);
}

int pthread_rwlock_clockrdlock(pthread_rwlock_t* rw, clockid_t clock,
                               const struct timespec* abstime) {
  if (GlibcOwned(rw)) return RealGlibc().rwlock_clockrdlock(rw, clock, abstime);
  if (!ValidClock(clock) || abstime == nullptr) return EINVAL;
  return RdLock(rw, abstime, clock);
}

int pthread_rwlock_tryrdlock(pthread_rwlock_t* rw) {
  if (GlibcOwned(rw)) return __pthread_rwlock_tryrdlock(rw);
  return Core::TryLockShared(Word(rw));
}

int pthread_rwlock_wrlock(pthread_rwlock_t* rw) {
  if (GlibcOwned(rw)) return __pthread_rwlock_wrlock(rw);
  return WrLock(rw, nullptr, CLOCK_REALTIME);
}

int pthread_rwlock_timedwrlock(pthread_rwlock_t* rw,
                               const struct timespec* abstime) {
  if (GlibcOwned(rw)) return RealGlibc().rwlock_timedwrlock(rw, abstime);
  if (abstime == nullptr) return EINVAL;
  return WrLock(rw, abstime, CLOCK_REALTIME);
}

int pthread_rwlock_clockwrlock(pthread_rwlock_t* rw, clockid_t clock,
                               const struct timespec* abstime) {
  if (GlibcOwned(rw)) return RealGlibc().rwlock_clockwrlock(rw, clock, abstime);
  if (!ValidClock(clock) || abstime == nullptr) return EINVAL;
  return WrLock(rw, abstime, clock);
}

int pthread_rwlock_trywrlock(pthread_rwlock_t* rw) {
  if (GlibcOwned(rw)) return __pthread_rwlock_trywrlock(rw);
  return Core::TryLock(Word(rw));
}

int pthread_rwlock_unlock(pthread_rwlock_t* rw) {
  if (GlibcOwned(rw)) return __pthread_rwlock_unlock(rw);
  std::atomic<uint64_t>* word = Word(rw);
  if (Core::HeldExclusivelyByCurrentThread(word)) {
    Core::Unlock(word);
    return 0;
  }
  // Readers are not tracked per thread (neither does glibc): a read unlock
  // needs only a reader to release; an unheld lock is EPERM.
  if (Core::ReaderCount(word) == 0) return EPERM;
  Core::UnlockShared(word);
  return 0;
}

}  // extern "C"
