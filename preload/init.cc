// The shim's start-up and exit.
#include <stdlib.h>

#include "preload/shim.h"
#include "runtime/config.h"

namespace parklot::preload {

void EnableLockStats();
void PrintStatsReport();

namespace {

void AtExit() { PrintStatsReport(); }

// Runs when the shim is loaded, before the program's constructors (the
// preloaded object is initialized first). Calls that arrive earlier (from
// another preloaded library's constructor) work: the lot initializes on
// first use and glibc entry points resolve on first need.
__attribute__((constructor)) void Init() {
  RealGlibc();
  if (GetConfig().stats) {
    EnableLockStats();
    atexit(AtExit);
  }
}

}  // namespace
}  // namespace parklot::preload

extern "C" {
// Lets tests and `parklot info` ask whether the shim is loaded.
__attribute__((visibility("default"))) int parklot_preload_active() {
  return 1;
}
}
