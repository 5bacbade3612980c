// The shim's start-up and exit.
#include <stdlib.h>

#include "hash/futex.h"
#include "hash/text.h"
#include "preload/deadlock.h"
#include "preload/report.h"
#include "preload/shim.h"
#include "runtime/config.h"
#include "runtime/fork.h"
#include "runtime/stats.h"

namespace parklot::preload {

uint8_t g_lock_hooks = 0;

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
  ResolveProgramClock();
  RegisterForkStep(ForkStep::kShimStandIns, &kStandInsForkStep);
  const Config& config = GetConfig();
  if (config.stats || config.deadlock != DeadlockMode::kOff) {
    InitReportSinks(config);
    // Both name call sites with the diagnostics object's symbolizer; the
    // detector is in it too. A plain run never loads it.
    LoadDiagnostics();
  }
  if (config.deadlock != DeadlockMode::kOff) EnableDeadlockDetection(config);
  if (config.stats) {
    EnableLockStats();
    atexit(AtExit);
  }
}

}  // namespace
}  // namespace parklot::preload

extern "C" {
// With PARKLOT_STATS, a process that ends with _exit reports too: the one
// the shim started in, and forked workers (as stress-ng's) where the path
// has %p; a fork child that leaves by _exit prints nothing unasked (its
// parent's output is what the program checks). exit() reaches the kernel
// without this symbol.
__attribute__((visibility("default"), noreturn)) void _exit(int status) {
  if (parklot::preload::StatsOn() &&
      parklot::preload::ReportsAtUnderscoreExit(parklot::preload::Sink::kStats)) {
    parklot::preload::PrintStatsReport();
  }
  parklot::RawSyscall6(SYS_exit_group, status, 0, 0, 0, 0, 0);
  __builtin_unreachable();
}

// Lets tests and `parklot info` ask whether the shim is loaded.
__attribute__((visibility("default"))) int parklot_preload_active() {
  return 1;
}

// `parklot info`: the shim's own lot (DescribeLot), so that the helper
// program need not parse the environment a second time (each parse reports
// every rejected knob). Writes at most `size` bytes, NUL-terminated, into
// `buf`; returns the full length (as snprintf does).
__attribute__((visibility("default"))) size_t parklot_preload_describe(
    char* buf, size_t size) {
  parklot::TextBuffer text(buf, size);
  parklot::DescribeLot(&text);
  return text.wanted();
}
}
