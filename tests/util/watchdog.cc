#include "tests/util/watchdog.h"

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "absl/synchronization/mutex.h"

namespace parklot::internal::testing {

struct Watchdog::State {
  absl::Mutex mu;
  bool done = false;
  std::thread thread;
};

Watchdog::Watchdog(absl::Duration limit, const char* what)
    : state_(new State) {
  State* s = state_;
  s->thread = std::thread([s, limit, what] {
    absl::MutexLock lock(&s->mu);
    if (!s->mu.AwaitWithTimeout(absl::Condition(&s->done), limit)) {
      std::fprintf(stderr, "WATCHDOG: %s did not finish within %s\n", what,
                   absl::FormatDuration(limit).c_str());
      std::fflush(stderr);
      std::abort();
    }
  });
}

Watchdog::~Watchdog() {
  {
    absl::MutexLock lock(&state_->mu);
    state_->done = true;
  }
  state_->thread.join();
  delete state_;
}

}  // namespace parklot::internal::testing
