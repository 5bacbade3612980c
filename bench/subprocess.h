// Child processes for benchmarks. RunSelf runs this very binary again
// (/proc/self/exe), for benchmarks whose configuration is per-process and
// fixed once used (the parking lot's table policy, the kernel's private
// futex hash size): each measurement gets a fresh process. RunProgram runs
// any program (a real program under the preload shim, another benchmark
// binary) and reports its wall time and resource usage.
#ifndef PARKLOT_BENCH_SUBPROCESS_H_
#define PARKLOT_BENCH_SUBPROCESS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace parklot::internal {
namespace bench {

struct ChildOutcome {
  // True if the child ran to completion and exited with status 0.
  bool ok = false;
  // Everything the child wrote to its standard output (its standard error
  // is the parent's).
  std::string stdout_text;
  // Why it did not succeed ("exit status 3", "killed by signal 11",
  // "timed out after 60s", "posix_spawn: ..."); empty when ok.
  std::string error;
  // From spawn to exit, and the child's resource usage (all its threads and
  // waited-for descendants, from wait4): user + system CPU time, voluntary
  // and involuntary context switches. Filled in whenever the child was
  // reaped.
  absl::Duration wall;
  absl::Duration cpu;
  int64_t voluntary_switches = 0;
  int64_t involuntary_switches = 0;
};

struct ProgramSpec {
  // The program: a path, or a name looked up in PATH.
  std::string path;
  // argv[0] and the arguments; argv[0] defaults to `path` when empty.
  std::vector<std::string> argv;
  // Environment: the parent's, with these NAME=VALUE entries set (replacing
  // any of the same name) and these names removed.
  std::vector<std::string> set_env;
  std::vector<std::string> unset_env;
  // Standard input from this file ("" = /dev/null, "-" = the parent's).
  std::string stdin_path;
  // Standard output: captured into ChildOutcome::stdout_text, or, if
  // `discard_stdout`, sent to /dev/null.
  bool discard_stdout = false;
  // Standard error: the parent's, or with `capture_stderr` captured into
  // stdout_text too (in write order, interleaved with standard output).
  bool capture_stderr = false;
  absl::Duration timeout = absl::Minutes(5);
};

// Spawns /proc/self/exe with `argv0` as its argv[0] followed by `args`, the
// parent's environment, and a pipe as standard output. Waits for it to exit,
// or kills it (SIGKILL) once `timeout` has passed. Thread-compatible.
ChildOutcome RunSelf(const std::string& argv0,
                     const std::vector<std::string>& args,
                     absl::Duration timeout);

// Runs `spec` to completion (or kills it, SIGKILL, after spec.timeout).
// Thread-compatible.
ChildOutcome RunProgram(const ProgramSpec& spec);

}  // namespace bench
}  // namespace parklot::internal

#endif  // PARKLOT_BENCH_SUBPROCESS_H_
