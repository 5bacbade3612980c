// Runs this very binary again (/proc/self/exe) as a child process, for
// benchmarks whose configuration is per-process and fixed once used (the
// parking lot's table policy, the kernel's private futex hash size): each
// measurement gets a fresh process.
#ifndef PARKLOT_BENCH_SUBPROCESS_H_
#define PARKLOT_BENCH_SUBPROCESS_H_

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace parklot {
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
};

// Spawns /proc/self/exe with `argv0` as its argv[0] followed by `args`, the
// parent's environment, and a pipe as standard output. Waits for it to exit,
// or kills it (SIGKILL) once `timeout` has passed. Thread-compatible.
ChildOutcome RunSelf(const std::string& argv0,
                     const std::vector<std::string>& args,
                     absl::Duration timeout);

}  // namespace bench
}  // namespace parklot

#endif  // PARKLOT_BENCH_SUBPROCESS_H_
