// Unnamed POSIX semaphores (sem_init/sem_wait/...) on parklot::Semaphore,
// in place in glibc's 32-byte sem_t.
//
// Bytes 0-15 hold the Semaphore, bytes 24-31 a tag saying "parklot's"
// (glibc's own semaphore uses only bytes 0-15). Process-shared and named
// (sem_open) semaphores, and any sem_t not initialized by this sem_init,
// carry no tag and go to glibc for their whole life. sem_destroy keeps the
// tag (as glibc's destroy, it changes nothing).
#include <errno.h>
#include <semaphore.h>

#include <new>
#include <type_traits>

#include "preload/diag/profile.h"
#include "preload/shim.h"
#include "runtime/parking_lot.h"
#include "sync/semaphore.h"

namespace parklot::internal::preload {
namespace {

constexpr uint64_t kTag = 0x6d65732e746f6c70ull;  // arbitrary, unlikely

struct SemLayout {
  Semaphore sem;
  alignas(8) unsigned char unused[8];
  uint64_t tag;
};
static_assert(sizeof(SemLayout) <= sizeof(sem_t), "fits in sem_t");
static_assert(offsetof(SemLayout, tag) == 24, "tag in glibc's unused bytes");
static_assert(std::is_trivially_destructible_v<Semaphore>,
              "sem_destroy has nothing to release");

SemLayout* View(sem_t* s) { return reinterpret_cast<SemLayout*>(s); }
bool Ours(sem_t* s) { return View(s)->tag == kTag; }

int Fail(int err) {
  errno = err;
  return -1;
}

// sem_wait and the timed waits: a cancellation point ("shall occur", so
// checked even when a unit is available, as glibc does), EINTR after a
// signal handler by the kernel's futex rules.
int Wait(sem_t* s, const Deadline& deadline) {
  if (StatsOn()) CountOp(Op::kSemWait);
  pthread_testcancel();
  // Profiled: a unit taken at once was no contention; only a wait is.
  if (ProfileOn() && View(s)->sem.TryAcquire()) return 0;
  ProfileWait profiled(s);
  CancellationPoint cancellation_point;
  InterruptiblePark interruptible;
  const int rc = View(s)->sem.AcquireOrInterrupt(deadline);
  if (rc != 0) return Fail(rc);
  profiled.Acquired();
  return 0;
}

}  // namespace
}  // namespace parklot::internal::preload

using namespace parklot;           // NOLINT
using namespace parklot::internal;  // NOLINT
using namespace parklot::internal::preload;  // NOLINT

extern "C" {

int sem_init(sem_t* s, int pshared, unsigned value) {
  if (value > SEM_VALUE_MAX) return Fail(EINVAL);
  if (pshared != 0) {
    View(s)->tag = 0;
    return RealGlibc().sem_init(s, pshared, value);
  }
  new (&View(s)->sem) Semaphore(value);
  View(s)->tag = kTag;
  return 0;
}

int sem_destroy(sem_t* s) {
  // As glibc 2.36's, which does nothing: a semaphore destroyed while
  // threads wait on it, or posted afterwards (undefined in POSIX), keeps
  // working. It stays ours: glibc's functions cannot read our layout with
  // waiters on it (its sem_post aborted the program). Nothing to release
  // (Semaphore is trivially destructible); sem_init makes it anew.
  if (!Ours(s)) return RealGlibc().sem_destroy(s);
  return 0;
}

int sem_wait(sem_t* s) {
  if (!Ours(s)) return RealGlibc().sem_wait(s);
  return Wait(s, Deadline::Never());
}

int sem_timedwait(sem_t* __restrict s, const struct timespec* __restrict at) {
  // glibc 2.36 dereferences a null `at` (SIGSEGV); EINVAL, its answer to
  // every other invalid time, instead, also for its own semaphores.
  if (!ValidTimespec(at)) return Fail(EINVAL);
  if (!Ours(s)) return RealGlibc().sem_timedwait(s, at);
  return Wait(s, ProgramDeadline(*at, CLOCK_REALTIME, __builtin_return_address(0)));
}

int sem_clockwait(sem_t* __restrict s, clockid_t clock,
                  const struct timespec* __restrict at) {
  // As sem_timedwait (glibc checks the clock first).
  if (!ValidClock(clock) || !ValidTimespec(at)) return Fail(EINVAL);
  if (!Ours(s)) return RealGlibc().sem_clockwait(s, clock, at);
  return Wait(s, ProgramDeadline(*at, clock));
}

int sem_trywait(sem_t* s) {
  if (!Ours(s)) return RealGlibc().sem_trywait(s);
  if (StatsOn()) CountOp(Op::kSemWait);
  return View(s)->sem.TryAcquire() ? 0 : Fail(EAGAIN);
}

int sem_post(sem_t* s) {
  if (!Ours(s)) return RealGlibc().sem_post(s);
  if (StatsOn()) CountOp(Op::kSemPost);
  if (ProfileOn()) ProfileRelease(s, __builtin_return_address(0));
  // After Release publishes the unit, a woken waiter may destroy and free
  // the semaphore; Release touches nothing of it past that point.
  return View(s)->sem.Release(1) ? 0 : Fail(EOVERFLOW);
}

int sem_getvalue(sem_t* __restrict s, int* __restrict value) {
  if (!Ours(s)) return RealGlibc().sem_getvalue(s, value);
  *value = static_cast<int>(View(s)->sem.value());
  return 0;
}

}  // extern "C"
