// pthread_mutex_* and C11 mtx_* in place on glibc's pthread_mutex_t.
#include <errno.h>
#include <sys/single_threaded.h>
#include <threads.h>

#include "preload/diag/deadlock.h"
#include "preload/diag/profile.h"
#include "preload/shim.h"
#include "preload/symbol_versions.h"
#include "sync/mutex.h"

namespace parklot::internal::preload {

namespace {
// A clone(CLONE_VM) task was made: the constructor must not start the
// single-threaded path.
bool g_shared_memory_task = false;
}  // namespace

bool StillSingleThreaded() {
  if (__libc_single_threaded) return true;
  __atomic_fetch_and(&g_lock_hooks, static_cast<uint8_t>(~kHookSingleThreaded),
                     __ATOMIC_RELAXED);
  return false;
}

void SharedMemoryTaskMade() {
  __atomic_store_n(&g_shared_memory_task, true, __ATOMIC_RELAXED);
  __atomic_fetch_and(&g_lock_hooks, static_cast<uint8_t>(~kHookSingleThreaded),
                     __ATOMIC_RELAXED);
}

void StartSingleThreadedPath() {
  if (__libc_single_threaded &&
      !__atomic_load_n(&g_shared_memory_task, __ATOMIC_RELAXED)) {
    SetLockHooks(kHookSingleThreaded);
  }
}

namespace {

// Normal and adaptive mutexes: no owner checks, the common case.
inline bool IsPlainKind(int kind) {
  const int k = kind & ~kKindElision;
  return k == PTHREAD_MUTEX_NORMAL || k == PTHREAD_MUTEX_ADAPTIVE_NP;
}

// The re-lock of an owner-checked mutex by its holder: EDEADLK for the
// error-checking kind, else the recursive count raised (EAGAIN at its
// limit), as glibc's.
int Relock(pthread_mutex_t* m, int type) {
  if (type == PTHREAD_MUTEX_ERRORCHECK) return EDEADLK;
  if (m->__data.__count + 1 == 0) return EAGAIN;
  ++m->__data.__count;
  return 0;
}

// Locks a mutex the shim runs. `timed`: a timed lock, whose `abstime` is
// checked only if the lock would block (POSIX, glibc); a null `abstime`
// waits without a deadline, as glibc's timed locks do.
__attribute__((noinline)) int LockSlow(pthread_mutex_t* m,
                                       const struct timespec* abstime,
                                       clockid_t clock, bool timed,
                                       const void* caller) {
  const int type = ShimMutexType(m->__data.__kind);
  if (type < 0) return EINVAL;
  std::atomic<uint32_t>* word = MutexWord(m);
  if (type == PTHREAD_MUTEX_RECURSIVE || type == PTHREAD_MUTEX_ERRORCHECK) {
    if (MutexCore::HeldByCurrentThread(word, MutexMetaOf(m))) {
      return Relock(m, type);
    }
  }
  if (DeadlockOn()) DeadlockBeforeLock(m, LockMode::kExclusive, caller);
  if (MutexCore::LockFastOneStep(word, MutexMetaOf(m))) {
    NoteMutexOwner(m);
    if (type == PTHREAD_MUTEX_RECURSIVE) m->__data.__count = 1;
    if (StatsOn()) RecordAcquire(m, false, 0, caller);
    if (DeadlockOn()) DeadlockAcquired(m, LockMode::kExclusive, caller);
    return 0;
  }
  Deadline deadline = Deadline::Never();
  if (timed && !IsNull(abstime)) {
    if (!ValidTimespec(abstime)) return EINVAL;
    deadline = ProgramDeadline(*abstime, clock);
  }
  const int64_t t0 = StatsOn() ? MonotonicNanos() : 0;
  ProfileWait profiled(m);
  const bool ok =
      DeadlockOn()
          ? AcquireWatched(m, LockMode::kExclusive, caller, deadline,
                           [m, word](const Deadline& d) {
                             return MutexCore::LockSlow(word, MutexMetaOf(m), d);
                           })
          : MutexCore::LockSlow(word, MutexMetaOf(m), deadline);
  if (!ok) return ETIMEDOUT;
  NoteMutexOwner(m);
  profiled.Acquired();
  if (type == PTHREAD_MUTEX_RECURSIVE) m->__data.__count = 1;
  if (StatsOn()) RecordAcquire(m, true, MonotonicNanos() - t0, caller);
  if (DeadlockOn()) DeadlockAcquired(m, LockMode::kExclusive, caller);
  return 0;
}

// After glibc's lock, trylock or timed lock of a mutex glibc runs returned
// `rc`: under PARKLOT_DEADLOCK, lists it as held unless it was a recursive
// re-lock. Returns `rc`.
int GlibcAcquired(pthread_mutex_t* m, int rc, const void* caller) {
  if (DeadlockOn() && (rc == 0 || rc == EOWNERDEAD) && m->__data.__count <= 1) {
    DeadlockAcquired(m, LockMode::kExclusive, caller);
  }
  return rc;
}

// A mutex glibc runs (robust, process-shared, priority), locked under
// PARKLOT_DEADLOCK: in slices of glibc's timed lock, so that a long wait
// checks for a deadlock. Returns what glibc's lock would.
__attribute__((noinline)) int GlibcLockWatched(pthread_mutex_t* m,
                                               const void* caller) {
  // A lock the thread holds (recursive re-lock, EDEADLK) adds no edge.
  DeadlockBeforeLock(m, LockMode::kExclusive, caller);
  int rc = 0;
  AcquireWatched(m, LockMode::kExclusive, caller, Deadline::Never(),
                 [m, &rc](const Deadline&) {
                   // The slice passed is kDeadlockCheckAfterNs from now
                   // (the user deadline is Never), on CLOCK_MONOTONIC;
                   // glibc's priority-inheritance mutexes take no clock but
                   // CLOCK_REALTIME on every kernel, so the same slice is
                   // measured on CLOCK_REALTIME.
                   const struct timespec ts =
                       Deadline::RealtimeAt(SaturatingAdd(
                                                ClockNanos(CLOCK_REALTIME),
                                                kDeadlockCheckAfterNs))
                           .ToTimespec();
                   rc = RealGlibc().pthread_mutex_timedlock(m, &ts);
                   return rc != ETIMEDOUT;
                 });
  return GlibcAcquired(m, rc, caller);
}

int Timedlock(pthread_mutex_t* m, clockid_t clock,
              const struct timespec* abstime, const void* caller) {
  if (MutexIsGlibcOwned(m)) {
    return GlibcAcquired(m, RealGlibc().pthread_mutex_clocklock(m, clock, abstime),
                         caller);
  }
  if (!ValidClock(clock)) return EINVAL;
  return LockSlow(m, abstime, clock, true, caller);
}

// A contended plain mutex with profiling alone on: out of line, so that
// LockOther's frame holds no ProfileWait.
__attribute__((noinline)) int LockProfiled(pthread_mutex_t* m) {
  ProfileWait profiled(m);
  MutexCore::LockSlow(MutexWord(m), MutexMetaOf(m), Deadline::Never());
  NoteMutexOwner(m);
  profiled.Acquired();
  return 0;
}

// The owner-checked kinds (recursive, error-checking) with no hooks on:
// a re-lock, or the uncontended lock as one step (LockFastOneStep; with
// `single`, LockFastOneStepSingleThreaded). -1 where the lock is taken
// elsewhere (LockSlow: contended).
template <bool single>
[[gnu::always_inline]] inline int LockOwnerCheckedFast(pthread_mutex_t* m,
                                                       int type) {
  std::atomic<uint32_t>* word = MutexWord(m);
  MutexMeta* meta = MutexMetaOf(m);
  const uint32_t slot = CurrentSlot();
  if (MutexCore::IsLocked(word) &&
      meta->owner.load(std::memory_order_relaxed) == slot) {
    return Relock(m, type);
  }
  if (!(single ? MutexCore::LockFastOneStepSingleThreaded(word, meta, slot)
               : MutexCore::LockFastOneStepAs(word, meta, slot))) {
    return -1;
  }
  NoteMutexOwner(m);
  if (type == PTHREAD_MUTEX_RECURSIVE) m->__data.__count = 1;
  return 0;
}

// LockOwnerCheckedFast in a process with one thread so far, with plain
// stores as glibc's: out of line, so that LockOther's frame stays small.
__attribute__((noinline)) int LockOwnerCheckedSingleThreaded(pthread_mutex_t* m,
                                                            int type) {
  if (!StillSingleThreaded()) return LockOwnerCheckedFast<false>(m, type);
  return LockOwnerCheckedFast<true>(m, type);
}

// pthread_mutex_lock past its uncontended fast path: contended plain
// mutexes (adaptive spinning is parklot's default for normal and adaptive
// kinds), hooks, other kinds, mutexes glibc runs. A dispatcher with a
// small frame: what needs a large one (timed and watched locks, profiling)
// is out of line.
__attribute__((noinline)) int LockOther(pthread_mutex_t* m,
                                        const void* caller) {
  // Under Valgrind (the step-aside bit of g_lock_hooks failed the fast
  // path's test): glibc's, as every served name then is (surface.h).
  if (__builtin_expect(SteppingAside(), 0)) {
    return RealGlibc().pthread_mutex_lock(m);
  }
  const int kind = m->__data.__kind;
  if (IsPlainKind(kind)) {
    // The single-threaded path was on but glibc now counts a second
    // thread: the path ends, and the compare-and-swap pthread_mutex_lock
    // left out comes now. (Still one thread: the word was taken.)
    if ((g_lock_hooks & kLockFastPathOff) == kHookSingleThreaded &&
        !StillSingleThreaded() &&
        MutexCore::LockFast(MutexWord(m), MutexMetaOf(m))) {
      NoteMutexOwner(m);
      return 0;
    }
    if ((g_lock_hooks & ~kHookSingleThreaded) == 0) {
      // pthread_mutex_lock's compare-and-swap failed: no second one.
      MutexCore::LockSlow(MutexWord(m), MutexMetaOf(m), Deadline::Never());
      NoteMutexOwner(m);
      return 0;
    }
    // Profiling alone, and the compare-and-swap failed: contended.
    if ((g_lock_hooks & kLockHooks) == 0) return LockProfiled(m);
  } else if (kind != kKindDestroyed && (kind & kKindGlibcOwned)) {
    if (DeadlockOn()) return GlibcLockWatched(m, caller);
    return __pthread_mutex_lock(m);
  } else if (const int type = ShimMutexType(kind);
             (g_lock_hooks & ~kHookSingleThreaded) == 0 &&
             (type == PTHREAD_MUTEX_RECURSIVE ||
                                   type == PTHREAD_MUTEX_ERRORCHECK)) {
    const int rc = (g_lock_hooks & kHookSingleThreaded) != 0
                       ? LockOwnerCheckedSingleThreaded(m, type)
                       : LockOwnerCheckedFast<false>(m, type);
    if (rc >= 0) return rc;
  }
  return LockSlow(m, nullptr, CLOCK_REALTIME, false, caller);
}

// The unlock hooks (kUnlockHooks), before the release: out of line, so
// that the unlock fast path tests one byte and calls nothing (inlined,
// they cost it a callee-saved register). `site`: the program's call of
// unlock (pthread_mutex_unlock jumps to ShimMutexUnlock, whose return
// address it is).
__attribute__((noinline)) void UnlockHooks(pthread_mutex_t* m,
                                           const void* site) {
  if (DeadlockOn()) DeadlockReleased(m);
  if (ProfileOn()) ProfileRelease(m, site);
}

}  // namespace

namespace {

// ShimMutexUnlock of a plain kind with a bit of kUnlockFastPathOff set:
// out of line, as UnlockOther. `site`: the program's call of unlock.
__attribute__((noinline)) int UnlockPlainOther(pthread_mutex_t* m,
                                               const void* site) {
  if (SteppingAside()) return RealGlibc().pthread_mutex_unlock(m);
  if ((g_lock_hooks & kUnlockHooks) != 0) UnlockHooks(m, site);
  ClearMutexOwner(m);
  // One thread so far: glibc's single-threaded path.
  if ((g_lock_hooks & kHookSingleThreaded) != 0 && StillSingleThreaded() &&
      MutexCore::UnlockFastSingleThreaded(MutexWord(m), MutexMetaOf(m))) {
    return 0;
  }
  MutexCore::Unlock(MutexWord(m), MutexMetaOf(m));
  return 0;
}

// ShimMutexUnlock past the plain kinds: out of line, so that the plain
// unlock's frame saves no register. `site`: the program's call of unlock.
__attribute__((noinline)) int UnlockOther(pthread_mutex_t* m,
                                          const void* site) {
  if (__builtin_expect(SteppingAside(), 0)) {
    return RealGlibc().pthread_mutex_unlock(m);
  }
  if (MutexIsGlibcOwned(m)) {
    // A recursive one held more than once stays held.
    if (DeadlockOn() && m->__data.__count <= 1) DeadlockReleased(m);
    return __pthread_mutex_unlock(m);
  }
  const int type = ShimMutexType(m->__data.__kind);
  if (type < 0) return EINVAL;
  std::atomic<uint32_t>* word = MutexWord(m);
  if (type == PTHREAD_MUTEX_NORMAL || type == PTHREAD_MUTEX_ADAPTIVE_NP) {
    if ((g_lock_hooks & kUnlockHooks) != 0) UnlockHooks(m, site);
    ClearMutexOwner(m);
    MutexCore::Unlock(word, MutexMetaOf(m));  // with unused kind bits set: still no check
    return 0;
  }
  if (!MutexCore::HeldByCurrentThread(word, MutexMetaOf(m))) return EPERM;
  if (type == PTHREAD_MUTEX_RECURSIVE && --m->__data.__count != 0) return 0;
  if ((g_lock_hooks & kUnlockHooks) != 0) UnlockHooks(m, site);
  ClearMutexOwner(m);
  if ((g_lock_hooks & kHookSingleThreaded) == 0 || !StillSingleThreaded() ||
      !MutexCore::UnlockOneStepSingleThreaded(word, MutexMetaOf(m))) {
    MutexCore::UnlockOneStep(word, MutexMetaOf(m));
  }
  return 0;
}

}  // namespace

int ShimMutexUnlock(pthread_mutex_t* m) {
  if (__builtin_expect(IsPlainKind(m->__data.__kind), 1)) {
    // Normal and adaptive: as glibc, no owner check (a foreign unlock
    // releases the lock). One test for the unlock hooks, the step-aside
    // bit (Valgrind: glibc's unlock, as every served name then is) and
    // the single-threaded path, the fast path's only test of g_lock_hooks.
    const uint8_t off = g_lock_hooks & kUnlockFastPathOff;
    if (__builtin_expect(off != 0, 0)) {
      if (off != kHookSingleThreaded || !__libc_single_threaded) {
        return UnlockPlainOther(m, __builtin_return_address(0));
      }
      ClearMutexOwner(m);
      if (MutexCore::UnlockFastSingleThreaded(MutexWord(m), MutexMetaOf(m))) {
        return 0;
      }
    } else {
      ClearMutexOwner(m);
    }
    MutexCore::Unlock(MutexWord(m), MutexMetaOf(m));
    return 0;
  }
  return UnlockOther(m, __builtin_return_address(0));
}

}  // namespace parklot::internal::preload

using namespace parklot;           // NOLINT
using namespace parklot::internal;  // NOLINT
using namespace parklot::internal::preload;  // NOLINT

extern "C" {

int pthread_mutex_init(pthread_mutex_t* m, const pthread_mutexattr_t* attr) {
  // glibc validates the attributes and encodes them in __kind; its
  // zero-filled lock word is an unlocked MutexCore word.
  const int rc = __pthread_mutex_init(m, attr);
  if (DeadlockOn() && rc == 0) DeadlockForget(m);  // a new lock at this address
  return rc;
}

int pthread_mutex_destroy(pthread_mutex_t* m) {
  if (MutexIsGlibcOwned(m)) {
    const int rc = __pthread_mutex_destroy(m);
    if (DeadlockOn() && rc == 0) DeadlockForget(m);
    return rc;
  }
  // As glibc, whose __nusers counts the holder and the threads inside a
  // condvar wait with the mutex: EBUSY while either exists. Destroying a
  // destroyed mutex again is 0 there too.
  if (MutexCore::IsLocked(MutexWord(m)) ||
      MutexCondWaiters(m)->load(std::memory_order_relaxed) != 0) {
    return EBUSY;
  }
  // As glibc: a destroyed mutex reports EINVAL until re-initialized.
  m->__data.__kind = kKindDestroyed;
  if (DeadlockOn()) DeadlockForget(m);
  return 0;
}

int pthread_mutex_lock(pthread_mutex_t* m) {
  // The uncontended lock of a normal or adaptive mutex with no hooks (or
  // profiling alone): one compare-and-swap, in a frame that saves no
  // callee-saved register; while the process has one thread, plain stores
  // instead, as glibc's (kHookSingleThreaded).
  if (__builtin_expect(IsPlainKind(m->__data.__kind), 1)) {
    const uint8_t off = g_lock_hooks & kLockFastPathOff;
    if (__builtin_expect(off == 0, 1)
            ? __builtin_expect(MutexCore::LockFast(MutexWord(m), MutexMetaOf(m)), 1)
            : off == kHookSingleThreaded && __libc_single_threaded &&
                  MutexCore::LockFastSingleThreaded(MutexWord(m),
                                                    MutexMetaOf(m))) {
      NoteMutexOwner(m);
      return 0;
    }
  }
  return LockOther(m, __builtin_return_address(0));
}

int pthread_mutex_trylock(pthread_mutex_t* m) {
  if (MutexIsGlibcOwned(m)) {
    return GlibcAcquired(m, __pthread_mutex_trylock(m),
                         __builtin_return_address(0));
  }
  const int type = ShimMutexType(m->__data.__kind);
  if (type < 0) return EINVAL;
  std::atomic<uint32_t>* word = MutexWord(m);
  if (type == PTHREAD_MUTEX_RECURSIVE && MutexCore::HeldByCurrentThread(word, MutexMetaOf(m))) {
    return Relock(m, type);
  }
  // glibc's errorcheck trylock on a mutex the caller holds is EBUSY too.
  // The owner-checked kinds record their holder in the same step.
  const bool taken = type == PTHREAD_MUTEX_RECURSIVE ||
                             type == PTHREAD_MUTEX_ERRORCHECK
                         ? MutexCore::TryLockOneStep(word, MutexMetaOf(m))
                         : MutexCore::TryLock(word, MutexMetaOf(m));
  if (!taken) return EBUSY;
  NoteMutexOwner(m);
  if (type == PTHREAD_MUTEX_RECURSIVE) m->__data.__count = 1;
  if (StatsOn()) RecordAcquire(m, false, 0, __builtin_return_address(0));
  if (DeadlockOn()) {
    DeadlockAcquired(m, LockMode::kExclusive, __builtin_return_address(0));
  }
  return 0;
}

int pthread_mutex_timedlock(pthread_mutex_t* m,
                            const struct timespec* abstime) {
  if (MutexIsGlibcOwned(m)) {
    return GlibcAcquired(m, RealGlibc().pthread_mutex_timedlock(m, abstime),
                         __builtin_return_address(0));
  }
  return Timedlock(m, CLOCK_REALTIME, abstime, __builtin_return_address(0));
}

int pthread_mutex_clocklock(pthread_mutex_t* m, clockid_t clock,
                            const struct timespec* abstime) {
  return Timedlock(m, clock, abstime, __builtin_return_address(0));
}

int pthread_mutex_unlock(pthread_mutex_t* m) { return ShimMutexUnlock(m); }

// C11 threads (glibc implements them without the pthread symbols).
int mtx_init(mtx_t* mtx, int type) {
  // As glibc 2.36: exactly mtx_plain or mtx_timed with mtx_recursive make
  // a recursive mutex; every other type, unknown ones included, a normal
  // one (no thrd_error).
  const bool recursive = type == (mtx_plain | mtx_recursive) ||
                         type == (mtx_timed | mtx_recursive);
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_settype(
      &attr, recursive ? PTHREAD_MUTEX_RECURSIVE : PTHREAD_MUTEX_NORMAL);
  const int rc =
      pthread_mutex_init(reinterpret_cast<pthread_mutex_t*>(mtx), &attr);
  pthread_mutexattr_destroy(&attr);
  return rc == 0 ? thrd_success : thrd_error;
}

void mtx_destroy(mtx_t* mtx) {
  pthread_mutex_destroy(reinterpret_cast<pthread_mutex_t*>(mtx));
}

int mtx_lock(mtx_t* mtx) {
  return pthread_mutex_lock(reinterpret_cast<pthread_mutex_t*>(mtx)) == 0
             ? thrd_success
             : thrd_error;
}

int mtx_trylock(mtx_t* mtx) {
  const int rc = pthread_mutex_trylock(reinterpret_cast<pthread_mutex_t*>(mtx));
  return rc == 0 ? thrd_success : rc == EBUSY ? thrd_busy : thrd_error;
}

int mtx_timedlock(mtx_t* __restrict mtx,
                  const struct timespec* __restrict abstime) {
  // As glibc's: pthread_mutex_timedlock's lock on CLOCK_REALTIME. Not by
  // calling it: <pthread.h> declares its abstime nonnull, and a null one
  // must reach Timedlock, which answers it as glibc does.
  const int rc = Timedlock(reinterpret_cast<pthread_mutex_t*>(mtx),
                           CLOCK_REALTIME, abstime, __builtin_return_address(0));
  return rc == 0 ? thrd_success : rc == ETIMEDOUT ? thrd_timedout : thrd_error;
}

int mtx_unlock(mtx_t* mtx) {
  return pthread_mutex_unlock(reinterpret_cast<pthread_mutex_t*>(mtx)) == 0
             ? thrd_success
             : thrd_error;
}

}  // extern "C"

// glibc's __pthread_mutex_lock/unlock@GLIBC_2.2.5 (symbol_versions.h):
// aliases of the functions above, which are exported as themselves.
PARKLOT_VERSIONS_MUTEX_HOOKED;
