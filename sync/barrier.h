// parklot::Barrier: a reusable thread barrier (pthread_barrier_t semantics)
// in 16 bytes, so it fits in place inside a glibc pthread_barrier_t (32
// bytes) under the preload shim.
//
// `count` threads call Wait(); all block until the last one arrives, then
// all return and the barrier is ready for the next cycle at once. Exactly
// one thread per cycle (the last to arrive) gets true, as exactly one gets
// PTHREAD_BARRIER_SERIAL_THREAD from pthread_barrier_wait.
#ifndef PARKLOT_SYNC_BARRIER_H_
#define PARKLOT_SYNC_BARRIER_H_

#include "sync/requires_cxx20.h"  // first: one #error before C++20
#if PARKLOT_CXX20

#include <atomic>
#include <cstdint>

namespace parklot {

// Thread-safe. No heap allocation. Waiters park on the barrier's address
// at once (there is no owner whose progress spinning could watch).
class Barrier {
 public:
  // The largest count.
  static constexpr uint32_t kMaxCount = 0x7fffffff;

  // A barrier for `count` threads per cycle. Precondition:
  // 1 <= count <= kMaxCount (pthread_barrier_init returns EINVAL for 0;
  // the shim checks); 0 is treated as 1 and larger values are clamped.
  explicit constexpr Barrier(uint32_t count)
      : count_(count == 0 ? 1 : count > kMaxCount ? kMaxCount : count) {}
  Barrier(const Barrier&) = delete;
  Barrier& operator=(const Barrier&) = delete;

  // Waits until every thread released by the last completed cycle has left
  // Wait (see Wait), then the barrier may be freed. Precondition, as for
  // pthread_barrier_destroy: no cycle is in progress (no thread is waiting
  // for arrivals).
  ~Barrier() { WaitForExits(); }

  // Arrives at the barrier and blocks until `count` threads have arrived in
  // this cycle. Returns true in exactly one thread per cycle (the last to
  // arrive), false in the others. Every write made by any participant
  // before its Wait happens-before every participant's return. Surplus
  // callers (more than `count` arriving in one cycle) wait for the next
  // cycle and take part in it.
  //
  // Destruction (glibc's pthread_barrier_destroy guarantee): any
  // participant may destroy the barrier as soon as its own Wait returned,
  // even while the others are still on their way out: the destructor waits
  // for them, and each one's last access is the atomic decrement that lets
  // the destructor go; the last arrival touches only the parking lot after
  // publishing the new cycle.
  bool Wait();

  // What the destructor does, for in-place use (the shim's
  // pthread_barrier_destroy): returns once no thread released by a past
  // cycle is still inside Wait.
  void WaitForExits();

  // The number of threads per cycle.
  uint32_t count() const { return count_; }

 private:
  static constexpr uint32_t kExitWaiter = 0x80000000u;  // WaitForExits parks
  static constexpr uint32_t kExitMask = 0x7fffffffu;

  void Exit();

  // Low 32 bits: threads arrived in this cycle; high 32 bits: the cycle
  // (generation) number, which the last arrival advances.
  std::atomic<uint64_t> word_{0};
  uint32_t count_;
  // Released threads still inside Wait (kExitMask) and whether a
  // destroyer waits for them (kExitWaiter).
  std::atomic<uint32_t> exits_{0};
};

}  // namespace parklot

#endif  // PARKLOT_CXX20

#endif  // PARKLOT_SYNC_BARRIER_H_
