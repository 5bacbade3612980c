// pthread_once and C11 call_once on parklot::Once, in place in glibc's
// 4-byte pthread_once_t / once_flag (0 = PTHREAD_ONCE_INIT / ONCE_FLAG_INIT).
// glibc implements call_once without the pthread_once symbol, so it needs
// its own entry. An init routine that is cancelled leaves the control
// callable again (POSIX), as parklot::Once does for any unwind. In a child
// of fork(), a control whose routine was running in the parent is run
// again, as glibc does (parklot::Once keeps the fork generation).
#include <pthread.h>
#include <threads.h>

#include "preload/shim.h"
#include "sync/once.h"

static_assert(sizeof(parklot::Once) == sizeof(pthread_once_t),
              "Once fits pthread_once_t");
static_assert(sizeof(parklot::Once) == sizeof(once_flag), "and once_flag");

extern "C" {

int pthread_once(pthread_once_t* control, void (*init)(void)) {
  using parklot::internal::preload::Op;
  if (parklot::internal::preload::StatsOn()) parklot::internal::preload::CountOp(Op::kOnce);
  reinterpret_cast<parklot::Once*>(control)->Call(init);
  return 0;
}

void call_once(once_flag* flag, void (*init)(void)) {
  using parklot::internal::preload::Op;
  if (parklot::internal::preload::StatsOn()) parklot::internal::preload::CountOp(Op::kOnce);
  reinterpret_cast<parklot::Once*>(flag)->Call(init);
}

}  // extern "C"
