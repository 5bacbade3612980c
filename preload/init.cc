// The shim's start-up and exit.
#include <stdlib.h>

#include "hash/futex.h"
#include "preload/shim.h"
#include "runtime/config.h"
#include "runtime/fork.h"

namespace parklot::preload {

void EnableLockStats();
void PrintStatsReport();

namespace {

void AtExit() { PrintStatsReport(); }

constexpr ForkHandlers kStandInsForkStep{nullptr, nullptr,
                                         ResetStandInsInChild};

// Runs when the shim is loaded, before the program's constructors (the
// preloaded object is initialized first). Calls that arrive earlier (from
// another preloaded library's constructor) work: the lot initializes on
// first use and glibc entry points resolve on first need.
__attribute__((constructor)) void Init() {
  RealGlibc();
  RegisterForkStep(ForkStep::kShimStandIns, &kStandInsForkStep);
  if (GetConfig().stats) {
    EnableLockStats();
    atexit(AtExit);
  }
}

}  // namespace
}  // namespace parklot::preload

extern "C" {
// With PARKLOT_STATS=1, processes that end with _exit (forked workers, as
// stress-ng's) report too. exit() reaches the kernel without this symbol.
__attribute__((visibility("default"), noreturn)) void _exit(int status) {
  if (parklot::preload::g_stats) parklot::preload::PrintStatsReport();
  parklot::RawSyscall6(SYS_exit_group, status, 0, 0, 0, 0, 0);
  __builtin_unreachable();
}

// Lets tests and `parklot info` ask whether the shim is loaded.
__attribute__((visibility("default"))) int parklot_preload_active() {
  return 1;
}
}
