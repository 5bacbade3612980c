// A thread that parks once on a key and records everything the parking lot
// told it, so tests can assert on results, tokens and callback arguments.
#ifndef PARKLOT_TESTS_CORE_PARKED_THREAD_H_
#define PARKLOT_TESTS_CORE_PARKED_THREAD_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/deadline.h"
#include "runtime/parking_lot.h"
#include "runtime/thread_data.h"
#include "tests/core/test_support.h"

namespace parklot::internal::coretest {

// What one Park call saw. Plain fields are written by the parking thread
// and read after Join (thread join orders them).
struct ParkOutcome {
  ParkResult result{ParkResult::kInvalid, 0};
  int validate_calls = 0;
  int before_sleep_calls = 0;
  int left_queue_calls = 0;
  uintptr_t left_queue_key = 0;
  bool was_last_thread = false;
  uint32_t slot = 0;
  // The clocks read right after Park returned, to check that a timed-out
  // park did not return before its deadline.
  absl::Time mono_after;
  absl::Time real_after;
};

class ParkedThread {
 public:
  // Starts a thread that parks on `key` with `token` and `deadline`;
  // `validate_ok` is what its validate callback returns.
  ParkedThread(uintptr_t key, ParkToken token = kDefaultParkToken,
               Deadline deadline = Deadline::Never(), bool validate_ok = true)
      : key_(key), token_(token), deadline_(deadline), ok_(validate_ok) {
    thread_ = std::thread([this] { Run(); });
  }
  ~ParkedThread() {
    if (thread_.joinable()) thread_.join();
  }
  ParkedThread(const ParkedThread&) = delete;
  ParkedThread& operator=(const ParkedThread&) = delete;

  // True once before_sleep ran: the thread is then in the key's queue (or
  // was released from it).
  bool enqueued() const { return enqueued_.load(std::memory_order_acquire); }
  bool done() const { return done_.load(std::memory_order_acquire); }
  // The thread's queue record (its parker word), published before it parks.
  ParkRecord* data() const { return data_.load(std::memory_order_acquire); }
  // The thread's slot id, published with data().
  uint32_t slot() const { return slot_.load(std::memory_order_acquire); }

  // Waits (bounded, generously) until the thread is queued.
  bool AwaitEnqueued() {
    return WaitFor([this] { return enqueued() || done(); }) && enqueued();
  }
  bool AwaitDone() {
    return WaitFor([this] { return done(); });
  }

  pthread_t native_handle() { return thread_.native_handle(); }

  const ParkOutcome& Join() {
    if (thread_.joinable()) thread_.join();
    return record_;
  }

 private:
  void Run() {
    // Register first so data() is available to tests that poke the parker.
    record_.slot = CurrentSlot();
    slot_.store(record_.slot, std::memory_order_relaxed);
    data_.store(CurrentThreadData()->Record(), std::memory_order_release);
    record_.result = Park(
        key_,
        [this] {
          ++record_.validate_calls;
          return ok_;
        },
        [this] {
          ++record_.before_sleep_calls;
          enqueued_.store(true, std::memory_order_release);
        },
        [this](uintptr_t k, bool last) {
          ++record_.left_queue_calls;
          record_.left_queue_key = k;
          record_.was_last_thread = last;
        },
        token_, deadline_);
    record_.mono_after = MonotonicNow();
    record_.real_after = absl::Now();
    done_.store(true, std::memory_order_release);
  }

  const uintptr_t key_;
  const ParkToken token_;
  const Deadline deadline_;
  const bool ok_;
  ParkOutcome record_;
  std::atomic<bool> enqueued_{false};
  std::atomic<bool> done_{false};
  std::atomic<ParkRecord*> data_{nullptr};
  std::atomic<uint32_t> slot_{0};
  std::thread thread_;
};

// Parks `n` threads on `key` one after another, each queued before the next
// starts, so their FIFO order is known: element i parked i-th with park
// token `first_token + i`.
inline std::vector<std::unique_ptr<ParkedThread>> ParkInOrder(
    uintptr_t key, int n, ParkToken first_token,
    Deadline deadline = Deadline::Never()) {
  std::vector<std::unique_ptr<ParkedThread>> threads;
  for (int i = 0; i < n; ++i) {
    threads.push_back(
        std::make_unique<ParkedThread>(key, first_token + i, deadline));
    EXPECT_TRUE(threads.back()->AwaitEnqueued()) << "thread " << i;
  }
  return threads;
}

// The park tokens of the threads parked on `key`, in queue order, read with
// an UnparkFilter that skips everyone (wakes nobody).
inline std::vector<ParkToken> QueuedTokens(uintptr_t key) {
  std::vector<ParkToken> tokens;
  UnparkFilter(
      key,
      [&](ParkToken t) {
        tokens.push_back(t);
        return FilterOp::kSkip;
      },
      [](UnparkResult r) {
        EXPECT_EQ(r.unparked_threads, 0u);
        return kDefaultUnparkToken;
      });
  return tokens;
}

}  // namespace parklot::internal::coretest

#endif  // PARKLOT_TESTS_CORE_PARKED_THREAD_H_
