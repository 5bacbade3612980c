// PARKLOT_PROFILE=PATH: sampled contention profiles of the locks the shim
// serves, written at exit in the legacy contention format google-pprof
// (and Go's pprof) reads, in two views:
//
//   PATH          where threads waited: the waiter's stack at a contended
//                 acquisition, with its wait;
//   PATH.holders  who made them wait: the stack of the release (unlock,
//                 sem_post, barrier arrival) that ended a sampled wait,
//                 with that waiter's wait, as Go's mutex profile
//                 attributes it.
//
// Served: mutexes of every kind the shim runs (normal, adaptive,
// recursive, errorcheck; plain and timed locks), rwlocks in both modes,
// semaphores, barriers. Not profiled: condvar waits (a wait for a signal
// is not contention), the mutex re-acquisition inside a condvar wait, try
// operations (they never wait), objects glibc keeps (process-shared,
// robust, priority), and waits that time out, are interrupted or are
// cancelled (no acquisition ended them).
//
// Sampling, by wait time (docs/design.md §5.15), as Go's block profile: a
// contended acquisition that waited d ns is sampled with probability
// min(1, d / PARKLOT_PROFILE_RATE); a sample shorter than the rate counts
// rate / d waits of rate ns each, so the files' counts and delays are
// unbiased estimates of all waits ("sampling period=1": already scaled).
// Every wait of at least the rate is kept. The decision is made when the
// wait ends: a threshold u, uniform in [1, rate], and the wait is sampled
// if it lasted at least u ns. An acquisition is contended when its first
// attempt failed: spinning and parking both count as its wait. Each
// stack's innermost frame is a pseudo-frame, the lock's address, so pprof
// groups waits by lock; the header lists each lock with its first sampled
// waiter's call site.
//
// How the unlocker's stack meets the waiter's delay, with no lock and no
// allocation: every contended waiter, before it waits, claims an entry for
// the lock's address in a small slot table (a count of waiters per
// address). Every release of a lock first reads one process-wide count of
// contended waits in progress; only when it is non-zero does it look the
// lock up in the slot table, and only when the lock has a claim does it
// record itself as the lock's holder, before it releases: the stack last
// walked at its call site (the slot keeps a few sites' stacks), or a walk
// of its own stack when the site is new (at most one such walk per 50 us
// per lock) or due a refresh (every 64th release, at most once per ms).
// A sampled waiter, once it holds the lock, walks its own stack and reads
// the slot: the last release that recorded there is the one that let it
// in. The tables are fixed-size, mmap'ed when profiling is on and never
// otherwise; a full table drops the sample and counts it ("discarded
// samples" in the file).
#ifndef PARKLOT_PRELOAD_DIAG_PROFILE_H_
#define PARKLOT_PRELOAD_DIAG_PROFILE_H_

#include <atomic>
#include <cstdint>

#include "preload/shim.h"
#include "runtime/config.h"

namespace parklot::internal::preload {

// Maps the tables and sets kHookProfile; from the shim's constructor,
// before any thread, when config.profile_path is set. If the tables
// cannot be mapped, says so on stderr and leaves profiling off.
void EnableProfile(const Config& config);

// Writes both profiles (ReportFile: truncates), unless no wait was
// sampled: then one line on the report sink says so, if any wait was
// profiled. At exit, and by _exit, in the processes
// ReportsAtUnderscoreExit(Sink::kProfile) names.
void WriteProfiles();

// The fork child's part: no thread of the parent is waiting in the child,
// and the parent's samples are the parent's; forgets both.
void ProfileResetInChild();

// Profiled (contended) waits in progress, process-wide: what a release
// reads first.
extern std::atomic<uint32_t> g_profile_waits;

// Before a release of `lock` (mutex or rwlock unlock, sem_post, barrier
// arrival) that may end other threads' waits, called from the program's
// `site` (its call's return address; nullptr if unknown): if a contended
// wait for `lock` is in progress, records the release's stack as the
// lock's holder (the stack last walked at `site`, or a walk). One relaxed
// load when no contended wait is in progress. Call only while ProfileOn().
void ProfileReleaseSlow(const void* lock, const void* site);
inline void ProfileRelease(const void* lock, const void* site) {
  if (g_profile_waits.load(std::memory_order_relaxed) != 0) {
    ProfileReleaseSlow(lock, site);
  }
}

// One contended acquisition of `lock`, from after its first attempt
// failed to the end of its wait; nothing while profiling is off. Decides,
// at its end, whether this wait is sampled. Call Acquired() once the caller
// holds `lock` (or, for a barrier, was released by the last arrival); a
// wait destroyed without it (timed out, interrupted, cancelled: the
// destructor also runs in a cancellation's unwinding) records nothing.
class ProfileWait {
 public:
  explicit ProfileWait(const void* lock) {
    if (ProfileOn()) Begin(lock);
  }
  ~ProfileWait() {
    if (claim_ != 0) Finish(false);
  }
  ProfileWait(const ProfileWait&) = delete;
  ProfileWait& operator=(const ProfileWait&) = delete;

  void Acquired() {
    if (claim_ != 0) Finish(true);
  }

 private:
  void Begin(const void* lock);
  void Finish(bool acquired);

  uintptr_t lock_ = 0;
  uint64_t claim_ = 0;  // this thread's claim number; 0: not profiled
  int64_t start_ns_ = 0;
};

}  // namespace parklot::internal::preload

#endif  // PARKLOT_PRELOAD_DIAG_PROFILE_H_
