#include "sync/once.h"

#include <pthread.h>

#include "runtime/fork.h"
#include "runtime/parking_lot.h"
#include "runtime/thread_data.h"

namespace parklot {

using internal::CurrentThreadData;
using internal::ForkHandlers;
using internal::ForkStep;
using internal::KeyOf;
using internal::Park;
using internal::RegisterForkStep;
using internal::UnparkAll;
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

// glibc's cleanup buffers (the pre-C++ pthread_cleanup_push; exported by
// libc.so.6, declared by <pthread.h> only for C without exceptions).
extern "C" void _pthread_cleanup_push(struct _pthread_cleanup_buffer* buffer,
                                      void (*routine)(void*), void* arg);
extern "C" void _pthread_cleanup_pop(struct _pthread_cleanup_buffer* buffer,
                                     int execute);

// Resets the Once to "not run" and wakes every waiter, once.
struct ResetState {
  std::atomic<uint32_t>* word;
  bool done = false;

  void Reset() {
    if (done) return;
    done = true;
    const uintptr_t key = KeyOf(word);
    if (Once::StateOf(word->exchange(Once::kNotRun,
                                     std::memory_order_release)) ==
        Once::kRunningWithWaiters) {
      UnparkAll(key);
    }
  }
  static void Run(void* self) { static_cast<ResetState*>(self)->Reset(); }
};

// Runs `f` with the reset armed for every way it can leave other than a
// return (docs/design.md section 4, Once):
//  - a cancellation or pthread_exit (a forced unwind): glibc's unwinder
//    runs the cleanup buffer as it leaves this frame, or, when it cannot
//    unwind `f`'s frames (code without unwind tables, glibc's tst-oncey3),
//    when it gives up and runs every buffer before ending the thread; a
//    destructor here would never run then, and the next caller would wait
//    for ever. glibc's pthread_once arms the same buffer.
//  - a C++ exception, which runs no buffer: the destructor pops it and
//    resets (std::call_once's contract).
// Not instrumented by ASan: the buffer must lie on the real stack, where
// glibc's unwinder compares it with frame addresses.
__attribute__((noinline, no_sanitize("address"))) void RunArmed(
    std::atomic<uint32_t>* word, absl::FunctionRef<void()> f) {
  ResetState state{word};
  struct _pthread_cleanup_buffer buffer;
  _pthread_cleanup_push(&buffer, &ResetState::Run, &state);
  struct OnException {
    struct _pthread_cleanup_buffer* buffer;
    ResetState* state;
    ~OnException() {
      // done: returned, or the unwinder already ran (and popped) the
      // buffer.
      if (state->done) return;
      _pthread_cleanup_pop(buffer, 0);
      state->Reset();
    }
  } on_exception{&buffer, &state};
  f();
  _pthread_cleanup_pop(&buffer, 0);
  state.done = true;
}

}  // namespace

uint32_t Once::CurrentGeneration() {
  return g_generation.load(std::memory_order_relaxed);
}

void Once::CallSlow(void (*fn)(void*), void* arg) {
  const auto f = [fn, arg] { fn(arg); };
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
        RunArmed(&word_, f);
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
