// parklot::SchedulingChanged: telling parklot that a thread's real-time
// scheduling changed, so that its waiters queue by priority.
#ifndef PARKLOT_SYNC_SCHEDULING_H_
#define PARKLOT_SYNC_SCHEDULING_H_

#include "sync/requires_cxx20.h"  // first: one #error before C++20
#if PARKLOT_CXX20

namespace parklot {

// Every primitive releases its waiters highest real-time priority first
// (SCHED_FIFO and SCHED_RR threads by sched_priority, every other thread
// below them as one level) and first come first served among equals, as
// the kernel orders a futex's waiters and so glibc's primitives release
// theirs (docs/design.md section 3.15).
//
// Call after changing any thread's scheduling (sched_setscheduler,
// sched_setparam, pthread_setschedparam, pthread_setschedprio) or creating
// threads with a SCHED_FIFO or SCHED_RR attribute; `real_time`: the new
// policy is SCHED_FIFO or SCHED_RR. Until the process started real-time or
// a call with `real_time` true, every thread queues as a non-real-time one
// and no wait asks the kernel for a priority; from then on each thread
// reads its own priority again (one sched_getparam) when it next waits.
// Without the call, a change made after start-up may be unseen until the
// next call. (Under the preload shim the shim calls it from those
// functions.) Thread-safe and async-signal-safe; never blocks, no
// allocation, no system call.
void SchedulingChanged(bool real_time) noexcept;

}  // namespace parklot

#endif  // PARKLOT_CXX20
#endif  // PARKLOT_SYNC_SCHEDULING_H_
