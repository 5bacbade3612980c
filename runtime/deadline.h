// Absolute deadlines on either of the two clocks a futex can sleep against.
#ifndef PARKLOT_RUNTIME_DEADLINE_H_
#define PARKLOT_RUNTIME_DEADLINE_H_

#include <time.h>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace parklot {

// An absolute point in time on CLOCK_REALTIME or CLOCK_MONOTONIC.
//
// A monotonic deadline is an absl::Time whose distance from the Unix epoch
// equals the CLOCK_MONOTONIC reading (time since boot), as
// MonotonicNow() returns it. absl::InfiniteFuture() means "no deadline";
// absl::InfinitePast() and any past time mean "already expired".
// Sleeping against CLOCK_REALTIME follows clock jumps, as POSIX requires of
// pthread_cond_timedwait on a realtime condvar (FUTEX_CLOCK_REALTIME).
struct Deadline {
  absl::Time when = absl::InfiniteFuture();
  clockid_t clock = CLOCK_MONOTONIC;

  static Deadline Never() { return Deadline{}; }
  static Deadline Realtime(absl::Time when) { return {when, CLOCK_REALTIME}; }
  static Deadline Monotonic(absl::Time when) {
    return {when, CLOCK_MONOTONIC};
  }
  // `timeout` from now on CLOCK_MONOTONIC; a negative timeout has expired.
  static Deadline In(absl::Duration timeout);
  // From a POSIX timespec on `clock` (CLOCK_REALTIME or CLOCK_MONOTONIC).
  static Deadline FromTimespec(const struct timespec& ts, clockid_t clock) {
    return {absl::TimeFromTimespec(ts), clock};
  }

  bool is_never() const { return when == absl::InfiniteFuture(); }
};

// CLOCK_MONOTONIC now, in Deadline's encoding. Thread-safe (vDSO read).
absl::Time MonotonicNow();
// CLOCK_MONOTONIC now in nanoseconds since boot.
int64_t MonotonicNanos();

inline Deadline Deadline::In(absl::Duration timeout) {
  if (timeout == absl::InfiniteDuration()) return Never();
  return Monotonic(MonotonicNow() + timeout);
}

}  // namespace parklot

#endif  // PARKLOT_RUNTIME_DEADLINE_H_
