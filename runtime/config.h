// parklot's knobs: from PARKLOT_* environment variables, or set through this
// API before the parking lot is first used.
//
//   PARKLOT_POLICY       threads | cpus | fixed:N        (table growth policy)
//   PARKLOT_BUCKETS      initial buckets (threads, cpus)  default 16
//   PARKLOT_MAX_BUCKETS  cap; reaching it freezes the table  default 2^19
//   PARKLOT_LOAD_FACTOR  buckets per live thread (threads)   default 4
//   PARKLOT_SPIN         adaptive | off | N (fixed spin budget, in pauses)
//   PARKLOT_FAIR_NS      mean eventual-fairness interval, ns  default 500000
//   PARKLOT_STATS        1 = print statistics at exit (the shim)
//   PARKLOT_SYSCALL_FUTEX 1 = the shim also serves private
//                        syscall(SYS_futex, ...) waits and wakes
#ifndef PARKLOT_RUNTIME_CONFIG_H_
#define PARKLOT_RUNTIME_CONFIG_H_

#include <cstdint>
#include <string>

#include "hash/bucket_table.h"

namespace parklot {

enum class SpinMode { kAdaptive, kOff, kFixed };

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
};

// Parses the PARKLOT_* variables over the defaults. Malformed values keep
// the default and are reported on stderr (each time they are parsed). Does not
// allocate. Thread-safe.
Config ConfigFromEnvironment();

// The configuration in force. The first call, or the first use of the
// parking lot, fixes it (from SetConfig, else the environment).
const Config& GetConfig();

// Replaces the configuration. Returns false (and changes nothing) once the
// parking lot has been used or the configuration read: the table cannot
// change policy under parked threads.
bool SetConfig(const Config& config);

// One line describing `config`, e.g. "policy=threads buckets=16 ...".
// " syscall_futex=1" ends it only when that knob is on.
std::string DescribeConfig(const Config& config);

}  // namespace parklot

#endif  // PARKLOT_RUNTIME_CONFIG_H_
