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

#include "preload/diag/deadlock.h"
#include "preload/diag/profile.h"
#include "preload/shim.h"
#include "sync/shared_mutex.h"

namespace parklot::internal::preload {
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
             ? Core::Kind::kWritersFirst
             : Core::Kind::kPreferReader;
}

// The deadline of a timed lock, as glibc 2.36 reads its arguments: a null
// `abstime` waits without a deadline and leaves `clock` unchecked;
// otherwise an unsupported clock or a bad tv_nsec is EINVAL, even when the
// lock is free (POSIX allows either). `clock` is CLOCK_REALTIME for the
// timed* forms. Returns 0 or EINVAL.
int DeadlineOf(const struct timespec* abstime, clockid_t clock, Deadline* d) {
  if (IsNull(abstime)) {
    *d = Deadline::Never();
    return 0;
  }
  if (!ValidClock(clock) || !ValidTimespec(abstime)) return EINVAL;
  *d = ProgramDeadline(*abstime, clock);
  return 0;
}

// How a read lock of `rw` waits (deadlock.h): behind writers in the
// writer-preferring kind only.
LockMode ReadMode(const pthread_rwlock_t* rw) {
  return KindOf(rw) == Core::Kind::kWritersFirst ? LockMode::kReadQueued
                                                 : LockMode::kRead;
}

// Under PARKLOT_DEADLOCK or PARKLOT_PROFILE: takes `rw` as the lock-order
// graph and the wait-for check see it, and as the profile samples it:
// `try_lock()` first (0, EBUSY or an error), then, if busy, `lock(d)`, in
// slices under the detector (0 or an error). A try, not a lock with a
// deadline in the past: that one spins, may claim the writer bit and parks
// before it times out. Returns what the last call returned.
template <typename Try, typename F>
int Hooked(pthread_rwlock_t* rw, LockMode mode, const Deadline& d,
           const void* caller, Try try_lock, F lock) {
  if (DeadlockOn()) DeadlockBeforeLock(rw, mode, caller);
  int rc = try_lock();
  if (rc == EBUSY) {
    ProfileWait profiled(rw);
    if (DeadlockOn()) {
      AcquireWatched(rw, mode, caller, d, [&rc, &lock](const Deadline& slice) {
        rc = lock(slice);
        return rc != ETIMEDOUT;
      });
    } else {
      rc = lock(d);
    }
    if (rc == 0) profiled.Acquired();
  }
  if (rc == 0 && DeadlockOn()) DeadlockAcquired(rw, mode, caller);
  return rc;
}

// EDEADLK, as glibc, when the caller already holds the lock for writing.
int RdLock(pthread_rwlock_t* rw, const Deadline& d, const void* caller) {
  if (StatsOn()) CountOp(Op::kRwlockLock);
  if (Core::HeldExclusivelyByCurrentThread(Word(rw))) return EDEADLK;
  if ((g_lock_hooks & (kHookDeadlock | kHookProfile)) != 0) {
    return Hooked(
        rw, ReadMode(rw), d, caller,
        [rw] { return Core::TryLockShared(Word(rw)); },
        [rw](const Deadline& dl) {
          return Core::LockShared(Word(rw), Ema(rw), dl);
        });
  }
  return Core::LockShared(Word(rw), Ema(rw), d);
}

// glibc's record of the writer holding `rw` (__cur_writer: its kernel
// thread id, 0 otherwise), for debuggers and glibc's pretty printers, as
// NoteMutexOwner (shim.h). Written by the writer alone, after it took the
// lock and before it releases it. Returns `rc`.
int NoteWriter(pthread_rwlock_t* rw, int rc) {
  if (rc != 0) return rc;
  rw->__data.__cur_writer = HolderTid();
  return 0;
}

int WrLock(pthread_rwlock_t* rw, const Deadline& d, const void* caller) {
  if (StatsOn()) CountOp(Op::kRwlockLock);
  if (Core::HeldExclusivelyByCurrentThread(Word(rw))) return EDEADLK;
  if ((g_lock_hooks & (kHookDeadlock | kHookProfile)) != 0) {
    return NoteWriter(
        rw, Hooked(
                rw, LockMode::kWrite, d, caller,
                [rw] { return Core::TryLock(Word(rw)); },
                [rw](const Deadline& dl) {
                  return Core::Lock(Word(rw), Ema(rw), KindOf(rw), dl);
                }));
  }
  return NoteWriter(rw, Core::Lock(Word(rw), Ema(rw), KindOf(rw), d));
}

int TimedRdLock(pthread_rwlock_t* rw, clockid_t clock,
                const struct timespec* abstime, const void* caller) {
  Deadline d = Deadline::Never();
  if (const int rc = DeadlineOf(abstime, clock, &d); rc != 0) return rc;
  return RdLock(rw, d, caller);
}

int TimedWrLock(pthread_rwlock_t* rw, clockid_t clock,
                const struct timespec* abstime, const void* caller) {
  Deadline d = Deadline::Never();
  if (const int rc = DeadlineOf(abstime, clock, &d); rc != 0) return rc;
  return WrLock(rw, d, caller);
}

}  // namespace
}  // namespace parklot::internal::preload

using namespace parklot;           // NOLINT
using namespace parklot::internal;  // NOLINT
using namespace parklot::internal::preload;  // NOLINT

extern "C" {

int pthread_rwlock_init(pthread_rwlock_t* rw,
                        const pthread_rwlockattr_t* attr) {
  // glibc validates the attributes, zeroes the lock and records the kind
  // and pshared flag. Its function by lookup, not by name: the shim exports
  // __pthread_rwlock_* itself (symbol_versions.h).
  const int rc = RealGlibc().pthread_rwlock_init(rw, attr);
  // A new lock at this address.
  if (DeadlockOn() && rc == 0) DeadlockForget(rw);
  return rc;
}

int pthread_rwlock_destroy(pthread_rwlock_t* rw) {
  if (GlibcOwned(rw)) return RealGlibc().pthread_rwlock_destroy(rw);
  // glibc 2.36's destroy does nothing and returns 0, also for a held lock
  // or one with waiters (POSIX allows EBUSY there; programs check for 0).
  if (DeadlockOn()) DeadlockForget(rw);
  return 0;
}

int pthread_rwlock_rdlock(pthread_rwlock_t* rw) {
  if (GlibcOwned(rw)) return RealGlibc().pthread_rwlock_rdlock(rw);
  return RdLock(rw, Deadline::Never(), __builtin_return_address(0));
}

int pthread_rwlock_timedrdlock(pthread_rwlock_t* rw,
                               const struct timespec* abstime) {
  if (GlibcOwned(rw)) return RealGlibc().pthread_rwlock_timedrdlock(rw, abstime);
  return TimedRdLock(rw, CLOCK_REALTIME, abstime, __builtin_return_address(0));
}

int pthread_rwlock_clockrdlock(pthread_rwlock_t* rw, clockid_t clock,
                               const struct timespec* abstime) {
  if (GlibcOwned(rw)) return RealGlibc().pthread_rwlock_clockrdlock(rw, clock, abstime);
  return TimedRdLock(rw, clock, abstime, __builtin_return_address(0));
}

int pthread_rwlock_tryrdlock(pthread_rwlock_t* rw) {
  if (GlibcOwned(rw)) return RealGlibc().pthread_rwlock_tryrdlock(rw);
  const int rc = Core::TryLockShared(Word(rw));
  if (StatsOn() && rc == 0) CountOp(Op::kRwlockLock);
  if (DeadlockOn() && rc == 0) {
    DeadlockAcquired(rw, ReadMode(rw), __builtin_return_address(0));
  }
  return rc;
}

int pthread_rwlock_wrlock(pthread_rwlock_t* rw) {
  if (GlibcOwned(rw)) return RealGlibc().pthread_rwlock_wrlock(rw);
  return WrLock(rw, Deadline::Never(), __builtin_return_address(0));
}

int pthread_rwlock_timedwrlock(pthread_rwlock_t* rw,
                               const struct timespec* abstime) {
  if (GlibcOwned(rw)) return RealGlibc().pthread_rwlock_timedwrlock(rw, abstime);
  return TimedWrLock(rw, CLOCK_REALTIME, abstime, __builtin_return_address(0));
}

int pthread_rwlock_clockwrlock(pthread_rwlock_t* rw, clockid_t clock,
                               const struct timespec* abstime) {
  if (GlibcOwned(rw)) return RealGlibc().pthread_rwlock_clockwrlock(rw, clock, abstime);
  return TimedWrLock(rw, clock, abstime, __builtin_return_address(0));
}

int pthread_rwlock_trywrlock(pthread_rwlock_t* rw) {
  if (GlibcOwned(rw)) return RealGlibc().pthread_rwlock_trywrlock(rw);
  const int rc = NoteWriter(rw, Core::TryLock(Word(rw)));
  if (StatsOn() && rc == 0) CountOp(Op::kRwlockLock);
  if (DeadlockOn() && rc == 0) {
    DeadlockAcquired(rw, LockMode::kWrite, __builtin_return_address(0));
  }
  return rc;
}

int pthread_rwlock_unlock(pthread_rwlock_t* rw) {
  if (GlibcOwned(rw)) return RealGlibc().pthread_rwlock_unlock(rw);
  std::atomic<uint64_t>* word = Word(rw);
  if (Core::HeldExclusivelyByCurrentThread(word)) {
    if (DeadlockOn()) DeadlockReleased(rw);
    if (ProfileOn()) ProfileRelease(rw, __builtin_return_address(0));
    rw->__data.__cur_writer = 0;
    // glibc's write unlock hands over to a waiting writer in this kind.
    Core::Unlock(word, KindOf(rw) == Core::Kind::kWritersFirst);
    return 0;
  }
  // Readers are not tracked per thread (neither does glibc): a read unlock
  // needs only a reader to release. An unheld lock (or a write lock held
  // by another thread) is EPERM, which POSIX allows; glibc 2.36 returns 0
  // and corrupts its reader count (README, differences from glibc).
  if (Core::ReaderCount(word) == 0) return EPERM;
  if (DeadlockOn()) DeadlockReleased(rw);
  if (ProfileOn()) ProfileRelease(rw, __builtin_return_address(0));
  Core::UnlockShared(word);
  return 0;
}

}  // extern "C"
