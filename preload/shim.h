// Internals shared by the preload shim's translation units.
//
// State lives in place inside glibc's objects (no side table):
//   pthread_mutex_t  __lock   MutexCore word, in glibc's values (0 free,
//                             1 locked, 2 locked with waiters)
//                    __count  recursion depth (recursive kind)
//                    __owner  the holder's thread id, as glibc keeps it
//                    __list   __prev: MutexMeta (spin moving average,
//                             holder's registry slot); __next: the deadlock
//                             detector's generation (glibc: robust links)
//                    __kind   glibc's kind word, set by glibc's init or a
//                             static initializer; read to dispatch
//                    __spins, __elision (4 bytes at offset 20): threads
//                             inside a condvar wait with the mutex (glibc's
//                             __nusers counts them: destroy's EBUSY)
//   pthread_cond_t   __wseq   CondVarCore word (8 bytes at offset 0)
//                    __wrefs  glibc's attribute bits: 1 pshared, 2 monotonic
// Objects whose kind glibc alone implements (process-shared, robust,
// priority-inherit/protect) go to glibc's own functions for their life.
// Every entry point is thread-safe as its POSIX counterpart is.
//
// Signal handlers (docs/design.md section 6, invariant 6). What POSIX makes
// async-signal-safe stays so under the shim: sem_post (Semaphore::Release,
// through UnparkUpTo), and, with PARKLOT_SYSCALL_FUTEX=1, what the kernel
// serves safely in a handler: FUTEX_WAKE and FUTEX_WAKE_BITSET (UnparkUpTo
// again; the other served operations take bucket locks with callbacks and
// are not safe in a handler that interrupted the lot). Each may run at any
// instruction of any parklot path of the interrupted thread, including
// while it holds the very bucket the wake needs: the wake is then deferred
// to the end of that thread's lock section. pthread_mutex_*, pthread_cond_*,
// rwlocks, barriers and once are not async-signal-safe (POSIX), and are
// not made so: from a handler that interrupted the lot's locked region a
// contended one may wait for its own thread. Every handler the program
// installs through sigaction/signal/sysv_signal/sigset runs inside a
// wrapper (signal_shim.cc) that marks a queued thread away, so that a
// handler leaving a wait by siglongjmp leaves no record that receives a
// handoff; the record is removed by the next unpark that meets it, the
// thread's next park, or its exit.
#ifndef PARKLOT_PRELOAD_SHIM_H_
#define PARKLOT_PRELOAD_SHIM_H_

#include <dlfcn.h>  // Lmid_t
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "preload/surface.h"
#include "runtime/deadline.h"
#include "sync/mutex_core.h"

namespace parklot::internal::preload {

// glibc's kind bits (nptl/pthreadP.h).
inline constexpr int kKindMask = 3;  // normal, recursive, errorcheck, adaptive
inline constexpr int kKindRobust = 16;
inline constexpr int kKindPrioInherit = 32;
inline constexpr int kKindPrioProtect = 64;
inline constexpr int kKindPshared = 128;
inline constexpr int kKindElision = 256 | 512;
inline constexpr int kKindGlibcOwned =
    kKindRobust | kKindPrioInherit | kKindPrioProtect | kKindPshared;
inline constexpr int kKindDestroyed = -1;

inline constexpr unsigned kCondPshared = 1;
inline constexpr unsigned kCondMonotonic = 2;

inline std::atomic<uint32_t>* MutexWord(pthread_mutex_t* m) {
  return reinterpret_cast<std::atomic<uint32_t>*>(&m->__data.__lock);
}
inline MutexMeta* MutexMetaOf(pthread_mutex_t* m) {
  static_assert(offsetof(__pthread_mutex_s, __list) == 24 &&
                    sizeof(m->__data.__list) >= sizeof(MutexMeta) &&
                    alignof(MutexMeta) <= 8,
                "__list holds a MutexMeta");
  return reinterpret_cast<MutexMeta*>(&m->__data.__list);
}
inline std::atomic<uint32_t>* MutexCondWaiters(pthread_mutex_t* m) {
  static_assert(offsetof(__pthread_mutex_s, __spins) == 20 &&
                    sizeof(m->__data.__spins) + sizeof(m->__data.__elision) ==
                        sizeof(uint32_t),
                "__spins and __elision make one aligned 32-bit word");
  return reinterpret_cast<std::atomic<uint32_t>*>(&m->__data.__spins);
}
inline std::atomic<uintptr_t>* CondWord(pthread_cond_t* c) {
  return reinterpret_cast<std::atomic<uintptr_t>*>(c);
}
inline bool MutexIsGlibcOwned(const pthread_mutex_t* m) {
  return m->__data.__kind != kKindDestroyed &&
         (m->__data.__kind & kKindGlibcOwned) != 0;
}
// The type (PTHREAD_MUTEX_NORMAL, _RECURSIVE, _ERRORCHECK, _ADAPTIVE_NP) of
// a mutex the shim runs (not MutexIsGlibcOwned), or -1 where glibc's lock,
// trylock, unlock and cond waits return EINVAL: a destroyed mutex (-1) or
// bit 4 or 8 set (no such kind). Elision hints and bits above glibc's kind
// mask are ignored, as glibc's functions ignore them.
inline int ShimMutexType(int kind) {
  return (kind & 12) != 0 ? -1 : kind & kKindMask;
}
inline bool CondIsGlibcOwned(const pthread_cond_t* c) {
  return (c->__data.__wrefs & kCondPshared) != 0;
}

// glibc's implementations of the served names (surface.h), for the objects
// the shim hands to glibc and, under Valgrind, for every call: a member per
// table row, named as the function (RealGlibc().pthread_mutex_lock).
// Resolved by dlvsym with the version programs bind to, once, in the shim's
// constructor (or at first need if a call precedes it); the rows only the
// step-aside forwarders use stay null outside Valgrind.
struct Glibc {
#define PARKLOT_GLIBC_MEMBER(ret, name, params, ...) ret(*name) params;
#define PARKLOT_GLIBC_MEMBER_V(ret, name, params, ...) ret(*name) params;
  PARKLOT_SURFACE(PARKLOT_GLIBC_MEMBER, PARKLOT_GLIBC_MEMBER_V)
  PARKLOT_GLIBC_ALSO(PARKLOT_GLIBC_MEMBER)
#undef PARKLOT_GLIBC_MEMBER
#undef PARKLOT_GLIBC_MEMBER_V
};
const Glibc& RealGlibc();

// The calling thread's kernel thread id as glibc records it (struct
// pthread's tid, which glibc's own owner checks read), so that the shim's
// owner checks make no gettid system call glibc would not make (docs/design.md
// section 6, invariant 9). The field's offset is the one glibc publishes for
// debuggers (_thread_db_pthread_tid, GLIBC_PRIVATE), checked against gettid
// once by RealGlibc() at start-up; where it is missing or disagrees, gettid is
// called instead. Async-signal-safe; any thread.
pid_t CurrentTid();

// The offset of glibc's tid field from the thread pointer (struct pthread
// sits at %fs:0 on x86-64), or -1 where CurrentTid() could not check it.
// Written once by RealGlibc() at start-up.
extern long g_glibc_tid_offset;

// The calling thread's kernel thread id from glibc's field, without a
// call: two loads (0 before start-up resolved the offset). For glibc's
// records of a lock's holder below, which only outside readers use.
inline pid_t HolderTid() {
  const long offset = g_glibc_tid_offset;
  pid_t tid = 0;
  if (__builtin_expect(offset >= 0, 1)) {
    __asm__("movl %%fs:(%1), %0" : "=r"(tid) : "r"(offset));
  }
  return tid;
}

// glibc's record of a held mutex's owner (__owner: the holder's kernel
// thread id, 0 when free), kept for what reads it from outside: debuggers,
// core-file tools, glibc's pretty printers (docs/design.md §5.4). The shim's
// own owner checks use the lock word's registry slot. A plain store into
// the mutex's own cache line, made by the holder alone (after it took the
// lock, and before it releases it). rwlock_shim.cc keeps __cur_writer the
// same way.
inline void NoteMutexOwner(pthread_mutex_t* m) {
  m->__data.__owner = HolderTid();
}
inline void ClearMutexOwner(pthread_mutex_t* m) { m->__data.__owner = 0; }

// Whether `p` is null. glibc's headers declare the time arguments of the
// functions the shim defines nonnull, so the compiler would fold a plain
// test of them to false; it cannot see through this one.
inline bool IsNull(const void* p) {
  asm("" : "+r"(p));
  return p == nullptr;
}
// A timespec that POSIX accepts as an absolute time (not null).
inline bool ValidTimespec(const struct timespec* ts) {
  return !IsNull(ts) && ts->tv_nsec >= 0 && ts->tv_nsec < 1000000000;
}
inline bool ValidClock(clockid_t clock) {
  return clock == CLOCK_REALTIME || clock == CLOCK_MONOTONIC;
}

// The kernel's deadline for an absolute time `ts` the program gave on
// `clock`. The program reads time through the global clock_gettime, which a
// time-faking library preloaded after the shim (libfaketime) replaces;
// then `ts` is on that faked clock and is moved by (kernel now - program
// now), as libfaketime moves the deadlines of the waits it wraps. Without
// such a library it is `ts` as it is. `caller`: the return address of a
// wait libfaketime wraps (pthread_cond_timedwait, sem_timedwait); called
// from that library, the deadline is already the kernel's.
Deadline ProgramDeadline(const struct timespec& ts, clockid_t clock,
                         const void* caller = nullptr);
// Thread-safe (reads what the constructor set); not async-signal-safe
// when a faking library is present (dladdr takes the loader's lock), as
// the timed waits that call it are not.
//
// Called once by the constructor, before any thread: notes whether the
// program's clock_gettime is glibc's (ProgramDeadline). Not thread-safe.
void ResolveProgramClock();

// Whether system call `number` changes a thread's scheduling
// (sched_setscheduler, sched_setparam, sched_setattr): inline, so that
// syscall()'s other calls pay two compares.
inline bool SetsScheduling(long number) {
  return number == SYS_sched_setparam || number == SYS_sched_setscheduler ||
         number == SYS_sched_setattr;
}
// syscall() made such a call with arguments a1..a3 and the kernel returned
// 0: tells the lot (SchedulingChanged), as the shim's own functions of
// those names do (sched_shim.cc).
void NoteSchedulingSyscall(long number, long a1, long a2, long a3);

// The child part of ForkStep::kShimStandIns (runtime/fork.h, registered by
// init.cc): frees the stand-in mutexes of process-shared condvar waits
// (cond_shim.cc), which only threads now gone could hold.
void ResetStandInsInChild();

// The optional hooks of the lock paths, a bit each in one byte, so that
// the mutex lock and unlock fast paths test them all with one load. The
// step-aside bit is set at load, before any code of the shim or the
// libraries it needs runs (surface.cc); the others by the shim's
// constructor, before the program runs. Never cleared, but for
// kHookSingleThreaded. Hidden, with an
// assembler name the exported stubs (surface.cc) read it by.
#define PARKLOT_HOOK_STEP_ASIDE 4
inline constexpr uint8_t kHookStats = 1;     // PARKLOT_STATS (lock_stats.cc)
inline constexpr uint8_t kHookDeadlock = 2;  // PARKLOT_DEADLOCK (deadlock.h)
// Under Valgrind: every served name goes to glibc's own function
// (surface.h).
inline constexpr uint8_t kHookStepAside = PARKLOT_HOOK_STEP_ASIDE;
inline constexpr uint8_t kHookProfile = 8;   // PARKLOT_PROFILE (profile.h)
// Not a hook: the process has had one thread so far, and the plain
// mutexes' lock and unlock take the single-threaded path, as glibc's do
// (MutexCore::LockFastSingleThreaded; docs/design.md section 5.4). Set by
// the shim's constructor where glibc's __libc_single_threaded says so and
// no clone(CLONE_VM) task was made; cleared for good by the first lock or
// unlock that finds __libc_single_threaded false (glibc clears it before
// its first thread exists, whichever of its functions makes the thread)
// and by clone() before a task that shares the memory exists
// (SharedMemoryTaskMade). Not in kLockHooks or kUnlockHooks: the fast
// paths test it with them (kLockFastPathOff, kUnlockFastPathOff).
inline constexpr uint8_t kHookSingleThreaded = 16;
// The hooks an uncontended mutex lock runs (profiling samples contended
// acquisitions only), and those a mutex unlock runs: one test of the byte
// each, as for one hook. Stepping aside fails both fast paths.
inline constexpr uint8_t kLockHooks =
    kHookStats | kHookDeadlock | kHookStepAside;
inline constexpr uint8_t kUnlockHooks =
    kHookDeadlock | kHookProfile | kHookStepAside;
inline constexpr uint8_t kLockFastPathOff = kLockHooks | kHookSingleThreaded;
inline constexpr uint8_t kUnlockFastPathOff =
    kUnlockHooks | kHookSingleThreaded;
extern uint8_t g_lock_hooks __asm__("parklot_lock_hooks")
    __attribute__((visibility("hidden")));
// Sets hook bits `bits` (at start-up): atomic, as the clearing of
// kHookSingleThreaded (StillSingleThreaded, SharedMemoryTaskMade, any
// time, from any thread), so that neither loses the other.
inline void SetLockHooks(uint8_t bits) {
  __atomic_fetch_or(&g_lock_hooks, bits, __ATOMIC_RELAXED);
}
// Whether the single-threaded path may be taken now: glibc still says
// the process has one thread. Where it does not, the bit is cleared.
// Async-signal-safe.
bool StillSingleThreaded();
// clone() is about to make a task that shares the process's memory: the
// single-threaded path ends for good, and the constructor will not start
// it (clone_shim.cc).
void SharedMemoryTaskMade();
// The shim's constructor: starts the single-threaded path where the
// process has one thread.
void StartSingleThreadedPath();
inline bool StatsOn() { return (g_lock_hooks & kHookStats) != 0; }
inline bool DeadlockOn() { return (g_lock_hooks & kHookDeadlock) != 0; }
inline bool ProfileOn() { return (g_lock_hooks & kHookProfile) != 0; }
// Whether the shim steps aside (the process runs under Valgrind). Fixed
// for the process's life. Async-signal-safe; any time.
// Always inline: the lookup code runs it before ASan is initialized (its
// dlsym calls), where an out-of-line, instrumented copy would fault.
[[gnu::always_inline]] inline bool SteppingAside() {
  return (g_lock_hooks & kHookStepAside) != 0;
}

// Statistics (PARKLOT_STATS=1): the hooks.
void RecordAcquire(const void* lock, bool contended, int64_t wait_ns,
                   const void* caller);
// Operations the shim served itself (objects glibc keeps are not counted),
// for the report's "served by parklot" line.
enum class Op {
  kMutexLock,
  kCondWait,
  kCondSignal,
  kCondBroadcast,
  kRwlockLock,    // read or write, try and timed forms included
  kSemWait,       // sem_wait, sem_timedwait, sem_clockwait, sem_trywait
  kSemPost,
  kBarrierWait,
  kOnce,          // pthread_once, call_once
  kCount
};
void CountOp(Op op);

}  // namespace parklot::internal::preload

extern "C" {
// glibc's own mutex functions, through RealGlibc(). The shim defines these
// (glibc.cc), not exported: a reference to glibc's aliases of the same
// names would bind to the first library in the search order that defines
// them, and one preloaded ahead of the shim may. ASan's runtime does (it
// must come first): its interceptors of __pthread_mutex_lock/unlock call
// address 0, since glibc exports these aliases only as non-default symbol
// versions, which its dlsym lookup cannot see.
int __pthread_mutex_init(pthread_mutex_t*, const pthread_mutexattr_t*);
int __pthread_mutex_destroy(pthread_mutex_t*);
int __pthread_mutex_lock(pthread_mutex_t*);
int __pthread_mutex_trylock(pthread_mutex_t*);
int __pthread_mutex_unlock(pthread_mutex_t*);
}

#endif  // PARKLOT_PRELOAD_SHIM_H_
