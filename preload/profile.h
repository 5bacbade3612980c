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
// Sampling: each thread samples on average 1 in PARKLOT_PROFILE_RATE of
// its contended acquisitions (a countdown drawn uniformly from 1 to
// 2 x rate - 1); the files say "sampling period=rate", so pprof scales
// counts and delays back up. An acquisition is contended when its first
// attempt failed: spinning and parking both count as its wait.
//
// How the unlocker's stack meets the waiter's delay, with no lock and no
// allocation: a sampled waiter, before it waits, walks its own stack into
// the stack table and claims an entry for the lock's address in a small
// slot table (a count of sampled waiters per address). Every release of a
// lock first reads one process-wide count of sampled waits in progress;
// only when it is non-zero does it look the lock up in the slot table, and
// only when the lock has a claim does it walk its own stack and store the
// stack's index in the slot, before it releases. The waiter, once it
// holds the lock, reads the slot: the last release that recorded there is
// the one that let it in. Both tables are fixed-size, mmap'ed when
// profiling is on and never otherwise; a full table drops the sample and
// counts it ("discarded samples" in the file).
#ifndef PARKLOT_PRELOAD_PROFILE_H_
#define PARKLOT_PRELOAD_PROFILE_H_

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
// sampled. At exit, and by _exit, in the processes
// ReportsAtUnderscoreExit(Sink::kProfile) names.
void WriteProfiles();

// The fork child's part: no thread of the parent is waiting in the child,
// and the parent's samples are the parent's; forgets both.
void ProfileResetInChild();

// Sampled waits in progress, process-wide: what a release reads first.
extern std::atomic<uint32_t> g_profile_waits;

// Before a release of `lock` (mutex or rwlock unlock, sem_post, barrier
// arrival) that may end other threads' waits: if a sampled waiter waits
// for `lock`, records the caller's stack for it. One relaxed load when no
// sampled wait is in progress. Call only while ProfileOn().
void ProfileReleaseSlow(const void* lock);
inline void ProfileRelease(const void* lock) {
  if (g_profile_waits.load(std::memory_order_relaxed) != 0) {
    ProfileReleaseSlow(lock);
  }
}

// One contended acquisition of `lock`, from after its first attempt
// failed to the end of its wait; nothing while profiling is off. Decides
// whether this wait is sampled. Call Acquired() once the caller
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
  uint64_t claim_ = 0;  // this thread's claim number; 0: not sampled
  int64_t start_ns_ = 0;
  int32_t stack_ = -1;  // the waiter's stack in the stack table; -1: none
};

}  // namespace parklot::internal::preload

#endif  // PARKLOT_PRELOAD_PROFILE_H_
