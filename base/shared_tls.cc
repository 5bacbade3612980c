#include "base/shared_tls.h"

#include <errno.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include "base/futex.h"

namespace parklot::internal {

constinit __attribute__((tls_model("initial-exec"))) thread_local int32_t
    t_tls_owner = 0;

int32_t CurrentTaskId() {
  return static_cast<int32_t>(RawSyscall6(SYS_gettid, 0, 0, 0, 0, 0, 0));
}

void NoteTlsSharingTask() {
  if (t_tls_owner == 0) t_tls_owner = CurrentTaskId();
}

void ResetSharedTlsInChild() { t_tls_owner = 0; }

bool TaskExited(int32_t tid) {
  static const char probe = 0;
  char copy;
  struct iovec local = {&copy, 1};
  struct iovec remote = {const_cast<char*>(&probe), 1};
  return RawSyscall6(SYS_process_vm_readv, tid, reinterpret_cast<long>(&local),
                     1, reinterpret_cast<long>(&remote), 1, 0) == -ESRCH;
}

void YieldForSharedTls() {
  RawSyscall6(SYS_sched_yield, 0, 0, 0, 0, 0, 0);
}

}  // namespace parklot::internal
