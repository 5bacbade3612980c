// Absolute deadlines on either of the two clocks a futex can sleep against.
//
// Plain nanoseconds and clock_gettime, all inline: the preload shim loads
// with libc alone (docs/design.md, "The shim's footprint"), so the lot's
// own time needs nothing out of line. The absl::Time and absl::Duration
// adapters below are for the library's users and tests; nothing in the
// shim calls them (each would pull in libabsl_time).
#ifndef PARKLOT_RUNTIME_DEADLINE_H_
#define PARKLOT_RUNTIME_DEADLINE_H_

#include <linux/futex.h>
#include <time.h>

#include <cstdint>

#include "absl/time/time.h"

namespace parklot {

// a + b, saturating at the ends of int64.
inline int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t sum;
  if (!__builtin_add_overflow(a, b, &sum)) return sum;
  return b > 0 ? INT64_MAX : INT64_MIN;
}

// A clock's reading in nanoseconds (the vDSO's clock_gettime).
// Thread-safe.
inline int64_t ClockNanos(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}
// A timespec (tv_nsec in [0, 1e9)) in nanoseconds, saturating at the ends
// of int64.
inline int64_t TimespecNanos(const struct timespec& ts) {
  int64_t ns;
  if (__builtin_mul_overflow(int64_t{ts.tv_sec}, int64_t{1000000000}, &ns)) {
    return ts.tv_sec > 0 ? INT64_MAX : INT64_MIN;
  }
  return SaturatingAdd(ns, ts.tv_nsec);
}
// CLOCK_MONOTONIC now in nanoseconds since boot.
inline int64_t MonotonicNanos() { return ClockNanos(CLOCK_MONOTONIC); }

// An absolute point in time on CLOCK_REALTIME or CLOCK_MONOTONIC.
//
// `ns` counts nanoseconds from the clock's zero: the Unix epoch for
// CLOCK_REALTIME, boot for CLOCK_MONOTONIC (its clock_gettime reading).
// kNever means "no deadline"; any time at or before now has expired, and
// every time at or before the zero (down to INT64_MIN) sleeps not at all.
// Times beyond int64 nanoseconds (the year 2262) are kept as kNever - 1:
// later than any wait lasts, and still a deadline. Sleeping against
// CLOCK_REALTIME follows clock jumps, as POSIX requires of
// pthread_cond_timedwait on a realtime condvar (FUTEX_CLOCK_REALTIME).
struct Deadline {
  static constexpr int64_t kNever = INT64_MAX;

  int64_t ns = kNever;
  clockid_t clock = CLOCK_MONOTONIC;

  static Deadline Never() { return Deadline{}; }
  static Deadline RealtimeAt(int64_t ns) { return {Finite(ns), CLOCK_REALTIME}; }
  static Deadline MonotonicAt(int64_t ns) {
    return {Finite(ns), CLOCK_MONOTONIC};
  }
  // `timeout_ns` from now on CLOCK_MONOTONIC; kNever: no deadline; a
  // negative timeout has expired.
  static Deadline InNanos(int64_t timeout_ns) {
    if (timeout_ns == kNever) return Never();
    return MonotonicAt(SaturatingAdd(MonotonicNanos(), timeout_ns));
  }
  // From a POSIX timespec on `clock` (CLOCK_REALTIME or CLOCK_MONOTONIC)
  // with tv_nsec in [0, 1e9).
  static Deadline FromTimespec(const struct timespec& ts, clockid_t clock) {
    return {Finite(TimespecNanos(ts)), clock};
  }
  // This deadline moved by `ns` (saturating; never stays never).
  Deadline Shifted(int64_t by) const {
    return is_never() ? *this : Deadline{Finite(SaturatingAdd(ns, by)), clock};
  }

  bool is_never() const { return ns == kNever; }
  // The futex's absolute timeout; a deadline at or before the clock's
  // zero is {0, 0} (expired, and no negative time for the kernel).
  struct timespec ToTimespec() const {
    if (ns <= 0) return {0, 0};
    return {static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  }
  // A FUTEX_WAIT_BITSET_PRIVATE wait until this deadline: sets `*op` (with
  // FUTEX_CLOCK_REALTIME on CLOCK_REALTIME) and returns the timeout to pass,
  // written into `storage`, or nullptr for no deadline.
  const struct timespec* FutexWait(struct timespec* storage, int* op) const {
    *op = FUTEX_WAIT_BITSET_PRIVATE;
    if (is_never()) return nullptr;
    *storage = ToTimespec();
    if (clock == CLOCK_REALTIME) *op |= FUTEX_CLOCK_REALTIME;
    return storage;
  }

  // Adapters for absl's types (inline; instantiated only where used).
  static Deadline Realtime(absl::Time when) {
    return {NanosOf(when), CLOCK_REALTIME};
  }
  static Deadline Monotonic(absl::Time when) {
    return {NanosOf(when), CLOCK_MONOTONIC};
  }
  // `timeout` from now on CLOCK_MONOTONIC; absl::InfiniteDuration(): no
  // deadline.
  static Deadline In(absl::Duration timeout) {
    if (timeout == absl::InfiniteDuration()) return Never();
    if (timeout >= absl::Nanoseconds(kNever)) return InNanos(kNever - 1);
    if (timeout <= absl::Nanoseconds(INT64_MIN)) return InNanos(INT64_MIN);
    return InNanos(absl::ToInt64Nanoseconds(timeout));
  }
  // The deadline as an absl::Time (absl::InfiniteFuture() for kNever).
  absl::Time when() const {
    return is_never() ? absl::InfiniteFuture() : absl::FromUnixNanos(ns);
  }

 private:
  static int64_t Finite(int64_t ns) { return ns == kNever ? kNever - 1 : ns; }
  static int64_t NanosOf(absl::Time t) {
    if (t == absl::InfiniteFuture()) return kNever;
    if (t >= absl::FromUnixNanos(kNever - 1)) return kNever - 1;
    if (t <= absl::FromUnixNanos(INT64_MIN)) return INT64_MIN;
    return absl::ToUnixNanos(t);
  }
};

// CLOCK_MONOTONIC now as an absl::Time, in Deadline's encoding (time since
// boot from the Unix epoch). For tests and the library's users.
inline absl::Time MonotonicNow() { return absl::FromUnixNanos(MonotonicNanos()); }

}  // namespace parklot

#endif  // PARKLOT_RUNTIME_DEADLINE_H_
