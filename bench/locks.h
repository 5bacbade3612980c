// The implementations the benchmarks compare, each behind the same small
// adapter so that one template measures them all in one binary:
//
//   mutexes     lock(), try_lock(), unlock()
//   condvars    a mutex and a condition variable together: lock(),
//               unlock(), wait() (mutex held), notify_one(), notify_all()
//
// Every adapter has a `kName`; "glibc" is the baseline the ratios divide
// by. Run the benchmarks plain: under the preload shim the glibc (and std)
// rows would be parklot too.
#ifndef PARKLOT_BENCH_LOCKS_H_
#define PARKLOT_BENCH_LOCKS_H_

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "absl/synchronization/mutex.h"
#include "base/futex.h"
#include "sync/condvar.h"
#include "sync/mutex.h"

namespace parklot::internal {
namespace bench {

// ---------------------------------------------------------------------------
// Mutexes.

struct ParklotLock {
  static constexpr const char* kName = "parklot";
  Mutex mu;
  void lock() { mu.Lock(); }
  bool try_lock() { return mu.TryLock(); }
  void unlock() { mu.Unlock(); }
};

struct GlibcLock {
  static constexpr const char* kName = "glibc";
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  void lock() { pthread_mutex_lock(&mu); }
  bool try_lock() { return pthread_mutex_trylock(&mu) == 0; }
  void unlock() { pthread_mutex_unlock(&mu); }
};

struct GlibcAdaptiveLock {
  static constexpr const char* kName = "glibc_adaptive";
  pthread_mutex_t mu = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
  void lock() { pthread_mutex_lock(&mu); }
  bool try_lock() { return pthread_mutex_trylock(&mu) == 0; }
  void unlock() { pthread_mutex_unlock(&mu); }
};

struct StdLock {
  static constexpr const char* kName = "std";
  std::mutex mu;
  void lock() { mu.lock(); }
  bool try_lock() { return mu.try_lock(); }
  void unlock() { mu.unlock(); }
};

struct AbslLock {
  static constexpr const char* kName = "absl";
  absl::Mutex mu;
  void lock() { mu.Lock(); }
  bool try_lock() { return mu.TryLock(); }
  void unlock() { mu.Unlock(); }
};

// The kernel futex mutex of Drepper's "Futexes Are Tricky" (its mutex
// no. 2): 0 free, 1 locked, 2 locked with possible sleepers. No spinning;
// a contended lock sleeps in FUTEX_WAIT_PRIVATE, an unlock that saw 2 makes
// one FUTEX_WAKE_PRIVATE. Syscalls go through the raw instruction
// (base/futex.h), so the kernel is measured even under the preload shim.
struct FutexLock {
  static constexpr const char* kName = "futex";
  std::atomic<uint32_t> word{0};
  void lock() {
    uint32_t c = 0;
    if (word.compare_exchange_strong(c, 1, std::memory_order_acquire,
                                     std::memory_order_relaxed)) {
      return;
    }
    if (c != 2) c = word.exchange(2, std::memory_order_acquire);
    while (c != 0) {
      FutexWaitPrivate(&word, 2);
      c = word.exchange(2, std::memory_order_acquire);
    }
  }
  bool try_lock() {
    uint32_t c = 0;
    return word.compare_exchange_strong(c, 1, std::memory_order_acquire,
                                        std::memory_order_relaxed);
  }
  void unlock() {
    if (word.fetch_sub(1, std::memory_order_release) != 1) {
      word.store(0, std::memory_order_release);
      FutexWakePrivate(&word, 1);
    }
  }
};

// ---------------------------------------------------------------------------
// Condition variables, each with the mutex it is normally used with. Two
// condition variables share the mutex (a bounded queue's "not empty" and
// "not full"); `i` picks one, 0 by default.

struct GlibcCond {
  static constexpr const char* kName = "glibc";
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cv[2] = {PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER};
  void lock() { pthread_mutex_lock(&mu); }
  void unlock() { pthread_mutex_unlock(&mu); }
  void wait(int i = 0) { pthread_cond_wait(&cv[i], &mu); }
  void notify_one(int i = 0) { pthread_cond_signal(&cv[i]); }
  void notify_all(int i = 0) { pthread_cond_broadcast(&cv[i]); }
};

struct StdCond {
  static constexpr const char* kName = "std";
  std::mutex mu;
  std::condition_variable cv[2];
  void lock() { mu.lock(); }
  void unlock() { mu.unlock(); }
  void wait(int i = 0) {
    std::unique_lock<std::mutex> l(mu, std::adopt_lock);
    cv[i].wait(l);
    l.release();
  }
  void notify_one(int i = 0) { cv[i].notify_one(); }
  void notify_all(int i = 0) { cv[i].notify_all(); }
};

struct AbslCond {
  static constexpr const char* kName = "absl";
  absl::Mutex mu;
  absl::CondVar cv[2];
  void lock() { mu.Lock(); }
  void unlock() { mu.Unlock(); }
  void wait(int i = 0) { cv[i].Wait(&mu); }
  void notify_one(int i = 0) { cv[i].Signal(); }
  void notify_all(int i = 0) { cv[i].SignalAll(); }
};

struct ParklotCond {
  static constexpr const char* kName = "parklot";
  Mutex mu;
  CondVar cv[2];
  void lock() { mu.Lock(); }
  void unlock() { mu.Unlock(); }
  void wait(int i = 0) { cv[i].Wait(mu); }
  void notify_one(int i = 0) { cv[i].NotifyOne(); }
  void notify_all(int i = 0) { cv[i].NotifyAll(); }
};

}  // namespace bench
}  // namespace parklot::internal

#endif  // PARKLOT_BENCH_LOCKS_H_
