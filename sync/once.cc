#include "sync/once.h"

#include "runtime/parking_lot.h"

namespace parklot {
namespace {

// Resets the Once to "not run" and wakes every waiter if the init function
// leaves by an exception or a forced unwind (pthread_cancel).
class ResetOnUnwind {
 public:
  explicit ResetOnUnwind(std::atomic<uint32_t>* word) : word_(word) {}
  ResetOnUnwind(const ResetOnUnwind&) = delete;
  ResetOnUnwind& operator=(const ResetOnUnwind&) = delete;
  ~ResetOnUnwind() {
    if (word_ == nullptr) return;
    const uintptr_t key = KeyOf(word_);
    if (word_->exchange(Once::kNotRun, std::memory_order_release) ==
        Once::kRunningWithWaiters) {
      UnparkAll(key);
    }
  }
  void Dismiss() { word_ = nullptr; }

 private:
  std::atomic<uint32_t>* word_;
};

}  // namespace

void Once::CallSlow(absl::FunctionRef<void()> f) {
  const uintptr_t key = KeyOf(&word_);
  uint32_t w = word_.load(std::memory_order_acquire);
  for (;;) {
    switch (w) {
      case kDone:
        return;
      case kNotRun:
        if (word_.compare_exchange_weak(w, kRunning,
                                        std::memory_order_acquire,
                                        std::memory_order_acquire)) {
          ResetOnUnwind guard(&word_);
          f();
          guard.Dismiss();
          // Publish. After this exchange a waiter may return and free the
          // Once: touch only the parking lot (by key) from here on.
          if (word_.exchange(kDone, std::memory_order_acq_rel) ==
              kRunningWithWaiters) {
            UnparkAll(key);
          }
          return;
        }
        continue;  // w reloaded
      case kRunning:
        if (!word_.compare_exchange_weak(w, kRunningWithWaiters,
                                         std::memory_order_acquire,
                                         std::memory_order_acquire)) {
          continue;
        }
        [[fallthrough]];
      case kRunningWithWaiters:
        Park(key, [this] {
          return word_.load(std::memory_order_relaxed) == kRunningWithWaiters;
        });
        w = word_.load(std::memory_order_acquire);
        continue;
      default:
        // Not a value this class writes (corrupt or foreign memory): treat
        // as running and wait, as pthread_once would on garbage.
        Park(key, [this, w] {
          return word_.load(std::memory_order_relaxed) == w;
        });
        w = word_.load(std::memory_order_acquire);
        continue;
    }
  }
}

}  // namespace parklot
