// pthread_barrier_* on parklot::Barrier, in place in glibc's 32-byte
// pthread_barrier_t (bytes 0-15 the Barrier, 24-31 a "parklot's" tag).
// Process-shared barriers go to glibc for their whole life; destroy keeps
// the tag. As in glibc, pthread_barrier_wait is not a cancellation point.
#include <errno.h>
#include <pthread.h>

#include <new>

#include "preload/diag/profile.h"
#include "preload/shim.h"
#include "sync/barrier.h"

namespace parklot::internal::preload {
namespace {

constexpr uint64_t kTag = 0x7261622e746f6c70ull;  // arbitrary, unlikely

struct BarrierLayout {
  Barrier barrier;
  alignas(8) unsigned char unused[8];
  uint64_t tag;
};
static_assert(sizeof(BarrierLayout) <= sizeof(pthread_barrier_t),
              "fits in pthread_barrier_t");
static_assert(offsetof(BarrierLayout, tag) == 24, "tag in the last 8 bytes");

BarrierLayout* View(pthread_barrier_t* b) {
  return reinterpret_cast<BarrierLayout*>(b);
}
bool Ours(pthread_barrier_t* b) { return View(b)->tag == kTag; }

}  // namespace
}  // namespace parklot::internal::preload

using namespace parklot;           // NOLINT
using namespace parklot::internal;  // NOLINT
using namespace parklot::internal::preload;  // NOLINT

extern "C" {

int pthread_barrier_init(pthread_barrier_t* __restrict b,
                         const pthread_barrierattr_t* __restrict attr,
                         unsigned count) {
  int pshared = PTHREAD_PROCESS_PRIVATE;
  if (attr != nullptr && pthread_barrierattr_getpshared(attr, &pshared) != 0) {
    return EINVAL;
  }
  if (pshared != PTHREAD_PROCESS_PRIVATE) {
    View(b)->tag = 0;
    return RealGlibc().pthread_barrier_init(b, attr, count);
  }
  // glibc 2.36 accepts counts below 2^31 - 1 (its BARRIER_IN_THRESHOLD).
  if (count == 0 || count >= 0x7fffffffu) return EINVAL;
  static_assert(Barrier::kMaxCount >= 0x7fffffffu - 1, "fits Barrier");
  new (&View(b)->barrier) Barrier(count);
  View(b)->tag = kTag;
  return 0;
}

int pthread_barrier_destroy(pthread_barrier_t* b) {
  if (!Ours(b)) return RealGlibc().pthread_barrier_destroy(b);
  // Waits for threads still on their way out of Wait, as glibc does, and
  // no more (~Barrier's work; it holds nothing else). As after glibc's
  // destroy, the barrier goes on working if used again without an init
  // (POSIX: undefined): it stays ours, since glibc's pthread_barrier_wait
  // cannot run our layout (it hung).
  View(b)->barrier.WaitForExits();
  return 0;
}

int pthread_barrier_wait(pthread_barrier_t* b) {
  if (!Ours(b)) return RealGlibc().pthread_barrier_wait(b);
  if (StatsOn()) CountOp(Op::kBarrierWait);
  if (!ProfileOn()) {
    return View(b)->barrier.Wait() ? PTHREAD_BARRIER_SERIAL_THREAD : 0;
  }
  // Profiled: any arrival may be the last, whose arrival ends the others'
  // waits, so each records its stack for sampled waiters before it
  // arrives; its own wait counts unless it was the last (it did not wait).
  ProfileRelease(b, __builtin_return_address(0));
  ProfileWait profiled(b);
  const bool serial = View(b)->barrier.Wait();
  if (!serial) profiled.Acquired();
  return serial ? PTHREAD_BARRIER_SERIAL_THREAD : 0;
}

}  // extern "C"
