#include "base/shared_tls.h"

#include <sys/syscall.h>

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

void YieldForSharedTls() {
  RawSyscall6(SYS_sched_yield, 0, 0, 0, 0, 0, 0);
}

}  // namespace parklot::internal
