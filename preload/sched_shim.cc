// The scheduling calls the lot must hear of to queue real-time waiters by
// priority (docs/design.md section 3.15): each is glibc's (or the system
// call glibc's makes), and when it succeeds the lot is told that a thread's
// priority may have changed (SchedulingChanged). pthread_attr_setschedpolicy
// is here because a thread made with explicit scheduling gets its policy
// inside glibc's pthread_create, from no function the shim sees, and may
// queue before pthread_create returns; the attribute comes first. The
// same system calls made through syscall() (sched_setattr has no glibc
// function before 2.41) are noted here too, for the shim's syscall()
// (futex_shim.cc).
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>

#include "base/futex.h"
#include "preload/shim.h"
#include "runtime/parking_lot.h"

namespace parklot::internal::preload {
namespace {

// SCHED_FIFO or SCHED_RR (with or without SCHED_RESET_ON_FORK).
bool RealTimePolicy(int policy) {
  policy &= ~SCHED_RESET_ON_FORK;
  return policy == SCHED_FIFO || policy == SCHED_RR;
}

// glibc's system call wrappers' convention: -1 with errno for -4095..-1.
int SyscallResult(long rc) {
  if (rc < 0 && rc > -4096) {
    errno = static_cast<int>(-rc);
    return -1;
  }
  return static_cast<int>(rc);
}

}  // namespace

void NoteSchedulingSyscall(long number, long a1, long a2, long a3) {
  switch (number) {
    case SYS_sched_setscheduler:
      SchedulingChanged(RealTimePolicy(static_cast<int>(a2)));
      return;
    case SYS_sched_setparam:
      SchedulingChanged(
          reinterpret_cast<const struct sched_param*>(a2)->sched_priority > 0);
      return;
    case SYS_sched_setattr:
      // struct sched_attr: u32 size, then u32 sched_policy.
      SchedulingChanged(
          RealTimePolicy(static_cast<int>(reinterpret_cast<const uint32_t*>(a2)[1])));
      return;
  }
}

}  // namespace parklot::internal::preload

using parklot::internal::SchedulingChanged;
using parklot::internal::preload::RealGlibc;
using parklot::internal::preload::RealTimePolicy;
using parklot::internal::preload::SyscallResult;

extern "C" {

// glibc's is the bare system call; so is this one.
int sched_setscheduler(pid_t pid, int policy, const struct sched_param* p) {
  const int rc = SyscallResult(parklot::internal::RawSyscall6(
      SYS_sched_setscheduler, pid, policy, reinterpret_cast<long>(p), 0, 0,
      0));
  if (rc == 0) SchedulingChanged(RealTimePolicy(policy));
  return rc;
}

// (The kernel read *p: it succeeded.)
int sched_setparam(pid_t pid, const struct sched_param* p) {
  const int rc = SyscallResult(parklot::internal::RawSyscall6(
      SYS_sched_setparam, pid, reinterpret_cast<long>(p), 0, 0, 0, 0));
  if (rc == 0) SchedulingChanged(p->sched_priority > 0);
  return rc;
}

// glibc's keeps its own record of the thread's parameters, and adjusts for
// priority-protected mutexes the thread holds.
int pthread_setschedparam(pthread_t thread, int policy,
                          const struct sched_param* p) {
  const int rc = RealGlibc().pthread_setschedparam(thread, policy, p);
  if (rc == 0) SchedulingChanged(RealTimePolicy(policy));
  return rc;
}

int pthread_setschedprio(pthread_t thread, int priority) {
  const int rc = RealGlibc().pthread_setschedprio(thread, priority);
  if (rc == 0) SchedulingChanged(priority > 0);
  return rc;
}

int pthread_attr_setschedpolicy(pthread_attr_t* attr, int policy) {
  const int rc = RealGlibc().pthread_attr_setschedpolicy(attr, policy);
  if (rc == 0 && RealTimePolicy(policy)) SchedulingChanged(true);
  return rc;
}

}  // extern "C"
