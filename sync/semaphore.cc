#include "sync/semaphore.h"

#include <errno.h>

#include "runtime/parking_lot.h"
#include "runtime/spin.h"
#include "runtime/thread_data.h"

namespace parklot {

using internal::CurrentThreadData;
using internal::FilterOp;
using internal::KeyOf;
using internal::OnlyUnparkUpToIsSafe;
using internal::ParkResult;
using internal::ParkToken;
using internal::Park;
using internal::SpinWait;
using internal::ThreadData;
using internal::UnparkFilter;
using internal::UnparkResult;
using internal::UnparkToken;
using internal::UnparkUpTo;
using internal::kDefaultParkToken;
using internal::kNoSlot;
namespace {

// 0 (what any stray unpark delivers): re-check the word. kTokenUnit: the
// releaser took this waiter off the waiter count and gave it one unit.
constexpr UnparkToken kTokenRetry = 0;
constexpr UnparkToken kTokenUnit = 1;

}  // namespace

bool Semaphore::TryAcquire() {
  uint64_t w = word_.load(std::memory_order_relaxed);
  while (ValueOf(w) != 0) {
    if (word_.compare_exchange_weak(w, w - 1, std::memory_order_acquire,
                                    std::memory_order_relaxed)) {
      return true;
    }
  }
  return false;
}

int Semaphore::AcquireSlow(const Deadline& deadline) {
  const uintptr_t key = KeyOf(&word_);
  // Take a unit, or register as a waiter, in one atomic step; spin first
  // while it can pay (no owner to watch: only the CPUs and the moving
  // average of recent waits decide).
  SpinWait spin(&ema_);
  uint64_t w = word_.load(std::memory_order_relaxed);
  for (;;) {
    if (ValueOf(w) != 0) {
      if (word_.compare_exchange_weak(w, w - 1, std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
        spin.Acquired();
        return 0;
      }
      continue;
    }
    if (spin.Spin(kNoSlot)) {
      w = word_.load(std::memory_order_relaxed);
      continue;
    }
    if (word_.compare_exchange_weak(w, w + kOneWaiter,
                                    std::memory_order_relaxed,
                                    std::memory_order_relaxed)) {
      break;
    }
  }

  // Thread cancellation (sem_wait is a cancellation point under the shim):
  // withdraw the registration, or give back a unit handed to us.
  struct UnwindGuard {
    Semaphore* sem;
    bool armed = true;
    ~UnwindGuard() {
      if (!armed) return;
      const ThreadData* td = CurrentThreadData();
      if (td->unwound_unparked && td->unwound_token == kTokenUnit) {
        sem->Release(1);  // the releaser already withdrew our registration
      } else {
        sem->word_.fetch_sub(kOneWaiter, std::memory_order_relaxed);
      }
    }
  } guard{this};
  for (;;) {
    // validate runs under the bucket lock that Release's unpark also takes:
    // a Release that published units after this check wakes us.
    const ParkResult r = Park(
        key,
        [this] { return ValueOf(word_.load(std::memory_order_relaxed)) == 0; },
        [] {}, [](uintptr_t, bool) {}, kDefaultParkToken, deadline);
    if (r.unparked() && r.token == kTokenUnit) {
      guard.armed = false;
      (void)word_.load(std::memory_order_acquire);
      return 0;
    }
    // Take a unit and deregister in one step; on timeout with none left,
    // deregister and fail.
    w = word_.load(std::memory_order_relaxed);
    for (;;) {
      if (ValueOf(w) != 0) {
        if (word_.compare_exchange_weak(w, w - 1 - kOneWaiter,
                                        std::memory_order_acquire,
                                        std::memory_order_relaxed)) {
          guard.armed = false;
          return 0;
        }
        continue;
      }
      if (!r.timed_out() && !r.interrupted()) break;  // park again
      if (word_.compare_exchange_weak(w, w - kOneWaiter,
                                      std::memory_order_relaxed,
                                      std::memory_order_relaxed)) {
        guard.armed = false;
        return r.interrupted() ? EINTR : ETIMEDOUT;
      }
    }
  }
}

int Semaphore::AcquireOrInterrupt(Deadline deadline) {
  return FastAcquire() ? 0 : AcquireSlow(deadline);
}

bool Semaphore::Release(uint32_t n) {
  if (n == 0) return true;
  const uintptr_t key = KeyOf(&word_);
  uint64_t w = word_.load(std::memory_order_relaxed);
  for (;;) {
    if (n > kMaxValue - ValueOf(w)) return false;
    if (WaitersOf(w) != 0) break;
    // No waiter registered: publishing is all there is to do. A thread
    // that registers after this sees the units.
    if (word_.compare_exchange_weak(w, w + n, std::memory_order_release,
                                    std::memory_order_relaxed)) {
      return true;
    }
  }

  // Waiters registered, and this may be a signal handler (sem_post is
  // async-signal-safe) that must not take a bucket lock or register:
  // publish the units, then wake up to n waiters, which take them as
  // anyone could (no fair handoff). Only the key is used after publishing.
  if (OnlyUnparkUpToIsSafe()) {
    while (!word_.compare_exchange_weak(w, w + n, std::memory_order_release,
                                        std::memory_order_relaxed)) {
      if (n > kMaxValue - ValueOf(w)) return false;
    }
    UnparkUpTo(key, n);
    return true;
  }

  // Waiters registered. Wake up to n parked ones; the units are published
  // by the compare-and-swap in the callback, under the bucket lock, and
  // from then on only the parking lot is touched (by key and by the woken
  // threads' own data), never this semaphore.
  uint32_t to_wake = n;
  bool ok = true;
  UnparkFilter(
      key,
      [&to_wake](ParkToken) {
        if (to_wake == 0) return FilterOp::kStop;
        --to_wake;
        return FilterOp::kUnpark;
      },
      [&](UnparkResult result) -> UnparkToken {
        uint64_t cur = word_.load(std::memory_order_relaxed);
        const uint64_t woken = result.unparked_threads;
        for (;;) {
          if (n > kMaxValue - ValueOf(cur)) {
            ok = false;  // raced past the limit: change nothing
            return kTokenRetry;
          }
          uint64_t next;
          UnparkToken token;
          if (result.be_fair && woken != 0) {
            // Hand one unit to each woken waiter and deregister it.
            next = cur + (n - woken) - woken * kOneWaiter;
            token = kTokenUnit;
          } else {
            next = cur + n;
            token = kTokenRetry;
          }
          if (word_.compare_exchange_weak(cur, next,
                                          std::memory_order_release,
                                          std::memory_order_relaxed)) {
            return token;
          }
        }
      });
  return ok;
}

}  // namespace parklot
