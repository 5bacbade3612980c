#include "sync/once.h"

#include <pthread.h>

#include "runtime/fork.h"
#include "runtime/parking_lot.h"
#include "runtime/thread_data.h"

namespace parklot {
namespace {

// The fork generation, already shifted into place (see Once). Written only
// by the child handler below, while the child has a single thread; threads
// it starts later see the new value through pthread_create.
std::atomic<uint32_t> g_generation{0};

void BumpGenerationInChild() {
  g_generation.store(g_generation.load(std::memory_order_relaxed) +
                         (uint32_t{1} << Once::kGenerationShift),
                     std::memory_order_relaxed);
}

// Registered at load time, so it runs before the child handlers of the
// program (which may call pthread_once).
constexpr ForkHandlers kOnceForkStep{nullptr, nullptr, BumpGenerationInChild};

__attribute__((constructor)) void RegisterForkHandler() {
  RegisterForkStep(ForkStep::kOnceGeneration, &kOnceForkStep);
}

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
    if (Once::StateOf(
            word_->exchange(Once::kNotRun, std::memory_order_release)) ==
        Once::kRunningWithWaiters) {
      UnparkAll(key);
    }
  }
  void Dismiss() { word_ = nullptr; }

 private:
  std::atomic<uint32_t>* word_;
};

}  // namespace

uint32_t Once::CurrentGeneration() {
  return g_generation.load(std::memory_order_relaxed);
}

void Once::CallSlow(absl::FunctionRef<void()> f) {
  const uintptr_t key = KeyOf(&word_);
  uint32_t w = word_.load(std::memory_order_acquire);
  for (;;) {
    if (w == kDone) return;
    // Read each round: a fork (from a signal handler of this thread) may
    // have changed it since the last.
    const uint32_t gen = CurrentGeneration();
    const uint32_t state = StateOf(w);
    const bool running = state == kRunning || state == kRunningWithWaiters;
    if (w == kNotRun || (running && (w & ~kStateMask) != gen)) {
      // Not run, or running in a process this one was forked from: the
      // thread running it does not exist here, so run it (as glibc).
      if (word_.compare_exchange_weak(w, gen | kRunning,
                                      std::memory_order_acquire,
                                      std::memory_order_acquire)) {
        // The thread's first use of the lot allocates and registers it
        // (runtime/thread_data.h): do it here, not in the guard's
        // UnparkAll while f() leaves by an exception or a cancellation's
        // forced unwind.
        CurrentThreadData();
        ResetOnUnwind guard(&word_);
        f();
        guard.Dismiss();
        // Publish. After this exchange a waiter may return and free the
        // Once: touch only the parking lot (by key) from here on.
        if (StateOf(word_.exchange(kDone, std::memory_order_acq_rel)) ==
            kRunningWithWaiters) {
          UnparkAll(key);
        }
        return;
      }
      continue;  // w reloaded
    }
    if (w == (gen | kRunning)) {
      if (!word_.compare_exchange_weak(w, gen | kRunningWithWaiters,
                                       std::memory_order_acquire,
                                       std::memory_order_acquire)) {
        continue;
      }
      w = gen | kRunningWithWaiters;
    }
    // Running with waiters in this generation, or a value this class never
    // writes (corrupt or foreign memory: treated as running, as
    // pthread_once would): sleep until the word changes.
    Park(key, [this, w] { return word_.load(std::memory_order_relaxed) == w; });
    w = word_.load(std::memory_order_acquire);
  }
}

}  // namespace parklot
