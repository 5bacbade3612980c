// wake_mechanisms: the ways to release N sleeping threads at once, measured
// side by side (docs/investigations/multi_wake.md). Every
// mechanism runs the same rounds: N threads go to sleep, then one releaser
// releases them all; per round it records
//
//   waker   the releaser's own time in the release (what `perf bench futex
//           wake-parallel` reports per waker)
//   last    from the start of the release until the last released thread
//           has returned from its wait (for a wake tree: after it woke its
//           share, as the lot's Park returns after its duty)
//   mean    the same, averaged over the N threads
//   cpu     process CPU time from the start of the release until the last
//           returned (CLOCK_PROCESS_CPUTIME_ID, exact)
//   csw     context switches of the process in the same span (getrusage)
//   calls   futex system calls the release makes, by all threads (counted
//           by the mechanism itself; the lot's are not counted here)
//   round   process CPU time per round, everything included (going back to
//           sleep, the gate between rounds: the same for every mechanism),
//           from the run's first round to its last
//
// Mechanisms:
//   kernel     all N sleep on one shared word; one FUTEX_WAKE(INT_MAX)
//              (glibc's barrier, the kernel's multi-wake)
//   serial     each sleeps on its own word (the lot's parker); the releaser
//              clears every word, then FUTEX_WAKEs each (the lot before
//              the wake tree)
//   wakeop     own words; the releaser wakes two per FUTEX_WAKE_OP
//   waitv      each sleeps in futex_waitv on its own word and a shared one;
//              the releaser clears the own words and wakes the shared word
//              once (candidate (b) of docs/investigations/multi_wake.md)
//   tree:F:R   own words; the releaser wakes R roots, every woken thread
//              wakes its F children of a heap before it returns
//              (candidate (a)); released leaves first, so a child is
//              always released before its parent can wake it
//   lot        parklot::internal::Park on one key, one UnparkAll (whatever the linked
//              lot does)
//
//   wake_mechanisms [--reps=5] [--pin] [--threads=8,64,1024]
//                   [--mechanisms=kernel,serial,...] [--raw=LABEL]
// --raw prints one line per run instead of the table ("raw LABEL N
// mechanism waker last mean cpu round csw calls", ns and counts), for
// drivers that interleave processes (bench/wake_tree_shapes.sh).
// Repetitions are interleaved (every mechanism once per repetition, each in
// a fresh set of threads); medians [min - max] over repetitions of each
// repetition's median round.
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/futex.h"
#include "runtime/parking_lot.h"

namespace {

using parklot::internal::CpuRelax;
using parklot::internal::FutexWaitPrivate;
using parklot::internal::FutexWakePrivate;
using parklot::internal::RawFutex;

int64_t NowNs(clockid_t c = CLOCK_MONOTONIC) {
  timespec ts;
  clock_gettime(c, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

struct Mechanism {
  std::string name;
  int fanout = 0, roots = 0;  // tree only
};

struct alignas(64) Slot {
  std::atomic<uint32_t> word{0};
  int64_t resumed = 0;
};

struct Run {
  Mechanism m;
  int n = 0;
  int rounds = 0;
  bool pin = false;
  std::vector<Slot> slots;
  alignas(64) std::atomic<uint32_t> shared{0};
  alignas(64) std::atomic<int> ready{0};
  alignas(64) std::atomic<int> done{0};
  std::atomic<uint32_t> done_word{0};
  alignas(64) std::atomic<uint32_t> gate{0};
  std::atomic<long> calls{0};  // by waiters (tree wakes)
  explicit Run(int threads) : slots(static_cast<size_t>(threads)) {}
};

int Cpus() {
  cpu_set_t set;
  sched_getaffinity(0, sizeof(set), &set);
  return CPU_COUNT(&set);
}

void Pin(int index) {
  cpu_set_t set;
  sched_getaffinity(0, sizeof(set), &set);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpus[static_cast<size_t>(index) % cpus.size()], &one);
  pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
}

long WaitV(std::atomic<uint32_t>* own, uint32_t own_val,
           std::atomic<uint32_t>* shared, uint32_t shared_val) {
#ifdef SYS_futex_waitv
  struct futex_waitv v[2];
  memset(v, 0, sizeof(v));
  v[0].val = own_val;
  v[0].uaddr = reinterpret_cast<uintptr_t>(own);
  v[0].flags = FUTEX_32 | FUTEX_PRIVATE_FLAG;
  v[1].val = shared_val;
  v[1].uaddr = reinterpret_cast<uintptr_t>(shared);
  v[1].flags = FUTEX_32 | FUTEX_PRIVATE_FLAG;
  return syscall(SYS_futex_waitv, v, 2, 0, nullptr, CLOCK_MONOTONIC);
#else
  return FutexWaitPrivate(own, own_val);
#endif
}

void WakeOp(std::atomic<uint32_t>* a, std::atomic<uint32_t>* b) {
  // Wakes one on `a`, and one on `b` if *b (after adding 0) == 0.
  RawFutex(a, FUTEX_WAKE_OP_PRIVATE, 1, reinterpret_cast<const timespec*>(1),
           b, FUTEX_OP(FUTEX_OP_ADD, 0, FUTEX_OP_CMP_EQ, 0));
}

// The heap of tree:F:R: node i's children are R + F*i + j, j < F.
template <typename F>
void ForChildren(const Run& r, int i, F f) {
  for (int j = 0; j < r.m.fanout; ++j) {
    const long c = long{r.m.roots} + long{r.m.fanout} * i + j;
    if (c >= r.n) return;
    f(static_cast<int>(c));
  }
}

void* Waiter(Run* r, int i) {
  if (r->pin) Pin(i);
  Slot& me = r->slots[static_cast<size_t>(i)];
  const std::string& name = r->m.name;
  const uintptr_t key = parklot::internal::KeyOf(&r->shared);
  for (uint32_t round = 0; round < static_cast<uint32_t>(r->rounds); ++round) {
    const uint32_t gen = r->shared.load(std::memory_order_acquire);
    if (name != "kernel" && name != "lot") {
      me.word.store(1, std::memory_order_relaxed);
    }
    r->ready.fetch_add(1, std::memory_order_acq_rel);
    if (name == "kernel") {
      while (r->shared.load(std::memory_order_acquire) == gen) {
        FutexWaitPrivate(&r->shared, gen);
      }
    } else if (name == "lot") {
      while (r->shared.load(std::memory_order_acquire) == gen) {
        parklot::internal::Park(key, [r, gen] {
          return r->shared.load(std::memory_order_relaxed) == gen;
        });
      }
    } else if (name == "waitv") {
      while (me.word.load(std::memory_order_acquire) != 0) {
        WaitV(&me.word, 1, &r->shared, gen);
      }
    } else {
      while (me.word.load(std::memory_order_acquire) != 0) {
        FutexWaitPrivate(&me.word, 1);
      }
      if (r->m.fanout > 0) {
        long n = 0;
        ForChildren(*r, i, [&](int c) {
          FutexWakePrivate(&r->slots[static_cast<size_t>(c)].word, 1);
          ++n;
        });
        if (n != 0) r->calls.fetch_add(n, std::memory_order_relaxed);
      }
    }
    me.resumed = NowNs();
    if (r->done.fetch_add(1, std::memory_order_acq_rel) + 1 == r->n) {
      r->done_word.store(1, std::memory_order_release);
      FutexWakePrivate(&r->done_word, 1);
    }
    for (uint32_t g; (g = r->gate.load(std::memory_order_acquire)) == round;) {
      FutexWaitPrivate(&r->gate, g);
    }
  }
  return nullptr;
}

// The releaser's part; returns its futex calls.
long Release(Run* r) {
  const std::string& name = r->m.name;
  const int n = r->n;
  if (name == "kernel") {
    r->shared.fetch_add(1, std::memory_order_release);
    FutexWakePrivate(&r->shared, INT_MAX);
    return 1;
  }
  if (name == "lot") {
    r->shared.fetch_add(1, std::memory_order_release);
    parklot::internal::UnparkAll(parklot::internal::KeyOf(&r->shared));
    return 0;
  }
  if (name == "waitv") {
    for (Slot& s : r->slots) s.word.store(0, std::memory_order_release);
    r->shared.fetch_add(1, std::memory_order_release);
    FutexWakePrivate(&r->shared, INT_MAX);
    return 1;
  }
  if (name == "serial") {
    for (Slot& s : r->slots) s.word.store(0, std::memory_order_release);
    for (Slot& s : r->slots) FutexWakePrivate(&s.word, 1);
    return n;
  }
  if (name == "wakeop") {
    for (Slot& s : r->slots) s.word.store(0, std::memory_order_release);
    long calls = 0;
    for (int i = 0; i < n; i += 2, ++calls) {
      if (i + 1 < n) {
        WakeOp(&r->slots[static_cast<size_t>(i)].word,
               &r->slots[static_cast<size_t>(i + 1)].word);
      } else {
        FutexWakePrivate(&r->slots[static_cast<size_t>(i)].word, 1);
      }
    }
    return calls;
  }
  // tree: leaves first, so that every child is released before its parent
  // may run and wake it.
  for (int i = n - 1; i >= 0; --i) {
    r->slots[static_cast<size_t>(i)].word.store(0, std::memory_order_release);
  }
  long calls = 0;
  for (int i = 0; i < std::min(r->m.roots, n); ++i, ++calls) {
    FutexWakePrivate(&r->slots[static_cast<size_t>(i)].word, 1);
  }
  return calls;
}

struct RoundFigures {
  double waker, last, mean, cpu, csw, calls, round;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// One run of `rounds` rounds in fresh threads; the median of each figure.
bool RunOnce(const Mechanism& m, int threads, int rounds, bool pin,
             RoundFigures* out) {
  Run* r = new Run(threads);  // leaked if a thread hangs
  r->m = m;
  r->n = threads;
  r->rounds = rounds;
  r->pin = pin;
  std::vector<pthread_t> t(static_cast<size_t>(threads));
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 128 * 1024);
  struct Arg {
    Run* r;
    int i;
  };
  std::vector<Arg> args(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i) {
    args[static_cast<size_t>(i)] = {r, i};
    if (pthread_create(&t[static_cast<size_t>(i)], &attr,
                       [](void* p) -> void* {
                         auto* a = static_cast<Arg*>(p);
                         return Waiter(a->r, a->i);
                       },
                       &args[static_cast<size_t>(i)]) != 0) {
      fprintf(stderr, "pthread_create failed\n");
      exit(1);
    }
  }
  pthread_attr_destroy(&attr);
  if (pin) Pin(threads);
  std::vector<double> waker, last, mean, cpu, csw, calls;
  int64_t run_c0 = 0;
  for (int round = 0; round < rounds; ++round) {
    const int64_t deadline = NowNs() + int64_t{30} * 1000000000;
    while (r->ready.load(std::memory_order_acquire) < threads) {
      if (NowNs() > deadline) return false;
      usleep(200);
    }
    // Let the last arrivals reach the kernel.
    usleep(threads >= 512 ? 5000 : 1000);
    r->ready.store(0, std::memory_order_relaxed);
    r->done.store(0, std::memory_order_relaxed);
    r->done_word.store(0, std::memory_order_relaxed);
    r->calls.store(0, std::memory_order_relaxed);
    rusage u0, u1;
    getrusage(RUSAGE_SELF, &u0);
    const int64_t c0 = NowNs(CLOCK_PROCESS_CPUTIME_ID);
    if (round == 0) run_c0 = c0;
    const int64_t t0 = NowNs();
    const long own_calls = Release(r);
    const int64_t t1 = NowNs();
    while (r->done_word.load(std::memory_order_acquire) == 0) {
      timespec ts = {1, 0};
      RawFutex(&r->done_word, FUTEX_WAIT_PRIVATE, 0, &ts, nullptr, 0);
      if (NowNs() > deadline) return false;
    }
    const int64_t c1 = NowNs(CLOCK_PROCESS_CPUTIME_ID);
    getrusage(RUSAGE_SELF, &u1);
    int64_t max_resumed = 0;
    double sum = 0;
    for (const Slot& s : r->slots) {
      max_resumed = std::max(max_resumed, s.resumed);
      sum += static_cast<double>(s.resumed - t0);
    }
    waker.push_back(static_cast<double>(t1 - t0));
    last.push_back(static_cast<double>(max_resumed - t0));
    mean.push_back(sum / threads);
    cpu.push_back(static_cast<double>(c1 - c0));
    csw.push_back(static_cast<double>((u1.ru_nvcsw - u0.ru_nvcsw) +
                                      (u1.ru_nivcsw - u0.ru_nivcsw)));
    calls.push_back(static_cast<double>(
        own_calls + r->calls.load(std::memory_order_relaxed)));
    r->gate.fetch_add(1, std::memory_order_release);
    FutexWakePrivate(&r->gate, INT_MAX);
  }
  for (pthread_t& x : t) pthread_join(x, nullptr);
  const double per_round =
      static_cast<double>(NowNs(CLOCK_PROCESS_CPUTIME_ID) - run_c0) / rounds;
  *out = {Median(waker), Median(last),  Median(mean), Median(cpu),
          Median(csw),   Median(calls), per_round};
  delete r;
  return true;
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> v;
  size_t a = 0;
  while (a <= s.size()) {
    size_t b = s.find(',', a);
    if (b == std::string::npos) b = s.size();
    if (b > a) v.push_back(s.substr(a, b - a));
    a = b + 1;
  }
  return v;
}

bool ParseMechanism(const std::string& s, Mechanism* m) {
  m->name = s;
  if (s.rfind("tree:", 0) == 0) {
    int f = 0, r = 0;
    if (sscanf(s.c_str(), "tree:%d:%d", &f, &r) != 2 || f < 1 || r < 1) {
      return false;
    }
    m->name = "tree";
    m->fanout = f;
    m->roots = r;
    return true;
  }
  return s == "kernel" || s == "serial" || s == "wakeop" || s == "waitv" ||
         s == "lot";
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  bool pin = false;
  std::string raw;
  std::vector<int> threads = {8, 64, 1024};
  std::vector<std::string> names = {"kernel", "serial", "wakeop", "waitv",
                                    "tree:2:1", "tree:2:2", "tree:4:2", "lot"};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--reps=", 0) == 0) {
      reps = atoi(a.c_str() + 7);
    } else if (a == "--pin") {
      pin = true;
    } else if (a.rfind("--raw=", 0) == 0) {
      raw = a.substr(6);
    } else if (a.rfind("--threads=", 0) == 0) {
      threads.clear();
      for (const std::string& t : Split(a.substr(10))) threads.push_back(atoi(t.c_str()));
    } else if (a.rfind("--mechanisms=", 0) == 0) {
      names = Split(a.substr(13));
    } else {
      fprintf(stderr,
              "usage: wake_mechanisms [--reps=N] [--pin] [--threads=8,64,...] "
              "[--mechanisms=kernel,serial,wakeop,waitv,tree:F:R,lot] "
              "[--raw=LABEL]\n");
      return 2;
    }
  }
  std::vector<Mechanism> mechs;
  for (const std::string& s : names) {
    Mechanism m;
    if (!ParseMechanism(s, &m)) {
      fprintf(stderr, "wake_mechanisms: unknown mechanism '%s'\n", s.c_str());
      return 2;
    }
    mechs.push_back(m);
  }
  if (raw.empty()) {
    printf("wake_mechanisms: %d CPUs, %s, %d interleaved repetitions; "
           "medians [min - max] of each repetition's median round\n",
           Cpus(), pin ? "pinned" : "unpinned", reps);
  }
  for (int n : threads) {
    const int rounds = n >= 1024 ? 10 : n >= 256 ? 20 : n >= 64 ? 50 : 200;
    std::map<std::string, std::vector<RoundFigures>> got;
    for (int rep = 0; rep < reps; ++rep) {
      for (size_t k = 0; k < mechs.size(); ++k) {
        RoundFigures f;
        if (!RunOnce(mechs[k], n, rounds, pin, &f)) {
          fprintf(stderr, "%s: threads did not finish (lost wake-up?)\n",
                  names[k].c_str());
          return 1;
        }
        got[names[k]].push_back(f);
        if (!raw.empty()) {
          printf("raw %s %d %s %.0f %.0f %.0f %.0f %.0f %.0f %.0f\n",
                 raw.c_str(), n, names[k].c_str(), f.waker, f.last, f.mean,
                 f.cpu, f.round, f.csw, f.calls);
          fflush(stdout);
        }
      }
    }
    if (!raw.empty()) continue;
    printf("\nN=%d (%d rounds a run)\n", n, rounds);
    printf("%-9s %20s %20s %20s %20s %20s %6s %5s\n", "mechanism",
           "waker us", "last us", "mean us", "cpu us", "cpu/round us", "csw",
           "calls");
    const double kernel_waker =
        got.count("kernel") ? Median([&] {
          std::vector<double> v;
          for (auto& f : got["kernel"]) v.push_back(f.waker);
          return v;
        }()) : 0;
    for (const std::string& name : names) {
      auto col = [&](double RoundFigures::*field, double scale,
                     bool range = true) {
        std::vector<double> v;
        for (auto& f : got[name]) v.push_back(f.*field / scale);
        std::sort(v.begin(), v.end());
        char buf[64];
        if (range) {
          snprintf(buf, sizeof(buf), "%.0f [%.0f-%.0f]", Median(v), v.front(),
                   v.back());
        } else {
          snprintf(buf, sizeof(buf), "%.0f", Median(v));
        }
        return std::string(buf);
      };
      std::vector<double> w;
      for (auto& f : got[name]) w.push_back(f.waker);
      printf("%-9s %20s %20s %20s %20s %20s %6s %5s", name.c_str(),
             col(&RoundFigures::waker, 1e3).c_str(),
             col(&RoundFigures::last, 1e3).c_str(),
             col(&RoundFigures::mean, 1e3).c_str(),
             col(&RoundFigures::cpu, 1e3).c_str(),
             col(&RoundFigures::round, 1e3).c_str(),
             col(&RoundFigures::csw, 1, false).c_str(),
             col(&RoundFigures::calls, 1, false).c_str());
      if (kernel_waker > 0) printf("  waker %.2fx kernel", Median(w) / kernel_waker);
      printf("\n");
    }
  }
  return 0;
}
