// parklot's knobs: from PARKLOT_* environment variables, or set through this
// API before the parking lot is first used.
//
//   PARKLOT_POLICY       threads | cpus | adaptive | fixed:N, 1 <= N <= 2^30
//                        (table growth policy; adaptive = threads, and
//                        doubles on measured collisions)  default adaptive
//   PARKLOT_BUCKETS      initial buckets (threads, cpus, adaptive), 1..2^30
//                                                         default 16
//   PARKLOT_MAX_BUCKETS  cap, 1..2^30; reaching it freezes the table
//                                                         default 2^19
//   PARKLOT_LOAD_FACTOR  buckets per live thread (threads, adaptive), (0, 1024]
//                                                         default 4
//   PARKLOT_SPIN         adaptive | off | N, 0..64 (fixed spin budget, in
//                        pause-backoff rounds; 0 = off)  default adaptive
//   PARKLOT_FAIR_NS      mean eventual-fairness interval, ns, 0..6e10
//                        (0 = always fair)                default 500000
//   PARKLOT_STATS        1 = print statistics at exit (the shim), to
//                        stderr; a path with a '/' (e.g. ./stats.%p, %p =
//                        the pid) = to that file instead
//   PARKLOT_REPORT       a path with a '/' (%p = the pid): the shim's
//                        diagnostic reports (PARKLOT_DEADLOCK) go there,
//                        not to stderr                    default stderr
//   PARKLOT_DEADLOCK     off | report | abort: the shim's lock-order cycle
//                        and deadlock detection (preload/diag/deadlock.h)
//                                                         default off
//   PARKLOT_PROFILE      a path with a '/' (%p = the pid): the shim's
//                        contention profiles go there (where threads
//                        waited) and to PATH.holders (whose unlocks ended
//                        the waits), read by google-pprof
//                        (preload/diag/profile.h)
//                                                         default off
//   PARKLOT_PROFILE_RATE 1..1000000000 ns of wait per sample: a contended
//                        wait of d ns is sampled with probability
//                        min(1, d / rate)                  default 1000000
//   PARKLOT_SYSCALL_FUTEX 1 = the shim also serves private
//                        syscall(SYS_futex, ...) waits and wakes
//   (the two switches take 1/0, true/false, yes/no, t/f, y/n; default 0)
//
// A value that does not parse or is out of range never stops the program
// (docs/design.md section 6, invariant 7): the knob keeps its default and one
// line on stderr names the variable, the value given, what is accepted and the
// default used.
//
// Secure mode (docs/design.md section 6, invariant 8): in a process the kernel
// started with AT_SECURE set (setuid, setgid, file capabilities, an LSM
// transition) no PARKLOT_* variable is read at all; every knob has its default
// and nothing is written anywhere, as glibc ignores LD_DEBUG_OUTPUT and filters
// GLIBC_TUNABLES there: the environment belongs to a less privileged user.
#ifndef PARKLOT_RUNTIME_CONFIG_H_
#define PARKLOT_RUNTIME_CONFIG_H_

#include <cstdint>
#include <string>

#include "base/text.h"
#include "hash/bucket_table.h"

namespace parklot::internal {

// Upper bounds of the knobs (inclusive). Bucket counts are bounded by
// kMaxTableBuckets (hash/bucket_table.h).
inline constexpr double kMaxLoadFactor = 1024;
inline constexpr int kMaxSpinBudget = 64;
inline constexpr int64_t kMaxFairNs = 60'000'000'000;  // 60 s
inline constexpr int kMaxProfileRate = 1'000'000'000;  // ns: 1 s

enum class SpinMode { kAdaptive, kOff, kFixed };

// PARKLOT_DEADLOCK: what the shim does about lock-order cycles and
// deadlocks it sees (preload/diag/deadlock.h).
enum class DeadlockMode { kOff, kReport, kAbort };

struct Config {
  TableOptions table;
  SpinMode spin = SpinMode::kAdaptive;
  // For SpinMode::kFixed: how many pause-backoff rounds to spin.
  int spin_budget = 0;
  // Mean of the per-bucket fairness timer, nanoseconds (0 = always fair).
  int64_t fair_mean_ns = 500000;
  bool stats = false;
  // The preload shim serves private syscall(SYS_futex) operations from the
  // parking lot (preload/futex_ops.h).
  bool syscall_futex = false;
  // PARKLOT_STATS=PATH: where the statistics go (nullptr: stderr). Points
  // into the environment; "%p" in it stands for the pid.
  const char* stats_path = nullptr;
  // PARKLOT_REPORT=PATH: where diagnostic reports go (nullptr: stderr).
  const char* report_path = nullptr;
  DeadlockMode deadlock = DeadlockMode::kOff;
  // PARKLOT_PROFILE=PATH: where the contention profiles go (nullptr:
  // profiling off). Points into the environment; "%p" stands for the pid.
  const char* profile_path = nullptr;
  // PARKLOT_PROFILE_RATE: nanoseconds of wait per sample; a contended wait
  // of d ns is sampled with probability min(1, d / rate), 1..kMaxProfileRate
  // (docs/design.md §5.15).
  int profile_rate = 1'000'000;
};

// True in a secure-mode process: getauxval(AT_SECURE) is nonzero, i.e. the
// dynamic loader itself runs in secure mode. Fixed for the process's life;
// no system call (the auxiliary vector is in memory). Async-signal-safe.
bool SecureMode();

// Parses the PARKLOT_* variables over the defaults; in secure mode
// (SecureMode()) reads none of them and returns the defaults, silently. A malformed or
// out-of-range value keeps that knob's default and is reported on one line
// of stderr (each time it is parsed; GetConfig parses once). An empty
// switch (PARKLOT_STATS=) counts as unset. Does not allocate.
// Thread-safe.
Config ConfigFromEnvironment();

// Replaces every out-of-range field of `*config` with its default (the
// ranges above; policy and spin must be enumerators), reporting each on
// one line of stderr as the environment parser does. Returns how many
// fields it replaced (0: the configuration was valid). Does not allocate.
// Thread-safe on distinct configs.
int SanitizeConfig(Config* config);

// The configuration in force. The first call, or the first use of the
// parking lot, fixes it (from SetConfig, else the environment).
const Config& GetConfig();

// Replaces the configuration. Returns false (and changes nothing) once the
// parking lot has been used or the configuration read: the table cannot
// change policy under parked threads. Otherwise returns true and fixes
// `config` with its out-of-range fields replaced by their defaults, each
// reported on stderr (SanitizeConfig): as with the environment, a bad knob
// never stops the program. Call SanitizeConfig first to learn of them.
bool SetConfig(const Config& config);

// One line describing `config`, e.g. "policy=adaptive buckets=16 ...".
// " syscall_futex=1", " deadlock=report|abort" and " profile_rate=N" end
// it only when those knobs are on. Appended to `out`; no allocation.
void DescribeConfig(const Config& config, TextBuffer* out);
// The same as a std::string (for tests and tools; not the shim).
inline std::string DescribeConfig(const Config& config) {
  char buf[512];
  TextBuffer out(buf, sizeof(buf));
  DescribeConfig(config, &out);
  return std::string(out.view());
}

}  // namespace parklot::internal

#endif  // PARKLOT_RUNTIME_CONFIG_H_
