// parklot::Once: run an initialization exactly once (std::call_once,
// pthread_once, absl::call_once semantics) in 4 bytes.
//
// The first caller runs the function; concurrent callers park on the Once's
// address until it finishes, then return without running it. If the
// function exits by an exception, or by a forced unwind (pthread_cancel,
// pthread_exit: the unwinder runs destructors), the Once returns to "not
// run" and every parked caller is woken; the first to get there runs its
// function, as std::call_once ([thread.once.callonce]: an "exceptional
// execution" is not a returning one) and POSIX pthread_once (a cancelled
// init routine leaves once_control as if never called) require.
//
// Zero-filled memory is a fresh Once (PTHREAD_ONCE_INIT is 0), so the shim
// can use it in place inside a pthread_once_t.
//
// fork(): a child forked while a thread of the parent runs the function
// inherits a Once that no thread of the child will ever finish. As glibc's
// pthread_once does, the "running" states carry the fork generation they
// were entered in (a process-wide counter that a pthread_atfork child
// handler bumps), and a call that finds "running" from an older generation
// treats the Once as not run: the child runs its function. A completed
// Once stays completed across fork.
#ifndef PARKLOT_SYNC_ONCE_H_
#define PARKLOT_SYNC_ONCE_H_

#include "sync/requires_cxx20.h"  // first: one #error before C++20
#if PARKLOT_CXX20

#include <atomic>
#include <cstdint>
#include <functional>
#include <utility>


namespace parklot {

// Thread-safe: any number of threads may call Call() concurrently. Calling
// Call() on the same Once from inside its own function deadlocks (as with
// std::call_once, where it is undefined). No heap allocation; waiters never
// spin, they park at once.
//
// Destruction: once every caller that waited has returned, the Once may be
// destroyed even while the thread that ran the function is still inside
// Call(): after publishing "done" it touches only the parking lot
// (docs/design.md section 6, invariant 2). A word holding a value this class
// never writes (corrupt memory) is treated as "running" and waited on.
class Once {
 public:
  // The word: its low two bits are the state; in the two running states,
  // the bits above hold the fork generation (modulo 2^30) the function was
  // started in. kNotRun and kDone are the whole word.
  static constexpr uint32_t kNotRun = 0;
  static constexpr uint32_t kRunning = 1;
  static constexpr uint32_t kRunningWithWaiters = 2;
  static constexpr uint32_t kDone = 3;
  static constexpr uint32_t kStateMask = 3;
  static constexpr int kGenerationShift = 2;

  // The state bits of a word (kNotRun ... kDone).
  static constexpr uint32_t StateOf(uint32_t word) { return word & kStateMask; }
  // The calling process's fork generation, shifted into place: the bits
  // that mark a running state as this process's. 0 until the first fork;
  // a fork's child gets its parent's generation plus one.
  static uint32_t CurrentGeneration();

  constexpr Once() = default;
  Once(const Once&) = delete;
  Once& operator=(const Once&) = delete;

  // Calls std::invoke(f, args...) if no call on this Once has completed;
  // returns once some call has completed (normally). In a child process, a
  // call whose function was still running in the parent at fork counts as
  // never made (see above). Every write made by
  // the completed call happens-before the return of every Call() (acquire/
  // release). If `f` throws, the exception propagates to this caller and
  // the Once stays not-run, so a later (or a parked concurrent) call runs
  // its function. Done fast path: one acquire load.
  template <typename F, typename... Args>
  void Call(F&& f, Args&&... args) {
    if (__builtin_expect(word_.load(std::memory_order_acquire) == kDone, 1)) {
      return;
    }
    auto thunk = [&] {
      std::invoke(std::forward<F>(f), std::forward<Args>(args)...);
    };
    CallSlow([](void* t) { (*static_cast<decltype(thunk)*>(t))(); }, &thunk);
  }

  // The non-template core: as Call(fn, arg). Function pointers, not a
  // function-reference type: this is libparklot.so's ABI, which holds no
  // Abseil type (README, "ABI").
  void CallSlow(void (*fn)(void*), void* arg);

  // True once a call has completed. Acquire: the init's writes are visible
  // to a caller that sees true.
  bool done() const { return word_.load(std::memory_order_acquire) == kDone; }

  // The state word, for the shim and tests.
  std::atomic<uint32_t>* word() { return &word_; }

 private:
  std::atomic<uint32_t> word_{kNotRun};
};

// std::call_once-style spelling.
template <typename F, typename... Args>
void CallOnce(Once& once, F&& f, Args&&... args) {
  once.Call(std::forward<F>(f), std::forward<Args>(args)...);
}

}  // namespace parklot

#endif  // PARKLOT_CXX20

#endif  // PARKLOT_SYNC_ONCE_H_
