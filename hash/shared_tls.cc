#include "hash/shared_tls.h"

#include <sys/syscall.h>

#include "hash/futex.h"

namespace parklot {

namespace internal {
constinit __attribute__((tls_model("initial-exec"))) thread_local int32_t
    t_tls_owner = 0;
}  // namespace internal

int32_t CurrentTaskId() {
  return static_cast<int32_t>(RawSyscall6(SYS_gettid, 0, 0, 0, 0, 0, 0));
}

void NoteTlsSharingTask() {
  if (internal::t_tls_owner == 0) internal::t_tls_owner = CurrentTaskId();
}

bool OnForeignTls() {
  const int32_t owner = internal::t_tls_owner;
  return owner != 0 && CurrentTaskId() != owner;
}

void ResetSharedTlsInChild() { internal::t_tls_owner = 0; }

}  // namespace parklot
