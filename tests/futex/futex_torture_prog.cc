// Torture for served syscall(SYS_futex) operations, run under the shim by
// futex_torture_test.sh (and runnable plain, against the kernel, for
// comparison). Each mode checks its own invariants, prints one line, and
// exits non-zero on any failure; a watchdog aborts a hang.
//
//   atomic      C++20 std::atomic<int>::wait / notify_one / notify_all with
//               many threads (a token ring and a counting semaphore). Built
//               twice: with _GLIBCXX_HAVE_LINUX_FUTEX_PRIVATE (libstdc++ 12
//               otherwise issues shared futex ops, which the shim passes to
//               the kernel) and without.
//   mutex       a hand-written futex mutex ("Futexes Are Tricky", mutex 2)
//               under millions of lock/unlock pairs
//   condvar     that mutex with a sequence-counter condvar: a bounded queue
//               with producers and consumers; signal unlocks and wakes in
//               one FUTEX_WAKE_OP, broadcast requeues the waiters from the
//               condvar word onto the mutex word (FUTEX_CMP_REQUEUE)
//   timeouts    waits with relative and absolute timeouts on both clocks,
//               racing wakes: no early timeout, every wait ends
//   join        pthread_join of many threads that use served futexes (the
//               kernel's CLONE_CHILD_CLEARTID wake still ends the join)
//   fork        a MAP_SHARED futex word across fork(): shared waits and
//               wakes go to the kernel and work; the child's lot works
//   faults      waits, requeues and wake-ops on words whose pages another
//               thread keeps making PROT_NONE, read-only and readable
//               again, or truncates away (SIGBUS) and back: every call
//               returns a result the kernel may (EFAULT among them, some
//               while a served call holds a bucket lock), none crashes or
//               hangs
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/util/watchdog.h"

namespace {

int g_failures = 0;
#define CHECK(cond)                                                       \
  do {                                                                    \
    if (!(cond)) {                                                        \
      fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);    \
      ++g_failures;                                                       \
    }                                                                     \
  } while (0)

long Futex(void* uaddr, int op, uint32_t val, const timespec* ts,
           void* uaddr2, uint32_t val3) {
  return syscall(SYS_futex, uaddr, op, val, ts, uaddr2, val3);
}
long FutexVal2(void* uaddr, int op, uint32_t val, long val2, void* uaddr2,
               uint32_t val3) {
  return syscall(SYS_futex, uaddr, op, val, val2, uaddr2, val3);
}

// A result a futex wait may return (callers re-check their condition).
bool WaitResultOk(long r) {
  return r == 0 || (r == -1 && (errno == EAGAIN || errno == EINTR));
}

int64_t NowNs(clockid_t c) {
  timespec ts;
  clock_gettime(c, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// ---------------------------------------------------------------------------

void Atomic(int threads, int rounds) {
  // Token ring: thread i proceeds when value % threads == i.
  std::atomic<int> turn{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&turn, t, threads, rounds] {
      for (int i = 0; i < rounds; ++i) {
        int v = turn.load();
        while (v % threads != t) {
          turn.wait(v);
          v = turn.load();
        }
        turn.store(v + 1);
        turn.notify_all();
      }
    });
  }
  for (auto& t : ts) t.join();
  CHECK(turn.load() == threads * rounds);

  // A counting semaphore on one atomic: notify_one per post.
  std::atomic<int> count{0};
  std::atomic<int> taken{0};
  const int items = threads * rounds;
  std::vector<std::thread> cs;
  for (int t = 0; t < threads; ++t) {
    cs.emplace_back([&] {
      for (;;) {
        int c = count.load();
        if (c == -1) return;
        if (c == 0) {
          count.wait(0);
          continue;
        }
        if (count.compare_exchange_weak(c, c - 1)) taken.fetch_add(1);
      }
    });
  }
  for (int i = 0; i < items; ++i) {
    count.fetch_add(1);
    count.notify_one();
  }
  while (taken.load() < items) std::this_thread::yield();
  count.store(-1);
  count.notify_all();
  for (auto& t : cs) t.join();
  CHECK(taken.load() == items);
  printf("atomic: %d threads, %d ring steps, %d semaphore items\n", threads,
         threads * rounds, items);
}

// ---------------------------------------------------------------------------
// Drepper's mutex 2: 0 unlocked, 1 locked, 2 locked with waiters.

struct FutexMutex {
  alignas(64) std::atomic<uint32_t> word{0};

  void Lock() {
    uint32_t c = 0;
    if (word.compare_exchange_strong(c, 1)) return;
    if (c != 2) c = word.exchange(2);
    while (c != 0) {
      const long r = Futex(&word, FUTEX_WAIT_PRIVATE, 2, nullptr, nullptr, 0);
      if (!WaitResultOk(r)) {
        fprintf(stderr, "FAIL: mutex wait: %s\n", strerror(errno));
        ++g_failures;
      }
      c = word.exchange(2);
    }
  }
  // After a wait the caller may have been requeued here: lock as contended.
  void LockContended() {
    while (word.exchange(2) != 0) {
      Futex(&word, FUTEX_WAIT_PRIVATE, 2, nullptr, nullptr, 0);
    }
  }
  void Unlock() {
    if (word.fetch_sub(1) != 1) {
      word.store(0);
      Futex(&word, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
    }
  }
};

void Mutex(int threads, int iterations) {
  FutexMutex m;
  uint64_t counter = 0;  // guarded by m
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&] {
      for (int i = 0; i < iterations; ++i) {
        m.Lock();
        ++counter;
        m.Unlock();
      }
    });
  }
  for (auto& t : ts) t.join();
  CHECK(counter == static_cast<uint64_t>(threads) * iterations);
  CHECK(m.word.load() == 0);
  printf("mutex: %d threads x %d lock/unlock = %llu\n", threads, iterations,
         static_cast<unsigned long long>(counter));
}

// A condvar on a sequence word, used with FutexMutex.
struct FutexCondVar {
  alignas(64) std::atomic<uint32_t> seq{0};

  void Wait(FutexMutex* m) {
    const uint32_t s = seq.load();
    m->Unlock();
    const long r = Futex(&seq, FUTEX_WAIT_PRIVATE, s, nullptr, nullptr, 0);
    if (!WaitResultOk(r)) {
      fprintf(stderr, "FAIL: cond wait: %s\n", strerror(errno));
      ++g_failures;
    }
    m->LockContended();
  }
  // Signal, then unlock the mutex: one FUTEX_WAKE_OP wakes a condvar waiter
  // and, if the mutex had waiters (old value > 1), one of them, with the
  // mutex released (set to 0) under the futex locks.
  void SignalAndUnlock(FutexMutex* m) {
    seq.fetch_add(1);
    const uint32_t op = FUTEX_OP(FUTEX_OP_SET, 0, FUTEX_OP_CMP_GT, 1);
    const long r = FutexVal2(&seq, FUTEX_WAKE_OP_PRIVATE, 1, 1, &m->word, op);
    CHECK(r >= 0);
  }
  // Broadcast while holding the mutex: wake one, requeue the rest onto the
  // mutex word (marked contended, so its unlock wakes them one by one).
  void Broadcast(FutexMutex* m) {
    seq.fetch_add(1);
    m->word.store(2);
    long r;
    do {
      r = FutexVal2(&seq, FUTEX_CMP_REQUEUE_PRIVATE, 1, INT_MAX, &m->word,
                    seq.load());
    } while (r == -1 && errno == EAGAIN);
    CHECK(r >= 0);
  }
};

void CondVar(int producers, int consumers, int items_each, int capacity) {
  FutexMutex m;
  FutexCondVar not_empty, not_full;
  std::vector<int> queue;  // guarded by m
  int64_t sum_in = 0, sum_out = 0;
  int consumed = 0, broadcasts = 0;
  bool closing = false;
  const int total = producers * items_each;
  std::vector<std::thread> ts;
  for (int p = 0; p < producers; ++p) {
    ts.emplace_back([&, p] {
      for (int i = 0; i < items_each; ++i) {
        const int item = p * items_each + i;
        m.Lock();
        while (static_cast<int>(queue.size()) >= capacity) not_full.Wait(&m);
        queue.push_back(item);
        sum_in += item;
        not_empty.SignalAndUnlock(&m);
      }
    });
  }
  for (int c = 0; c < consumers; ++c) {
    ts.emplace_back([&] {
      for (;;) {
        m.Lock();
        while (queue.empty() && !closing) not_empty.Wait(&m);
        if (queue.empty()) {
          m.Unlock();
          return;
        }
        sum_out += queue.back();
        queue.pop_back();
        ++consumed;
        if (consumed % 64 == 0 || consumed == total) {
          ++broadcasts;
          not_full.Broadcast(&m);  // wakes every producer: requeue
          if (consumed == total) {
            closing = true;
            not_empty.Broadcast(&m);
          }
          m.Unlock();
        } else {
          not_full.SignalAndUnlock(&m);
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  CHECK(consumed == total);
  CHECK(sum_in == sum_out);
  CHECK(queue.empty());
  printf("condvar: %d producers, %d consumers, %d items, %d broadcasts\n",
         producers, consumers, total, broadcasts);
}

// ---------------------------------------------------------------------------

void Timeouts(int threads, int waits) {
  alignas(64) static std::atomic<uint32_t> word{0};
  std::atomic<bool> stop{false};
  std::atomic<int> timed_out{0}, woken{0}, early{0}, bad{0};
  std::thread waker([&] {
    while (!stop.load()) {
      word.fetch_add(1);
      Futex(&word, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
      timespec ts = {0, 700000};
      nanosleep(&ts, nullptr);
    }
  });
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < waits; ++i) {
        const uint32_t v = word.load();
        const int kind = (t + i) % 3;
        const int64_t timeout_ns = 200000 + 100000 * (i % 13);
        long r;
        int64_t deadline;
        clockid_t clock = CLOCK_MONOTONIC;
        if (kind == 0) {
          timespec rel = {0, timeout_ns};
          deadline = NowNs(clock) + timeout_ns;
          r = Futex(&word, FUTEX_WAIT_PRIVATE, v, &rel, nullptr, 0);
        } else {
          clock = kind == 1 ? CLOCK_MONOTONIC : CLOCK_REALTIME;
          deadline = NowNs(clock) + timeout_ns;
          timespec abs = {static_cast<time_t>(deadline / 1000000000),
                          static_cast<long>(deadline % 1000000000)};
          r = Futex(&word,
                    FUTEX_WAIT_BITSET_PRIVATE |
                        (kind == 2 ? FUTEX_CLOCK_REALTIME : 0),
                    v, &abs, nullptr, FUTEX_BITSET_MATCH_ANY);
        }
        if (r == -1 && errno == ETIMEDOUT) {
          timed_out.fetch_add(1);
          if (NowNs(clock) < deadline) early.fetch_add(1);
        } else if (WaitResultOk(r)) {
          woken.fetch_add(1);
        } else {
          bad.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  stop.store(true);
  waker.join();
  CHECK(early.load() == 0);
  CHECK(bad.load() == 0);
  CHECK(timed_out.load() + woken.load() == threads * waits);
  CHECK(timed_out.load() > 0);
  printf("timeouts: %d waits, %d timed out (none early), %d woken\n",
         threads * waits, timed_out.load(), woken.load());
}

// ---------------------------------------------------------------------------

void Join(int rounds, int threads) {
  alignas(64) static std::atomic<uint32_t> gate{0};
  int joined = 0;
  for (int r = 0; r < rounds; ++r) {
    gate.store(0);
    std::vector<pthread_t> ts(threads);
    for (int t = 0; t < threads; ++t) {
      CHECK(pthread_create(&ts[t], nullptr, [](void*) -> void* {
              while (gate.load() == 0) {
                Futex(&gate, FUTEX_WAIT_PRIVATE, 0, nullptr, nullptr, 0);
              }
              return nullptr;
            }, nullptr) == 0);
    }
    // Let the threads reach their waits before the gate opens.
    timespec pause = {0, 2000000};
    nanosleep(&pause, nullptr);
    gate.store(1);
    Futex(&gate, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
    for (int t = 0; t < threads; ++t) {
      if (t % 2 == 0) {
        CHECK(pthread_join(ts[t], nullptr) == 0);
      } else {
        timespec abs;
        clock_gettime(CLOCK_REALTIME, &abs);
        abs.tv_sec += 30;
        CHECK(pthread_timedjoin_np(ts[t], nullptr, &abs) == 0);
      }
      ++joined;
    }
  }
  printf("join: %d threads joined\n", joined);
}

// ---------------------------------------------------------------------------

void Faults(int threads, absl::Duration duration) {
  const long pg = sysconf(_SC_PAGESIZE);
  char* anon = static_cast<char*>(mmap(nullptr, pg, PROT_READ | PROT_WRITE,
                                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  const int fd = memfd_create("futex_faults", MFD_CLOEXEC);
  CHECK(anon != MAP_FAILED && fd >= 0 && ftruncate(fd, pg) == 0);
  char* file = static_cast<char*>(
      mmap(nullptr, pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  CHECK(file != MAP_FAILED);
  if (g_failures != 0) return;
  // The words stay 0: the wake-ops add 0, so waits on 0 park when they can.
  uint32_t* words[4] = {reinterpret_cast<uint32_t*>(anon),
                        reinterpret_cast<uint32_t*>(anon + 64),
                        reinterpret_cast<uint32_t*>(file),
                        reinterpret_cast<uint32_t*>(file + 64)};
  std::atomic<bool> stop{false};
  std::thread toggler([&] {
    for (int k = 0; !stop.load(std::memory_order_relaxed); ++k) {
      switch (k % 3) {
        case 0:
          mprotect(anon, pg, PROT_NONE);
          CHECK(ftruncate(fd, 0) == 0);
          break;
        case 1:
          mprotect(anon, pg, PROT_READ);
          CHECK(ftruncate(fd, pg) == 0);
          break;
        case 2: {
          // Good pages for longer: calls then park and wake, and a page
          // may go bad under a served call's bucket lock.
          mprotect(anon, pg, PROT_READ | PROT_WRITE);
          const timespec good = {0, 100000};
          nanosleep(&good, nullptr);
          break;
        }
      }
      std::this_thread::yield();
    }
    mprotect(anon, pg, PROT_READ | PROT_WRITE);
    CHECK(ftruncate(fd, pg) == 0);
  });
  enum { kWait, kWaitBitset, kCmpRequeue, kWakeOp, kWake, kKinds };
  static const char* const kNames[kKinds] = {"wait", "wait_bitset",
                                             "cmp_requeue", "wake_op", "wake"};
  std::atomic<long> calls[kKinds] = {}, efaults[kKinds] = {};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      uint32_t rng = 2463534242u + static_cast<uint32_t>(t);
      while (!stop.load(std::memory_order_relaxed)) {
        rng ^= rng << 13;
        rng ^= rng >> 17;
        rng ^= rng << 5;
        const int kind = static_cast<int>(rng % kKinds);
        uint32_t* a = words[(rng >> 8) % 4];
        uint32_t* b = words[(rng >> 12) % 4];
        const timespec rel = {0, 200000};
        long r = 0;
        switch (kind) {
          case kWait:
            r = Futex(a, FUTEX_WAIT_PRIVATE, 0, &rel, nullptr, 0);
            break;
          case kWaitBitset: {
            timespec when;
            const int64_t ns = NowNs(CLOCK_MONOTONIC) + 200000;
            when.tv_sec = ns / 1000000000;
            when.tv_nsec = ns % 1000000000;
            r = Futex(a, FUTEX_WAIT_BITSET_PRIVATE, 0, &when, nullptr,
                      FUTEX_BITSET_MATCH_ANY);
            break;
          }
          case kCmpRequeue:
            r = FutexVal2(a, FUTEX_CMP_REQUEUE_PRIVATE, 1, 1, b, 0);
            break;
          case kWakeOp:
            r = FutexVal2(a, FUTEX_WAKE_OP_PRIVATE, 1, 1, b,
                          FUTEX_OP(FUTEX_OP_ADD, 0, FUTEX_OP_CMP_EQ, 0));
            break;
          case kWake:
            r = Futex(a, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
            break;
        }
        const int e = r == -1 ? errno : 0;
        calls[kind].fetch_add(1, std::memory_order_relaxed);
        if (e == EFAULT) efaults[kind].fetch_add(1, std::memory_order_relaxed);
        bool ok = r >= 0 || e == EFAULT;
        if (kind == kWait || kind == kWaitBitset) {
          ok = r == 0 || e == EAGAIN || e == ETIMEDOUT || e == EINTR ||
               e == EFAULT;
        } else if (kind == kCmpRequeue) {
          ok = ok || e == EAGAIN;
        } else if (kind == kWake) {
          ok = r >= 0;
        }
        if (!ok) {
          fprintf(stderr, "faults: %s returned %ld (%s)\n", kNames[kind], r,
                  strerror(e));
          CHECK(ok);
        }
      }
    });
  }
  absl::SleepFor(duration);
  stop.store(true);
  for (auto& w : workers) w.join();
  toggler.join();
  // Every call that reads or writes a word met a bad page at some point.
  std::string counts;
  for (int k = 0; k < kKinds; ++k) {
    counts += std::string(" ") + kNames[k] + "=" +
              std::to_string(calls[k].load()) + "/" +
              std::to_string(efaults[k].load());
    if (k != kWake) CHECK(efaults[k].load() > 0);
  }
  printf("faults: calls/EFAULT%s\n", counts.c_str());
  munmap(anon, pg);
  munmap(file, pg);
  close(fd);
}

// ---------------------------------------------------------------------------

void Fork(int pings) {
  auto* shared = static_cast<std::atomic<uint32_t>*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
           -1, 0));
  CHECK(shared != MAP_FAILED);
  std::atomic<uint32_t>* turn = &shared[0];
  const pid_t pid = fork();
  if (pid == 0) {
    // Child: the lot works here too (private ops, threads).
    Mutex(2, 2000);
    Join(2, 4);
    for (int i = 0; i < pings; ++i) {
      uint32_t v;
      while ((v = turn->load()) != static_cast<uint32_t>(2 * i + 1)) {
        Futex(turn, FUTEX_WAIT, v, nullptr, nullptr, 0);
      }
      turn->store(2 * i + 2);
      Futex(turn, FUTEX_WAKE, 1, nullptr, nullptr, 0);
    }
    _exit(g_failures == 0 ? 0 : 1);
  }
  for (int i = 0; i < pings; ++i) {
    turn->store(2 * i + 1);
    Futex(turn, FUTEX_WAKE, 1, nullptr, nullptr, 0);
    uint32_t v;
    while ((v = turn->load()) != static_cast<uint32_t>(2 * i + 2)) {
      Futex(turn, FUTEX_WAIT, v, nullptr, nullptr, 0);
    }
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  printf("fork: %d shared ping-pongs with a child\n", pings);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s atomic|mutex|condvar|timeouts|join|fork|faults...\n",
            argv[0]);
    return 2;
  }
  parklot::internal::testing::Watchdog dog(absl::Seconds(100), "futex torture");
  for (int i = 1; i < argc; ++i) {
    const std::string mode = argv[i];
    if (mode == "atomic") {
      Atomic(16, 2000);
    } else if (mode == "mutex") {
      Mutex(8, 250000);
    } else if (mode == "condvar") {
      CondVar(4, 4, 50000, 16);
    } else if (mode == "timeouts") {
      Timeouts(8, 300);
    } else if (mode == "join") {
      Join(20, 16);
    } else if (mode == "fork") {
      Fork(2000);
    } else if (mode == "faults") {
      Faults(4, absl::Milliseconds(1500));
    } else {
      fprintf(stderr, "unknown mode %s\n", mode.c_str());
      return 2;
    }
    fflush(stdout);
  }
  if (g_failures != 0) {
    fprintf(stderr, "%d failures\n", g_failures);
    return 1;
  }
  return 0;
}
