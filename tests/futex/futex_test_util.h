// Helpers for the futex tests: futex(2) through the kernel or through the
// served path, threads blocked in a futex call, and /proc checks.
#ifndef PARKLOT_TESTS_FUTEX_FUTEX_TEST_UTIL_H_
#define PARKLOT_TESTS_FUTEX_FUTEX_TEST_UTIL_H_

#include <dlfcn.h>
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/futex.h"

namespace parklot::internal::futex_test {

// futex(2) with syscall()'s six registers; returns >= 0 or -errno.
using FutexFn = long (*)(long uaddr, long op, long val, long utime,
                         long uaddr2, long val3);

// The kernel itself, never the shim (the raw `syscall` instruction).
inline long KernelFutex(long uaddr, long op, long val, long utime, long uaddr2,
                        long val3) {
  return RawSyscall6(SYS_futex, uaddr, op, val, utime, uaddr2, val3);
}

// glibc's syscall(), which the shim interposes under LD_PRELOAD.
inline long SyscallFutex(long uaddr, long op, long val, long utime,
                         long uaddr2, long val3) {
  const long r = syscall(SYS_futex, uaddr, op, val, utime, uaddr2, val3);
  return r == -1 ? -errno : r;
}

inline long A(const void* p) { return reinterpret_cast<long>(p); }

// Whether the preload shim is loaded (it exports parklot_preload_active).
inline bool ShimLoaded() {
  return dlsym(RTLD_DEFAULT, "parklot_preload_active") != nullptr;
}

inline pid_t Gettid() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

// Whether thread `tid` of this process sleeps in a futex wait.
inline bool BlockedInFutex(pid_t tid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
  FILE* f = fopen(path, "r");
  if (f == nullptr) return false;
  char buf[512] = {};
  const size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char* p = strrchr(buf, ')');
  if (p == nullptr || p[1] != ' ' || p[2] != 'S') return false;
  snprintf(path, sizeof path, "/proc/self/task/%d/wchan", tid);
  f = fopen(path, "r");
  if (f == nullptr) return true;  // no wchan: trust the state
  char w[128] = {};
  const size_t m = fread(w, 1, sizeof w - 1, f);
  fclose(f);
  w[m] = '\0';
  return m == 0 || strcmp(w, "0") == 0 || strstr(w, "futex") != nullptr;
}

inline void SleepMs(int ms) {
  timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

inline int64_t NowNs(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

inline timespec TsFromNs(int64_t ns) {
  return {static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
}

// Threads each making one futex call; the call's result is kept.
class Callers {
 public:
  explicit Callers(FutexFn fn) : fn_(fn) {}
  ~Callers() { JoinAll(); }

  // Starts a thread calling fn(uaddr, op, val, utime, uaddr2, val3); with
  // `block`, returns once it sleeps in the call (false if it never did).
  bool Start(long uaddr, long op, long val, long utime, long uaddr2, long val3,
             bool block = true) {
    auto c = std::make_unique<Call>();
    Call* raw = c.get();
    FutexFn fn = fn_;
    c->thread = std::thread([raw, fn, uaddr, op, val, utime, uaddr2, val3] {
      raw->tid.store(Gettid(), std::memory_order_release);
      raw->result = fn(uaddr, op, val, utime, uaddr2, val3);
      raw->done.store(true, std::memory_order_release);
    });
    calls_.push_back(std::move(c));
    if (!block) return true;
    return WaitBlocked(calls_.size() - 1);
  }

  bool WaitBlocked(size_t i) {
    Call& c = *calls_[i];
    pid_t tid;
    while ((tid = c.tid.load(std::memory_order_acquire)) == 0) SleepMs(1);
    int stable = 0;
    for (int ms = 0; ms < 10000; ++ms) {
      if (c.done.load(std::memory_order_acquire)) return false;
      stable = BlockedInFutex(tid) ? stable + 1 : 0;
      if (stable >= 3) return true;
      SleepMs(1);
    }
    return false;
  }

  size_t size() const { return calls_.size(); }
  bool done(size_t i) const {
    return calls_[i]->done.load(std::memory_order_acquire);
  }
  long result(size_t i) const { return calls_[i]->result; }
  pthread_t handle(size_t i) { return calls_[i]->thread.native_handle(); }

  size_t DoneCount() const {
    size_t n = 0;
    for (size_t i = 0; i < calls_.size(); ++i) n += done(i);
    return n;
  }
  // Waits up to 10 s for at least `n` calls to have returned, then a little
  // longer so that extra returns show. Returns the count.
  size_t SettleDone(size_t n) {
    for (int ms = 0; ms < 10000 && DoneCount() < n; ++ms) SleepMs(1);
    SleepMs(15);
    return DoneCount();
  }
  // Which calls have returned, as a string of 0/1.
  std::string DoneSet() const {
    std::string s;
    for (size_t i = 0; i < calls_.size(); ++i) s += done(i) ? '1' : '0';
    return s;
  }
  void JoinAll() {
    for (auto& c : calls_) {
      if (c->thread.joinable()) c->thread.join();
    }
  }
  std::string Results() {
    JoinAll();
    std::string s;
    for (size_t i = 0; i < calls_.size(); ++i) {
      if (i) s += ",";
      s += std::to_string(calls_[i]->result);
    }
    return s;
  }

 private:
  struct Call {
    std::thread thread;
    std::atomic<pid_t> tid{0};
    std::atomic<bool> done{false};
    long result = 0;
  };
  FutexFn fn_;
  std::vector<std::unique_ptr<Call>> calls_;
};

}  // namespace parklot::internal::futex_test

#endif  // PARKLOT_TESTS_FUTEX_FUTEX_TEST_UTIL_H_
