// A test watchdog: a hang must fail the test, not stall CI.
#ifndef PARKLOT_TESTS_UTIL_WATCHDOG_H_
#define PARKLOT_TESTS_UTIL_WATCHDOG_H_

#include "absl/time/time.h"

namespace parklot::internal::testing {

// Aborts the process with `what` on stderr unless destroyed within
// `limit`. Uses its own thread sleeping on absl::Mutex, so it does not
// depend on the parklot code under test.
class Watchdog {
 public:
  explicit Watchdog(absl::Duration limit, const char* what = "test");
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  struct State;
  State* state_;
};

}  // namespace parklot::internal::testing

#endif  // PARKLOT_TESTS_UTIL_WATCHDOG_H_
