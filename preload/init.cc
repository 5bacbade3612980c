// The shim's start-up and exit.
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/futex.h"
#include "base/text.h"
#include "preload/diag/deadlock.h"
#include "preload/diag/profile.h"
#include "preload/diag/report.h"
#include "preload/own_libc.h"
#include "preload/shim.h"
#include "preload/task_model.h"
#include "runtime/config.h"
#include "runtime/fork.h"
#include "runtime/global_table.h"
#include "runtime/stats.h"

namespace parklot::internal::preload {

void EnableLockStats();
void PrintStatsReport();

namespace {

void AtExit() { PrintStatsReport(); }

// A profile file holds one process's profile: a fork child writes its own
// only into a "%p" path, whether it leaves by exit() or _exit() (into the
// parent's file it would replace the parent's).
void AtExitProfile() {
  if (ReportsAtUnderscoreExit(Sink::kProfile)) WriteProfiles();
}

// The shim's own state in a fork child: the condvar stand-ins, and the
// profile's waits in progress (no thread of the parent waits in the child).
void ShimChildReset() {
  ResetStandInsInChild();
  ProfileResetInChild();
}

constexpr ForkHandlers kStandInsForkStep{nullptr, nullptr, ShimChildReset};

// Under Valgrind every served name is bound to glibc's own function
// (surface.h): one line on stderr says so, worded as the launcher's line for
// a program the shim cannot serve. Nothing in secure mode (docs/design.md
// section 6, invariant 8). One write(2), formatted on the stack, errno kept
// (SayLine).
void SayStepsAside() {
  if (SecureMode()) return;
  SayLine("parklot: under Valgrind: stepping aside; %.64s (pid %d) runs on "
          "glibc's locks",
          program_invocation_short_name, getpid());
}

// Runs when the shim is loaded, before the program's constructors (the
// preloaded object is initialized first). Calls that arrive earlier (from
// another preloaded library's constructor) work: the lot initializes on
// first use and glibc entry points resolve on first need.
__attribute__((constructor)) void Init() {
  ParklotResolveOwnLibc();
  RealGlibc();
  if (SteppingAside()) {
    // Nothing of the shim's runs: no configuration is read (PARKLOT_STATS,
    // PARKLOT_DEADLOCK and PARKLOT_SYSCALL_FUTEX have nothing to act on),
    // no fork step, no report.
    SayStepsAside();
    return;
  }
  ResolveProgramClock();
  StartSingleThreadedPath();
  RegisterForkStep(ForkStep::kShimStandIns, &kStandInsForkStep);
  const Config& config = GetConfig();
  // Before main, and so before any sandbox, where the policy needs it.
  ReadOnlineCpus();
  if (config.stats || config.deadlock != DeadlockMode::kOff ||
      config.profile_path != nullptr) {
    InitReportSinks(config);
  }
  if (config.stats || config.deadlock != DeadlockMode::kOff ||
      config.profile_path != nullptr) {
    // All three name locks and call sites with the diagnostics object's
    // symbolizers (a profile its `# lock` lines; pprof names its stacks);
    // the detector is in it too. A plain run never loads it.
    LoadDiagnostics();
  }
  if (config.deadlock != DeadlockMode::kOff) EnableDeadlockDetection(config);
  if (config.stats) {
    EnableLockStats();
    atexit(AtExit);
  }
  if (config.profile_path != nullptr) {
    EnableProfile(config);
    if (ProfileOn()) atexit(AtExitProfile);
  }
}

}  // namespace
}  // namespace parklot::internal::preload

extern "C" {
// With PARKLOT_STATS or PARKLOT_PROFILE, a process that ends with _exit
// reports too: the one the shim started in, and forked workers (as
// stress-ng's) where the path has %p; a fork child that leaves by _exit
// prints nothing unasked (its parent's output is what the program checks).
// exit() reaches the kernel without this symbol. A vfork child, or a task
// on another's TLS, reports nothing: the figures in memory are its
// parent's, which reports them itself (docs/design.md §5.16).
void _exit(int status) {
  namespace preload = parklot::internal::preload;
  const bool own_figures = preload::TaskOwnsThreadState();
  if (own_figures && preload::StatsOn() &&
      preload::ReportsAtUnderscoreExit(preload::Sink::kStats)) {
    preload::PrintStatsReport();
  }
  if (own_figures && preload::ProfileOn() &&
      preload::ReportsAtUnderscoreExit(preload::Sink::kProfile)) {
    preload::WriteProfiles();
  }
  parklot::internal::RawSyscall6(SYS_exit_group, status, 0, 0, 0, 0, 0);
  __builtin_unreachable();
}

// Set by the first copy of the lot in the process that reads the
// environment, so that a program linking libparklot.so under the shim is
// warned of a bad knob once (runtime/config.cc; the library's copy finds
// this definition through a weak reference).
extern "C" {
__attribute__((visibility("default"))) int parklot_config_reported = 0;
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
  parklot::internal::TextBuffer text(buf, size);
  parklot::internal::DescribeLot(&text);
  return text.wanted();
}
}
