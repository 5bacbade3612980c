// suite: the side-by-side benchmark suite (issue 6), one harness for every
// scenario of DESIGN.md's "Measuring". Every implementation is an adapter
// (bench/locks.h) in this binary:
//
//   mutexes     glibc pthread_mutex (normal; the baseline), glibc adaptive
//               (PTHREAD_MUTEX_ADAPTIVE_NP), std::mutex, absl::Mutex, a raw
//               futex mutex ("Futexes Are Tricky"), parklot::Mutex
//   condvars    pthread_cond (baseline), std::condition_variable,
//               absl::CondVar, parklot::CondVar, each with its own mutex
//
// Scenarios:
//   1 uncontended   lock+unlock, trylock+unlock, notify with no waiter (ns/op)
//   2 contended     T threads x (work inside, outside) x one lock or T/2
//                   locks, fixed-duration runs: total ops/s, per-thread
//                   min/max and coefficient of variation, CPU and context
//                   switches per op
//   3 fairness      T threads on one lock, critical section 0 / 1us busy /
//                   10us busy / 100us asleep, delay between: acquire-wait
//                   p50/p99/max, per-thread min/max, Jain's index
//   4 wake-up       schbench style: a waker stamps the time and wakes, the
//                   woken thread measures (pthread_cond, absl::CondVar,
//                   parklot::CondVar, parklot Park/UnparkOne, raw futex);
//                   then bench/futex_schbench (kernel vs shim), if built
//   5 hash scaling  bench/futex_hash (perf bench futex hash): kernel
//                   PR_FUTEX_HASH sizes vs parklot growth policies
//   6 condvar       producer/consumer over a bounded queue; broadcast to
//                   64 and 1024 waiters (time, context switches per waiter)
//   7 programs      real programs under the preload shim vs glibc
//
// In-process scenarios (1-4, 6) run every implementation interleaved within
// each repetition (A B C ... A B C), unpinned and pinned (each thread to one
// CPU, round-robin over the CPUs the process may use); tables give the
// median [min - max] over repetitions and the ratio to glibc. Per-thread CPU
// time and context switches come from getrusage(RUSAGE_THREAD).
//
//   tools/parklot bench [--quick] [--out DIR]        (builds, then runs this)
//   bazel run //bench:suite -- --quick --out=/tmp/suite
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/locks.h"
#include "bench/subprocess.h"
#include "bench/suite_report.h"
#include "hash/futex.h"
#include "runtime/parking_lot.h"

ABSL_FLAG(bool, quick, false,
          "Quick mode (under 2 minutes on 2 cores): 3 repetitions, shorter "
          "runs, a subset of the matrix (the output says which).");
ABSL_FLAG(bool, tiny, false,
          "Smoke-test mode: 1 repetition of a few milliseconds per cell and "
          "the smallest matrix that still prints every scenario's rows.");
ABSL_FLAG(std::string, out, "",
          "Output folder (created): report.txt, suite.json, futex_hash*.json, "
          "summary.md, plots (*.png), their data and scripts. Empty: "
          "terminal only.");
ABSL_FLAG(std::vector<std::string>, scenarios, {},
          "Comma-separated subset of the scenarios 1-7. Default: all.");
ABSL_FLAG(int, repetitions, 0,
          "Repetitions of the in-process scenarios. 0 = 7 (quick: 3, tiny: "
          "1).");
ABSL_FLAG(std::string, futex_hash, "",
          "The futex_hash binary (scenario 5). Default: beside this binary.");
ABSL_FLAG(std::string, futex_schbench, "",
          "The futex_schbench binary (scenario 4b; skipped if absent). "
          "Default: beside this binary.");
ABSL_FLAG(std::string, shim, "",
          "libparklot_preload.so (scenarios 4b and 7). Default: "
          "../preload/libparklot_preload.so from this binary's folder.");
ABSL_FLAG(std::vector<std::string>, programs, {},
          "Comma-separated subset of scenario 7's programs, by first word "
          "(stockfish, sysbench, pigz, xz, zstd, sort). Default: all.");
ABSL_FLAG(absl::Duration, programs_budget, absl::ZeroDuration(),
          "Wall-time budget of scenario 7; repetitions (and, once spent, "
          "programs) stop there. 0 = 170s (quick: 35s).");
ABSL_FLAG(double, window_scale, 1.0,
          "Multiplies the measured window of every in-process run (e.g. 4 "
          "for steadier figures, at 4 times the time).");
ABSL_FLAG(bool, plots, true, "Write PNG plots with gnuplot (if installed).");

namespace parklot {
namespace bench {
namespace {

// ---------------------------------------------------------------------------
// Machine, clocks, usage.

std::vector<int> g_cpus;  // the CPUs this process may run on
absl::Time g_start;

void InitCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) g_cpus.push_back(c);
    }
  }
  if (g_cpus.empty()) g_cpus.push_back(0);
}

void PinTo(int index) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(g_cpus[static_cast<size_t>(index) % g_cpus.size()], &set);
  sched_setaffinity(0, sizeof set, &set);
}

inline int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

void SleepNs(int64_t ns) {
  timespec ts = {static_cast<time_t>(ns / 1000000000),
                 static_cast<long>(ns % 1000000000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR) {
  }
}

inline void BusyNs(int64_t ns) {
  const int64_t end = NowNs() + ns;
  while (NowNs() < end) CpuRelax();
}

// `units` of dependent arithmetic (an LCG step, about 1 ns each) that the
// compiler cannot remove.
inline void Work(int units, uint64_t* acc) {
  uint64_t x = *acc;
  for (int i = 0; i < units; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    __asm__ volatile("" : "+r"(x));
  }
  *acc = x;
}

// The calling thread's CPU time and context switches. Context switches from
// getrusage(RUSAGE_THREAD); CPU time from CLOCK_THREAD_CPUTIME_ID, the same
// per-thread accounting read exactly (RUSAGE_THREAD's user and system times
// of a running thread only advance at scheduler ticks, a large error in a
// run of tens of milliseconds).
struct Usage {
  int64_t cpu_ns = 0, vcsw = 0, ivcsw = 0;
  static Usage Thread() {
    rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    Usage u;
    u.cpu_ns = int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
    u.vcsw = ru.ru_nvcsw;
    u.ivcsw = ru.ru_nivcsw;
    return u;
  }
};

std::string ReadFirstLine(const char* path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

std::string CpuModel() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (absl::StartsWith(line, "model name")) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
      }
    }
  }
  return "unknown CPU";
}

std::string LoadAverage() {
  const std::string l = ReadFirstLine("/proc/loadavg");
  std::vector<std::string> f = absl::StrSplit(l, ' ');
  if (f.size() < 3) return "?";
  return absl::StrCat(f[0], " ", f[1], " ", f[2]);
}

std::string Elapsed() {
  const int64_t s = absl::ToInt64Seconds(absl::Now() - g_start);
  return absl::StrFormat("%d:%02d", s / 60, s % 60);
}

std::string SelfDir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}

bool Executable(const std::string& path) {
  return !path.empty() && access(path.c_str(), X_OK) == 0;
}

// `name` as PATH finds it ("" if not found); a path is checked as is.
std::string Which(const std::string& name) {
  if (name.find('/') != std::string::npos) return Executable(name) ? name : "";
  const char* path = getenv("PATH");
  for (absl::string_view dir :
       absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    const std::string p = absl::StrCat(dir, "/", name);
    if (Executable(p)) return p;
  }
  return "";
}

void Put(Sample* s, const std::string& key, double v) {
  if (std::isfinite(v)) s->metrics[key] = v;
}

// ---------------------------------------------------------------------------
// Progress on standard error: one line updated in place on a terminal, a
// line every few seconds otherwise.

class Progress {
 public:
  void Start(const std::string& label, size_t total) {
    label_ = label;
    total_ = total;
    done_ = 0;
    started_ = absl::Now();
    last_ = absl::InfinitePast();
    tty_ = isatty(STDERR_FILENO);
    Show("");
  }
  void Step(const std::string& detail) {
    ++done_;
    Show(detail);
  }
  void Done() {
    if (tty_) absl::FPrintF(stderr, "\r\033[K");
    absl::FPrintF(stderr, "[%s] %s: done in %s\n", Elapsed(), label_,
                  absl::FormatDuration(
                      absl::Trunc(absl::Now() - started_, absl::Seconds(1))));
  }

 private:
  void Show(const std::string& detail) {
    const absl::Time now = absl::Now();
    if (!tty_ && now - last_ < absl::Seconds(10) && done_ != 0) return;
    last_ = now;
    std::string eta;
    if (done_ > 0 && total_ > done_) {
      const absl::Duration per = (now - started_) / static_cast<double>(done_);
      eta = absl::StrCat(", about ",
                         absl::FormatDuration(absl::Trunc(
                             per * static_cast<double>(total_ - done_),
                             absl::Seconds(1))),
                         " left");
    }
    const std::string text =
        absl::StrFormat("[%s] %s: %d/%d%s  %s", Elapsed(), label_, done_,
                        total_, eta, detail);
    if (tty_) {
      absl::FPrintF(stderr, "\r\033[K%s", text.substr(0, 150));
    } else {
      absl::FPrintF(stderr, "%s\n", text);
    }
  }

  std::string label_;
  size_t total_ = 0, done_ = 0;
  absl::Time started_, last_;
  bool tty_ = false;
};

Progress g_progress;

// ---------------------------------------------------------------------------
// Fixed-duration runs: T threads released together, stopped together.

struct WorkerOut {
  uint64_t ops = 0;
  int64_t busy_ns = 0;  // the body's own timing, where it keeps one
  Usage usage;          // CPU time and context switches of the body
};

// Runs on each thread between the start gate and the stop flag; writes its
// operation count (and busy_ns if it times itself) into `out`. Shared state
// is captured by shared_ptr: a run that hangs leaks it instead of freeing
// memory that stuck threads use.
using Body =
    std::function<void(int index, const std::atomic<bool>& stop, WorkerOut*)>;

struct WindowShared {
  alignas(64) std::atomic<uint32_t> ready{0};
  alignas(64) std::atomic<uint32_t> go{0};
  alignas(64) std::atomic<bool> stop{false};
  Body body;
  bool pin = false;
};

struct WorkerSlot {
  WindowShared* shared = nullptr;
  int index = 0;
  pthread_t thread{};
  WorkerOut out;
};

void* WindowWorker(void* arg) {
  WorkerSlot* w = static_cast<WorkerSlot*>(arg);
  WindowShared& s = *w->shared;
  if (s.pin) PinTo(w->index);
  s.ready.fetch_add(1, std::memory_order_acq_rel);
  FutexWakePrivate(&s.ready, 1);
  while (s.go.load(std::memory_order_acquire) == 0) FutexWaitPrivate(&s.go, 0);
  const Usage u0 = Usage::Thread();
  s.body(w->index, s.stop, &w->out);
  const Usage u1 = Usage::Thread();
  w->out.usage.cpu_ns = u1.cpu_ns - u0.cpu_ns;
  w->out.usage.vcsw = u1.vcsw - u0.vcsw;
  w->out.usage.ivcsw = u1.ivcsw - u0.ivcsw;
  return nullptr;
}

struct WindowResult {
  std::string error;  // empty: ok
  int64_t elapsed_ns = 0;
  std::vector<WorkerOut> workers;
};

// Joins `threads`, giving up at `deadline` (then the caller leaks what they
// use). Returns whether all were joined.
bool JoinAll(std::vector<pthread_t>& threads, absl::Time deadline) {
  const timespec ts = absl::ToTimespec(deadline);
  for (pthread_t t : threads) {
    if (pthread_timedjoin_np(t, nullptr, &ts) != 0) return false;
  }
  return true;
}

// Real-time priority for the thread that times a window (if allowed), so
// that T busy threads on few CPUs do not stretch the window; see
// bench/futex_hash.cc. The workers, created before, keep SCHED_OTHER.
class TimerPriority {
 public:
  TimerPriority() {
    sched_param p = {};
    p.sched_priority = 1;
    rt_ = pthread_setschedparam(pthread_self(), SCHED_FIFO, &p) == 0;
  }
  ~TimerPriority() {
    if (rt_) {
      sched_param p = {};
      pthread_setschedparam(pthread_self(), SCHED_OTHER, &p);
    }
  }

 private:
  bool rt_ = false;
};

WindowResult RunWindow(int threads, bool pin, absl::Duration window,
                       Body body, const std::function<void()>& on_stop = {}) {
  WindowResult r;
  auto* shared = new WindowShared;
  shared->body = std::move(body);
  shared->pin = pin;
  auto* slots = new std::vector<WorkerSlot>(static_cast<size_t>(threads));
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  std::vector<pthread_t> started;
  for (int i = 0; i < threads; ++i) {
    WorkerSlot& w = (*slots)[static_cast<size_t>(i)];
    w.shared = shared;
    w.index = i;
    const int e = pthread_create(&w.thread, &attr, WindowWorker, &w);
    if (e != 0) {
      r.error = absl::StrCat("pthread_create: ", strerror(e));
      break;
    }
    started.push_back(w.thread);
  }
  pthread_attr_destroy(&attr);
  for (uint32_t n; (n = shared->ready.load(std::memory_order_acquire)) <
                   started.size();) {
    FutexWaitPrivate(&shared->ready, n);
  }
  int64_t t0, t1;
  {
    TimerPriority rt;
    t0 = NowNs();
    shared->go.store(1, std::memory_order_release);
    FutexWakePrivate(&shared->go, INT_MAX);
    if (r.error.empty()) {
      const int64_t end = t0 + absl::ToInt64Nanoseconds(window);
      timespec ts = {static_cast<time_t>(end / 1000000000),
                     static_cast<long>(end % 1000000000)};
      while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) ==
             EINTR) {
      }
    }
    shared->stop.store(true, std::memory_order_release);
    t1 = NowNs();
  }
  if (on_stop) on_stop();
  if (!JoinAll(started, absl::Now() + absl::Seconds(60))) {
    // A thread is stuck (a lost wake-up?): report it, leak its state.
    r.error = "a thread did not finish within 60s of the end of the window";
    return r;
  }
  r.elapsed_ns = t1 - t0;
  for (const WorkerSlot& w : *slots) r.workers.push_back(w.out);
  delete slots;
  delete shared;
  return r;
}

// The usual figures of a window into `s`: operations of workers
// [first, last), CPU and context switches of all.
void Summarize(const WindowResult& w, size_t first, size_t last, Sample* s) {
  uint64_t ops = 0, lo = UINT64_MAX, hi = 0;
  double sum = 0, sum2 = 0;
  Usage u;
  for (size_t i = 0; i < w.workers.size(); ++i) {
    const WorkerOut& o = w.workers[i];
    u.cpu_ns += o.usage.cpu_ns;
    u.vcsw += o.usage.vcsw;
    u.ivcsw += o.usage.ivcsw;
    if (i < first || i >= last) continue;
    ops += o.ops;
    lo = std::min(lo, o.ops);
    hi = std::max(hi, o.ops);
    const double x = static_cast<double>(o.ops);
    sum += x;
    sum2 += x * x;
  }
  const double n = static_cast<double>(last - first);
  const double dops = std::max<double>(1, static_cast<double>(ops));
  s->iterations = static_cast<double>(ops);
  s->real_s = static_cast<double>(w.elapsed_ns) / 1e9;
  s->cpu_s = static_cast<double>(u.cpu_ns) / 1e9;
  Put(s, "ops_per_s", static_cast<double>(ops) * 1e9 /
                          static_cast<double>(std::max<int64_t>(1, w.elapsed_ns)));
  Put(s, "cpu_ns_per_op", static_cast<double>(u.cpu_ns) / dops);
  Put(s, "vcsw_per_op", static_cast<double>(u.vcsw) / dops);
  Put(s, "ivcsw_per_op", static_cast<double>(u.ivcsw) / dops);
  Put(s, "min_max", hi > 0 ? static_cast<double>(lo) / static_cast<double>(hi)
                           : 0);
  Put(s, "thr_min_ops", static_cast<double>(lo));
  Put(s, "thr_max_ops", static_cast<double>(hi));
  const double mean = sum / n;
  Put(s, "cv", mean > 0 ? std::sqrt(std::max(0.0, sum2 / n - mean * mean)) / mean
                        : 0);
  Put(s, "jain", sum2 > 0 ? sum * sum / (n * sum2) : 0);
}

// ---------------------------------------------------------------------------
// The implementations, by kind.

template <typename F>
void ForEachMutex(F&& f) {
  f.template operator()<GlibcLock>();
  f.template operator()<GlibcAdaptiveLock>();
  f.template operator()<StdLock>();
  f.template operator()<AbslLock>();
  f.template operator()<FutexLock>();
  f.template operator()<ParklotLock>();
}

template <typename F>
void ForEachCond(F&& f) {
  f.template operator()<GlibcCond>();
  f.template operator()<StdCond>();
  f.template operator()<AbslCond>();
  f.template operator()<ParklotCond>();
}

// Wake-up adapters for scenario 4: Wait() sleeps until Wake() (one pending
// wake-up is remembered).
template <typename C>
struct CondWaiter {
  static constexpr const char* kName = C::kName;
  C cond;
  bool flag = false;
  void Wait() {
    cond.lock();
    while (!flag) cond.wait();
    flag = false;
    cond.unlock();
  }
  void Wake() {
    cond.lock();
    flag = true;
    cond.notify_one();
    cond.unlock();
  }
};

// parklot's parking lot itself: Park on the word's address while it is 0.
struct ParkWaiter {
  static constexpr const char* kName = "park";
  std::atomic<uint32_t> word{0};
  void Wait() {
    while (word.load(std::memory_order_acquire) == 0) {
      Park(KeyOf(&word),
           [this] { return word.load(std::memory_order_relaxed) == 0; });
    }
    word.store(0, std::memory_order_relaxed);
  }
  void Wake() {
    word.store(1, std::memory_order_release);
    UnparkOne(KeyOf(&word), [](UnparkResult) { return kDefaultUnparkToken; });
  }
};

// The kernel: FUTEX_WAIT_PRIVATE / FUTEX_WAKE_PRIVATE on the word.
struct FutexWaiter {
  static constexpr const char* kName = "futex";
  std::atomic<uint32_t> word{0};
  void Wait() {
    while (word.load(std::memory_order_acquire) == 0) {
      FutexWaitPrivate(&word, 0);
    }
    word.store(0, std::memory_order_relaxed);
  }
  void Wake() {
    word.store(1, std::memory_order_release);
    FutexWakePrivate(&word, 1);
  }
};

template <typename F>
void ForEachWaiter(F&& f) {
  f.template operator()<CondWaiter<GlibcCond>>();
  f.template operator()<CondWaiter<AbslCond>>();
  f.template operator()<CondWaiter<ParklotCond>>();
  f.template operator()<ParkWaiter>();
  f.template operator()<FutexWaiter>();
}

// ---------------------------------------------------------------------------
// The plan: what each mode runs.

enum class Cs { kNone, kBusy1us, kBusy10us, kSleep100us };

std::string CsName(Cs c) {
  switch (c) {
    case Cs::kNone:
      return "0";
    case Cs::kBusy1us:
      return "1us-busy";
    case Cs::kBusy10us:
      return "10us-busy";
    case Cs::kSleep100us:
      return "100us-sleep";
  }
  return "?";
}

struct Program {
  std::string name;  // as shown: "stockfish bench 16 1 12"
  std::string path;  // found in PATH unless it has a '/'
  std::vector<std::string> args;
  bool data_on_stdin = false;  // the generated input on standard input
  bool data_arg = false;       // the input file as the last argument
  bool rate = false;           // stockfish: parse "Nodes/second"
};

struct Plan {
  std::string mode;  // full, quick, tiny
  int reps = 7;
  std::vector<std::string> pins = {"unpinned", "pinned"};
  absl::Duration w_uncontended, w_contended, w_fairness, w_wakeup, w_pc;
  std::vector<int> c_threads;
  std::vector<std::pair<int, int>> c_works;  // (inside, outside)
  std::vector<int> f_threads;
  std::vector<Cs> f_cs;
  std::vector<int> f_delay_ns;
  std::vector<int> wake_workers;
  int64_t wake_work_ns = 2000;
  std::vector<std::pair<int, int>> pc_pairs;  // producers, consumers
  std::vector<int> pc_queues;
  std::vector<std::pair<int, int>> bc;  // waiters, rounds
  std::vector<std::string> hash_args, hash_pinned_args, schbench_args;
  int prog_reps = 7;
  absl::Duration prog_budget;
  // Scenario 7 also stops starting programs once the whole run reaches
  // this (the mode's promise: full <= 10 minutes, quick < 2).
  absl::Duration total_target = absl::InfiniteDuration();
  size_t data_bytes = 0;
  std::vector<Program> programs;
  std::vector<std::string> notes;  // what this mode leaves out
};

std::vector<Program> AllPrograms(const std::string& mode) {
  std::vector<Program> v;
  const bool full = mode == "full";
  const std::string depth = full ? "12" : "8";
  for (const char* t : {"1", "2", "8"}) {
    v.push_back({absl::StrCat("stockfish bench 16 ", t, " ", depth),
                 "/usr/games/stockfish",
                 {"bench", "16", t, depth},
                 false,
                 false,
                 true});
  }
  v.push_back({"sysbench mutex", "sysbench",
               {"mutex", "--threads=8", "--mutex-num=64",
                full ? "--mutex-locks=20000" : "--mutex-locks=5000", "run"}});
  v.push_back({"sysbench threads", "sysbench",
               {"threads", "--threads=16", "--time=0",
                full ? "--events=300" : "--events=60", "run"}});
  v.push_back({"pigz -p 4", "pigz", {"-p", "4", "-c"}, true});
  v.push_back(
      {"xz -T4 -3", "xz", {"-T4", "-3", "--block-size=1MiB", "-c"}, true});
  v.push_back({"zstd -T4 -12", "zstd", {"-T4", "-12", "-c", "-q"}, true});
  v.push_back({"sort --parallel=4", "sort",
               {"--parallel=4", "-S", "8M"},
               false,
               true});
  return v;
}

Plan MakePlan() {
  Plan p;
  const bool quick = absl::GetFlag(FLAGS_quick);
  const bool tiny = absl::GetFlag(FLAGS_tiny);
  p.mode = tiny ? "tiny" : quick ? "quick" : "full";
  if (p.mode == "full") {
    p.reps = 7;
    p.w_uncontended = absl::Milliseconds(20);
    p.w_contended = absl::Milliseconds(40);
    p.w_fairness = absl::Milliseconds(20);
    p.w_wakeup = absl::Milliseconds(100);
    p.w_pc = absl::Milliseconds(40);
    p.c_threads = {1, 2, 4, 16, 64};
    p.c_works = {{1, 0}, {10, 100}, {100, 1000}};
    p.f_threads = {2, 8, 32};
    p.f_cs = {Cs::kNone, Cs::kBusy1us, Cs::kBusy10us, Cs::kSleep100us};
    p.f_delay_ns = {0, 1000, 10000};
    p.wake_workers = {1, 8};
    p.pc_pairs = {{1, 1}, {4, 4}, {16, 16}};
    p.pc_queues = {1, 100};
    p.bc = {{64, 10}, {1024, 3}};
    p.hash_args = {"--threads=2,32,256,1024", "--repetitions=7",
                   "--duration=60ms"};
    p.hash_pinned_args = {
        "--threads=2,32,256,1024", "--repetitions=7", "--duration=60ms",
        "--configs=kernel/default,kernel/global,parklot/threads,parklot/cpus,"
        "parklot/fixed:1024"};
    p.schbench_args = {"--pairs=1x4,2x64", "--duration=250ms"};
    p.prog_reps = 7;
    p.prog_budget = absl::Seconds(170);
    p.total_target = absl::Minutes(9);
    p.data_bytes = 12 << 20;
    p.notes = {
        "scenario 5 pinned: 5 of the 12 configurations (kernel/default, "
        "kernel/global, parklot/threads, parklot/cpus, parklot/fixed:1024)",
        "scenario 7: repetitions stop when the time budget is spent"};
  } else if (p.mode == "quick") {
    p.reps = 3;
    p.w_uncontended = absl::Milliseconds(10);
    p.w_contended = absl::Milliseconds(15);
    p.w_fairness = absl::Milliseconds(15);
    p.w_wakeup = absl::Milliseconds(50);
    p.w_pc = absl::Milliseconds(15);
    p.c_threads = {1, 2, 4, 16, 64};
    p.c_works = {{1, 0}, {100, 1000}};
    p.f_threads = {2, 32};
    p.f_cs = {Cs::kNone, Cs::kBusy1us, Cs::kSleep100us};
    p.f_delay_ns = {0, 10000};
    p.wake_workers = {1, 8};
    p.pc_pairs = {{1, 1}, {4, 4}, {16, 16}};
    p.pc_queues = {1};
    p.bc = {{64, 5}, {1024, 2}};
    const std::string configs =
        "--configs=kernel/default,kernel/global,kernel/1024,parklot/threads,"
        "parklot/cpus,parklot/fixed:1024";
    p.hash_args = {"--threads=2,32,256,1024", "--repetitions=3",
                   "--duration=30ms", configs};
    p.hash_pinned_args = {"--threads=2,1024", "--repetitions=3",
                          "--duration=30ms", configs};
    p.schbench_args = {"--pairs=1x4,2x64", "--duration=60ms",
                       "--configs=kernel/default,kernel/global,parklot/shim"};
    p.prog_reps = 1;
    p.prog_budget = absl::Seconds(35);
    p.total_target = absl::Seconds(105);
    p.data_bytes = 3 << 20;
    p.notes = {
        "quick: 3 repetitions (full: 7), shorter runs",
        "quick 2: work (10,100) left out",
        "quick 3: T=8, critical section 10us-busy and delay 1us left out",
        "quick 5: 6 of 12 configurations; pinned at 2 and 1024 threads only",
        "quick 6: queue 100 left out",
        "quick 7: stockfish depth 8 (full: 12), smaller inputs, 1 "
        "repetition"};
  } else {
    p.reps = 1;
    p.w_uncontended = absl::Milliseconds(3);
    p.w_contended = absl::Milliseconds(3);
    p.w_fairness = absl::Milliseconds(3);
    p.w_wakeup = absl::Milliseconds(10);
    p.w_pc = absl::Milliseconds(3);
    p.c_threads = {1, 2, 4};
    p.c_works = {{10, 100}};
    p.f_threads = {2};
    p.f_cs = {Cs::kNone, Cs::kSleep100us};
    p.f_delay_ns = {0};
    p.wake_workers = {1, 2};
    p.pc_pairs = {{1, 1}, {2, 2}};
    p.pc_queues = {1};
    p.bc = {{4, 2}, {16, 2}};
    p.hash_args = {"--threads=1,3", "--keys=32", "--repetitions=1",
                   "--duration=5ms",
                   "--configs=kernel/default,parklot/threads,parklot/fixed:16"};
    p.hash_pinned_args = p.hash_args;
    p.schbench_args = {};  // not in tiny mode
    p.prog_reps = 1;
    p.prog_budget = absl::Seconds(60);
    p.data_bytes = 256 << 10;
    p.notes = {"tiny: smoke-test sizes, figures meaningless"};
  }
  if (absl::GetFlag(FLAGS_repetitions) > 0) {
    p.reps = absl::GetFlag(FLAGS_repetitions);
  }
  const double scale = absl::GetFlag(FLAGS_window_scale);
  if (scale > 0 && scale != 1) {
    for (absl::Duration* w : {&p.w_uncontended, &p.w_contended, &p.w_fairness,
                              &p.w_wakeup, &p.w_pc}) {
      *w = *w * scale;
    }
    p.notes.push_back(absl::StrFormat("windows scaled by %g", scale));
  }
  if (absl::GetFlag(FLAGS_programs_budget) > absl::ZeroDuration()) {
    p.prog_budget = absl::GetFlag(FLAGS_programs_budget);
  }
  std::vector<Program> programs = AllPrograms(p.mode);
  const std::vector<std::string> only = absl::GetFlag(FLAGS_programs);
  if (p.mode == "tiny" && only.empty()) {
    programs.erase(std::remove_if(programs.begin(), programs.end(),
                                  [](const Program& x) {
                                    return !absl::StartsWith(x.name, "sort");
                                  }),
                   programs.end());
  }
  for (const Program& x : programs) {
    const std::string first = x.name.substr(0, x.name.find(' '));
    if (only.empty() ||
        std::find(only.begin(), only.end(), first) != only.end()) {
      p.programs.push_back(x);
    }
  }
  return p;
}

// ---------------------------------------------------------------------------
// Running cases interleaved.

struct Case {
  std::string scenario, cell, pin, impl;
  // One measurement into the sample; returns "" or the error.
  std::function<std::string(Sample*)> run;
};

void RunCases(const std::string& label, const std::vector<Case>& cases,
              int reps, Results& results) {
  g_progress.Start(label, cases.size() * static_cast<size_t>(reps));
  for (int rep = 0; rep < reps; ++rep) {
    for (const Case& c : cases) {
      Series& s = results.Get(c.scenario, c.cell, c.pin, c.impl);
      Sample sample;
      sample.repetition = rep;
      const std::string error = c.run(&sample);
      if (error.empty()) {
        s.samples.push_back(std::move(sample));
      } else {
        s.failures.push_back(error);
        absl::FPrintF(stderr, "\n%s %s %s %s: %s\n", c.scenario, c.cell,
                      c.pin, c.impl, error);
      }
      g_progress.Step(absl::StrFormat("repetition %d/%d: %s %s %s", rep + 1,
                                      reps, c.cell, c.pin, c.impl));
    }
  }
  g_progress.Done();
}

// ---------------------------------------------------------------------------
// 1. Uncontended.

enum class Op { kLockUnlock, kTryLock, kNotifyOne, kNotifyAll };

template <typename L>
Body LockBody(Op op) {
  return [op](int, const std::atomic<bool>& stop, WorkerOut* out) {
    auto lock = std::make_unique<L>();
    uint64_t n = 0;
    const int64_t t0 = NowNs();
    if (op == Op::kLockUnlock) {
      while (!stop.load(std::memory_order_relaxed)) {
        for (int i = 0; i < 256; ++i) {
          lock->lock();
          lock->unlock();
        }
        n += 256;
      }
    } else {
      while (!stop.load(std::memory_order_relaxed)) {
        for (int i = 0; i < 256; ++i) {
          if (lock->try_lock()) lock->unlock();
        }
        n += 256;
      }
    }
    out->busy_ns = NowNs() - t0;
    out->ops = n;
  };
}

template <typename C>
Body NotifyBody(Op op) {
  return [op](int, const std::atomic<bool>& stop, WorkerOut* out) {
    auto cond = std::make_unique<C>();
    uint64_t n = 0;
    const int64_t t0 = NowNs();
    while (!stop.load(std::memory_order_relaxed)) {
      for (int i = 0; i < 256; ++i) {
        if (op == Op::kNotifyOne) {
          cond->notify_one();
        } else {
          cond->notify_all();
        }
      }
      n += 256;
    }
    out->busy_ns = NowNs() - t0;
    out->ops = n;
  };
}

std::string RunUncontended(const Body& body, bool pin, absl::Duration window,
                           Sample* s) {
  const WindowResult w = RunWindow(1, pin, window, body);
  if (!w.error.empty()) return w.error;
  Summarize(w, 0, 1, s);
  const WorkerOut& o = w.workers[0];
  const double ops = std::max<double>(1, static_cast<double>(o.ops));
  Put(s, "ns_per_op", static_cast<double>(o.busy_ns) / ops);
  s->real_s = static_cast<double>(o.busy_ns) / 1e9;
  return "";
}

void Scenario1(const Plan& plan, Results& results) {
  std::vector<Case> cases;
  const std::pair<Op, const char*> lock_ops[] = {
      {Op::kLockUnlock, "lock+unlock"}, {Op::kTryLock, "trylock+unlock"}};
  const std::pair<Op, const char*> cond_ops[] = {
      {Op::kNotifyOne, "notify_one,no-waiter"},
      {Op::kNotifyAll, "notify_all,no-waiter"}};
  for (const auto& [op, cell] : lock_ops) {
    for (const std::string& pin : plan.pins) {
      ForEachMutex([&, op = op, cell = cell]<typename L>() {
        const bool pinned = pin == "pinned";
        const absl::Duration window = plan.w_uncontended;
        cases.push_back({"uncontended", cell, pin, L::kName,
                         [op, pinned, window](Sample* s) {
                           return RunUncontended(LockBody<L>(op), pinned,
                                                 window, s);
                         }});
      });
    }
  }
  for (const auto& [op, cell] : cond_ops) {
    for (const std::string& pin : plan.pins) {
      ForEachCond([&, op = op, cell = cell]<typename C>() {
        const bool pinned = pin == "pinned";
        const absl::Duration window = plan.w_uncontended;
        cases.push_back({"uncontended", cell, pin, C::kName,
                         [op, pinned, window](Sample* s) {
                           return RunUncontended(NotifyBody<C>(op), pinned,
                                                 window, s);
                         }});
      });
    }
  }
  RunCases("1/7 uncontended", cases, plan.reps, results);
}

// ---------------------------------------------------------------------------
// 2. Contended throughput.

template <typename L>
struct alignas(64) LockSlot {
  L lock;
  uint64_t data = 0;  // what the critical section works on
};

template <typename L>
std::string RunContended(int threads, int locks, int inside, int outside,
                         bool pin, absl::Duration window, Sample* s) {
  auto slots = std::shared_ptr<LockSlot<L>[]>(new LockSlot<L>[locks]);
  Body body = [slots, locks, inside, outside](
                  int index, const std::atomic<bool>& stop, WorkerOut* out) {
    LockSlot<L>& slot = slots[index % locks];
    uint64_t acc = static_cast<uint64_t>(index) + 1;
    uint64_t n = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      slot.lock.lock();
      Work(inside, &slot.data);
      slot.lock.unlock();
      Work(outside, &acc);
      ++n;
    }
    out->ops = n;
  };
  const WindowResult w = RunWindow(threads, pin, window, std::move(body));
  if (!w.error.empty()) return w.error;
  Summarize(w, 0, w.workers.size(), s);
  return "";
}

std::string ContendedCell(int t, int in, int out, int locks) {
  return absl::StrFormat("T=%d cs=%d out=%d locks=%d", t, in, out, locks);
}

void Scenario2(const Plan& plan, Results& results) {
  std::vector<Case> cases;
  for (int t : plan.c_threads) {
    for (const auto& [in, out] : plan.c_works) {
      std::vector<int> lock_counts = {1};
      if (t / 2 > 1) lock_counts.push_back(t / 2);
      for (int locks : lock_counts) {
        for (const std::string& pin : plan.pins) {
          ForEachMutex([&, in = in, out = out]<typename L>() {
            const bool pinned = pin == "pinned";
            const absl::Duration window = plan.w_contended;
            cases.push_back({"contended", ContendedCell(t, in, out, locks),
                             pin, L::kName,
                             [=](Sample* s) {
                               return RunContended<L>(t, locks, in, out,
                                                      pinned, window, s);
                             }});
          });
        }
      }
    }
  }
  RunCases("2/7 contended", cases, plan.reps, results);
}

// ---------------------------------------------------------------------------
// 3. Fairness and long critical sections.

template <typename L>
std::string RunFairness(int threads, Cs cs, int delay_ns, bool pin,
                        absl::Duration window, Sample* s) {
  struct State {
    LockSlot<L> slot;
    std::vector<Histogram> waits;
  };
  auto st = std::make_shared<State>();
  st->waits.resize(static_cast<size_t>(threads));
  Body body = [st, cs, delay_ns](int index, const std::atomic<bool>& stop,
                                 WorkerOut* out) {
    Histogram& h = st->waits[static_cast<size_t>(index)];
    L& lock = st->slot.lock;
    uint64_t n = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      const int64_t t0 = NowNs();
      lock.lock();
      h.Add(NowNs() - t0);
      switch (cs) {
        case Cs::kNone:
          ++st->slot.data;
          break;
        case Cs::kBusy1us:
          BusyNs(1000);
          break;
        case Cs::kBusy10us:
          BusyNs(10000);
          break;
        case Cs::kSleep100us:
          SleepNs(100000);
          break;
      }
      lock.unlock();
      if (delay_ns > 0) BusyNs(delay_ns);
      ++n;
    }
    out->ops = n;
  };
  const WindowResult w = RunWindow(threads, pin, window, std::move(body));
  if (!w.error.empty()) return w.error;
  Summarize(w, 0, w.workers.size(), s);
  Histogram all;
  for (const Histogram& h : st->waits) all.Merge(h);
  Put(s, "wait_p50_ns", static_cast<double>(all.Percentile(0.50)));
  Put(s, "wait_p99_ns", static_cast<double>(all.Percentile(0.99)));
  Put(s, "wait_max_ns", static_cast<double>(all.max()));
  return "";
}

std::string FairnessCell(int t, Cs cs, int delay_ns) {
  return absl::StrFormat("T=%d cs=%s delay=%s", t, CsName(cs),
                         delay_ns == 0 ? "0" : HumanNs(delay_ns));
}

void Scenario3(const Plan& plan, Results& results) {
  std::vector<Case> cases;
  for (int t : plan.f_threads) {
    for (Cs cs : plan.f_cs) {
      for (int delay : plan.f_delay_ns) {
        for (const std::string& pin : plan.pins) {
          ForEachMutex([&]<typename L>() {
            const bool pinned = pin == "pinned";
            // Sleeping critical sections complete few acquisitions per
            // window; give them twice the time.
            const absl::Duration window =
                cs == Cs::kSleep100us ? plan.w_fairness * 2 : plan.w_fairness;
            cases.push_back({"fairness", FairnessCell(t, cs, delay), pin,
                             L::kName, [=](Sample* s) {
                               return RunFairness<L>(t, cs, delay, pinned,
                                                     window, s);
                             }});
          });
        }
      }
    }
  }
  RunCases("3/7 fairness", cases, plan.reps, results);
}

// ---------------------------------------------------------------------------
// 4. Wake-up latency, schbench style.

template <typename W>
std::string RunWakeup(int workers, int64_t work_ns, bool pin,
                      absl::Duration window, Sample* s) {
  struct alignas(64) Slot {
    W waiter;
    std::atomic<int64_t> stamp{0};
  };
  struct State {
    std::unique_ptr<Slot[]> slots;
    std::vector<Histogram> lat;
    alignas(64) std::atomic<int> done{0};
    alignas(64) std::atomic<uint32_t> round_done{0};
    alignas(64) std::atomic<bool> finished{false};
  };
  auto st = std::make_shared<State>();
  st->slots.reset(new Slot[static_cast<size_t>(workers)]);
  st->lat.resize(static_cast<size_t>(workers));
  // Thread 0 is the waker; threads 1..workers the woken.
  Body body = [st, workers, work_ns](int index, const std::atomic<bool>& stop,
                                     WorkerOut* out) {
    if (index == 0) {
      uint64_t rounds = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        st->done.store(0, std::memory_order_relaxed);
        st->round_done.store(0, std::memory_order_relaxed);
        for (int i = 0; i < workers; ++i) {
          Slot& slot = st->slots[static_cast<size_t>(i)];
          slot.stamp.store(NowNs(), std::memory_order_relaxed);
          slot.waiter.Wake();
        }
        while (st->round_done.load(std::memory_order_acquire) == 0) {
          FutexWaitPrivate(&st->round_done, 0);
        }
        ++rounds;
      }
      st->finished.store(true, std::memory_order_release);
      for (int i = 0; i < workers; ++i) {
        st->slots[static_cast<size_t>(i)].waiter.Wake();
      }
      out->ops = 0;
      return;
    }
    Slot& slot = st->slots[static_cast<size_t>(index - 1)];
    Histogram& h = st->lat[static_cast<size_t>(index - 1)];
    uint64_t n = 0;
    for (;;) {
      slot.waiter.Wait();
      if (st->finished.load(std::memory_order_acquire)) break;
      h.Add(NowNs() - slot.stamp.load(std::memory_order_relaxed));
      BusyNs(work_ns);
      ++n;
      if (st->done.fetch_add(1, std::memory_order_acq_rel) + 1 == workers) {
        st->round_done.store(1, std::memory_order_release);
        FutexWakePrivate(&st->round_done, 1);
      }
    }
    out->ops = n;
  };
  const WindowResult w = RunWindow(workers + 1, pin, window, std::move(body));
  if (!w.error.empty()) return w.error;
  Summarize(w, 1, w.workers.size(), s);
  Histogram all;
  for (const Histogram& h : st->lat) all.Merge(h);
  Put(s, "wake_p50_ns", static_cast<double>(all.Percentile(0.50)));
  Put(s, "wake_p99_ns", static_cast<double>(all.Percentile(0.99)));
  Put(s, "wake_p999_ns", static_cast<double>(all.Percentile(0.999)));
  return "";
}

void Scenario4(const Plan& plan, Results& results) {
  std::vector<Case> cases;
  for (int workers : plan.wake_workers) {
    for (const std::string& pin : plan.pins) {
      ForEachWaiter([&]<typename W>() {
        const bool pinned = pin == "pinned";
        const absl::Duration window = plan.w_wakeup;
        const int64_t work = plan.wake_work_ns;
        cases.push_back({"wakeup", absl::StrFormat("workers=%d", workers), pin,
                         W::kName, [=](Sample* s) {
                           return RunWakeup<W>(workers, work, pinned, window,
                                               s);
                         }});
      });
    }
  }
  RunCases("4/7 wake-up latency", cases, plan.reps, results);
}

// ---------------------------------------------------------------------------
// 6. Condition variables: producer/consumer, broadcast.

template <typename C>
std::string RunProducerConsumer(int producers, int consumers, int capacity,
                                bool pin, absl::Duration window, Sample* s) {
  struct State {
    C cond;  // cv 0: not empty, cv 1: not full
    int count = 0;
    uint64_t sum = 0;
  };
  auto st = std::make_shared<State>();
  std::atomic<bool>* stop_flag = nullptr;
  Body body = [st, producers, capacity](
                  int index, const std::atomic<bool>& stop, WorkerOut* out) {
    State& q = *st;
    uint64_t n = 0;
    if (index < producers) {
      for (;;) {
        q.cond.lock();
        while (q.count == capacity && !stop.load(std::memory_order_relaxed)) {
          q.cond.wait(1);
        }
        if (stop.load(std::memory_order_relaxed)) {
          q.cond.unlock();
          break;
        }
        ++q.count;
        q.cond.notify_one(0);
        q.cond.unlock();
        ++n;
      }
    } else {
      for (;;) {
        q.cond.lock();
        while (q.count == 0 && !stop.load(std::memory_order_relaxed)) {
          q.cond.wait(0);
        }
        if (q.count == 0) {
          q.cond.unlock();
          break;
        }
        --q.count;
        q.sum += n;
        q.cond.notify_one(1);
        q.cond.unlock();
        ++n;
      }
    }
    out->ops = n;
  };
  (void)stop_flag;
  // At the stop, wake every sleeper (under the mutex: a thread that saw
  // `stop` false is then asleep and gets this broadcast).
  auto on_stop = [st] {
    st->cond.lock();
    st->cond.notify_all(0);
    st->cond.notify_all(1);
    st->cond.unlock();
  };
  const WindowResult w =
      RunWindow(producers + consumers, pin, window, std::move(body), on_stop);
  if (!w.error.empty()) return w.error;
  Summarize(w, static_cast<size_t>(producers), w.workers.size(), s);
  return "";
}

// N waiters sleep on the condvar; the main thread broadcasts (holding the
// mutex, as is usual) and times until the last waiter has re-acquired the
// mutex and passed. Each waiter counts its context switches from just
// before its wait to just after it released the mutex again: 1 if it only
// slept once, more if it woke only to block on the mutex (the herd). Then
// it waits on a separate kernel futex (the same for every implementation,
// not measured) until the main thread opens the next round, so that
// re-locking for the next round does not contend with the broadcast being
// measured. Repeated `rounds` times with the same threads.
template <typename C>
std::string RunBroadcast(int waiters, int rounds, bool pin, Sample* s) {
  struct State {
    C cond;
    uint64_t gen = 0;  // under the mutex
    int passed = 0;    // under the mutex
    bool stop = false;  // under the mutex
    int n = 0;
    bool pin = false;
    alignas(64) std::atomic<int> waiting{0};
    alignas(64) std::atomic<uint32_t> done{0};
    alignas(64) std::atomic<uint32_t> next_round{0};
    std::atomic<int64_t> t_end{0};
    std::atomic<int64_t> vcsw{0}, ivcsw{0}, cpu_ns{0};
  };
  struct Arg {
    State* st;
    int index;
  };
  auto* st = new State;  // leaked if a waiter never returns
  st->n = waiters;
  st->pin = pin;
  auto waiter = [](void* p) -> void* {
    const Arg a = *static_cast<Arg*>(p);
    State& q = *a.st;
    if (q.pin) PinTo(a.index);
    for (uint32_t round = 0;; ++round) {
      q.cond.lock();
      if (q.stop) {
        q.cond.unlock();
        break;
      }
      const uint64_t my = q.gen;
      const Usage u0 = Usage::Thread();
      q.waiting.fetch_add(1, std::memory_order_release);
      while (q.gen == my && !q.stop) q.cond.wait();
      if (q.stop) {
        q.cond.unlock();
        break;
      }
      if (++q.passed == q.n) {
        q.t_end.store(NowNs(), std::memory_order_relaxed);
        q.done.store(1, std::memory_order_release);
        FutexWakePrivate(&q.done, 1);
      }
      q.cond.unlock();
      const Usage u1 = Usage::Thread();
      q.vcsw.fetch_add(u1.vcsw - u0.vcsw, std::memory_order_relaxed);
      q.ivcsw.fetch_add(u1.ivcsw - u0.ivcsw, std::memory_order_relaxed);
      q.cpu_ns.fetch_add(u1.cpu_ns - u0.cpu_ns, std::memory_order_relaxed);
      // The gate to the next round (or the end).
      for (uint32_t v; (v = q.next_round.load(std::memory_order_acquire)) ==
                       round;) {
        FutexWaitPrivate(&q.next_round, v);
      }
    }
    return nullptr;
  };
  auto* args = new std::vector<Arg>(static_cast<size_t>(waiters));
  std::vector<pthread_t> threads;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  std::string error;
  for (int i = 0; i < waiters; ++i) {
    (*args)[static_cast<size_t>(i)] = {st, i};
    pthread_t t;
    const int e = pthread_create(&t, &attr, waiter, &(*args)[static_cast<size_t>(i)]);
    if (e != 0) {
      error = absl::StrCat("pthread_create: ", strerror(e));
      break;
    }
    threads.push_back(t);
  }
  pthread_attr_destroy(&attr);
  const int n = static_cast<int>(threads.size());
  // Waits (polling) until every waiter has registered for the next round.
  auto all_waiting = [&] {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (st->waiting.load(std::memory_order_acquire) < n) {
      if (absl::Now() > deadline) return false;
      SleepNs(100000);
    }
    return true;
  };
  std::vector<double> round_ns;
  if (error.empty()) {
    for (int r = 0; r < rounds; ++r) {
      if (!all_waiting()) {
        error = "waiters did not all block within 60s";
        break;
      }
      st->cond.lock();
      st->waiting.store(0, std::memory_order_relaxed);
      st->passed = 0;
      st->done.store(0, std::memory_order_relaxed);
      ++st->gen;
      const int64_t t0 = NowNs();
      st->cond.notify_all();
      st->cond.unlock();
      const absl::Time deadline = absl::Now() + absl::Seconds(60);
      while (st->done.load(std::memory_order_acquire) == 0) {
        timespec ts = {1, 0};
        RawFutex(&st->done, FUTEX_WAIT_PRIVATE, 0, &ts, nullptr, 0);
        if (absl::Now() > deadline) break;
      }
      if (st->done.load(std::memory_order_acquire) == 0) {
        error = "broadcast: not every waiter passed within 60s (lost wake-up?)";
        break;
      }
      round_ns.push_back(
          static_cast<double>(st->t_end.load(std::memory_order_relaxed) - t0));
      if (r + 1 < rounds) {
        st->next_round.fetch_add(1, std::memory_order_release);
        FutexWakePrivate(&st->next_round, INT_MAX);
      }
    }
  }
  // Every waiter that passed has added its usage before reaching the gate;
  // wait for them all there (the last round's `passed` is n), then end.
  st->cond.lock();
  st->stop = true;
  st->cond.notify_all();
  st->cond.unlock();
  st->next_round.fetch_add(1, std::memory_order_release);
  FutexWakePrivate(&st->next_round, INT_MAX);
  if (!JoinAll(threads, absl::Now() + absl::Seconds(60))) {
    return error.empty() ? "waiters did not exit within 60s" : error;
  }
  if (error.empty()) {
    const double per = static_cast<double>(n) * static_cast<double>(rounds);
    std::sort(round_ns.begin(), round_ns.end());
    const double med = round_ns[round_ns.size() / 2];
    s->iterations = per;
    s->real_s = med * rounds / 1e9;
    s->cpu_s = static_cast<double>(st->cpu_ns.load()) / 1e9;
    Put(s, "round_ns", med);
    Put(s, "vcsw_per_waiter", static_cast<double>(st->vcsw.load()) / per);
    Put(s, "ivcsw_per_waiter", static_cast<double>(st->ivcsw.load()) / per);
    Put(s, "csw_per_waiter",
        static_cast<double>(st->vcsw.load() + st->ivcsw.load()) / per);
    Put(s, "cpu_ns_per_waiter", static_cast<double>(st->cpu_ns.load()) / per);
  }
  delete args;
  delete st;
  return error;
}

void Scenario6(const Plan& plan, Results& results) {
  std::vector<Case> pc;
  for (const auto& [p, c] : plan.pc_pairs) {
    for (int q : plan.pc_queues) {
      for (const std::string& pin : plan.pins) {
        ForEachCond([&, p = p, c = c]<typename C>() {
          const bool pinned = pin == "pinned";
          const absl::Duration window = plan.w_pc;
          pc.push_back({"prodcons",
                        absl::StrFormat("P=%d C=%d queue=%d", p, c, q), pin,
                        C::kName, [=](Sample* s) {
                          return RunProducerConsumer<C>(p, c, q, pinned,
                                                        window, s);
                        }});
        });
      }
    }
  }
  RunCases("6/7 condvar producer/consumer", pc, plan.reps, results);
  std::vector<Case> bc;
  for (const auto& [waiters, rounds] : plan.bc) {
    for (const std::string& pin : plan.pins) {
      ForEachCond([&, waiters = waiters, rounds = rounds]<typename C>() {
        const bool pinned = pin == "pinned";
        bc.push_back({"broadcast", absl::StrFormat("waiters=%d", waiters), pin,
                      C::kName, [=](Sample* s) {
                        return RunBroadcast<C>(waiters, rounds, pinned, s);
                      }});
      });
    }
  }
  RunCases("6/7 condvar broadcast", bc, plan.reps, results);
}

// ---------------------------------------------------------------------------
// 5. Hash scaling (bench/futex_hash) and 4b (bench/futex_schbench): other
// binaries of bench/, run as they are; their tables are copied into the
// report and futex_hash's rows parsed for the plots and targets.

bool ParseSi(absl::string_view text, double* v) {
  double mult = 1;
  if (!text.empty()) {
    switch (text.back()) {
      case 'k':
        mult = 1e3;
        break;
      case 'M':
        mult = 1e6;
        break;
      case 'G':
        mult = 1e9;
        break;
    }
    if (mult != 1) text.remove_suffix(1);
  }
  double x;
  if (!absl::SimpleAtod(text, &x)) return false;
  *v = x * mult;
  return true;
}

// futex_hash's tables: "futex hash: N threads x K keys; ..." then rows
// "config  table...  median  [min - max]  ratio".
void ParseFutexHash(const std::string& text, const std::string& pin,
                    Results& results) {
  int threads = -1;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::ConsumePrefix(&line, "futex hash: ")) {
      const size_t sp = line.find(' ');
      if (!absl::SimpleAtoi(line.substr(0, sp), &threads)) threads = -1;
      continue;
    }
    if (line.empty()) {
      threads = -1;
      continue;
    }
    if (threads < 0) continue;
    std::vector<absl::string_view> f =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    size_t bracket = 0;
    for (size_t i = 1; i < f.size(); ++i) {
      if (absl::StartsWith(f[i], "[")) {
        bracket = i;
        break;
      }
    }
    double med, lo, hi;
    if (bracket < 2 || bracket + 2 >= f.size() ||
        !ParseSi(f[bracket - 1], &med) ||
        !ParseSi(absl::StripPrefix(f[bracket], "["), &lo) ||
        !ParseSi(absl::StripSuffix(f[bracket + 2], "]"), &hi)) {
      continue;
    }
    Series& s = results.Get("hash", absl::StrFormat("N=%d", threads), pin,
                            std::string(f[0]));
    s.in_json = false;
    // The median and the extremes of futex_hash's repetitions.
    for (double v : {lo, med, hi}) {
      Sample x;
      Put(&x, "ops_per_s", v);
      s.samples.push_back(x);
    }
  }
}

void RunOtherBench(Report& report, const std::string& title,
                   const std::string& path, std::vector<std::string> args,
                   absl::Duration timeout, std::string* text) {
  report.Print("\n== %s ==\n$ %s %s\n", title, path, absl::StrJoin(args, " "));
  ProgramSpec spec;
  spec.path = path;
  spec.argv = {path};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.stdin_path = "";
  spec.timeout = timeout;
  const absl::Time start = absl::Now();
  absl::FPrintF(stderr, "[%s] %s: running %s (its progress below)\n",
                Elapsed(), title, path.substr(path.rfind('/') + 1));
  const ChildOutcome out = RunProgram(spec);
  report.Write(out.stdout_text);
  if (!out.ok) report.Print("FAILED: %s\n", out.error);
  absl::FPrintF(stderr, "[%s] %s: done in %s\n", Elapsed(), title,
                absl::FormatDuration(
                    absl::Trunc(absl::Now() - start, absl::Seconds(1))));
  if (text != nullptr) *text = out.stdout_text;
}

// ---------------------------------------------------------------------------
// 7. Real programs under the shim vs glibc.

bool WriteInput(const std::string& path, size_t bytes) {
  FILE* f = fopen(path.c_str(), "w");
  if (f == nullptr) return false;
  size_t written = 0;
  // Runs of consecutive numbers, restarting higher: compresses, not
  // trivially; sorts with many duplicates.
  for (long i = 1; written < bytes; ++i) {
    for (long j = i * 1000; j < i * 1000 + 13000 && written < bytes; ++j) {
      char buf[32];
      const int n = snprintf(buf, sizeof buf, "%ld\n", j);
      fwrite(buf, 1, static_cast<size_t>(n), f);
      written += static_cast<size_t>(n);
    }
  }
  return fclose(f) == 0;
}

void Scenario7(const Plan& plan, const std::string& shim,
               const std::string& work_dir, Report& report,
               Results& results) {
  const std::string input = work_dir + "/programs_input.txt";
  bool have_input = false;
  std::vector<std::pair<const Program*, std::string>> runnable;
  for (const Program& p : plan.programs) {
    const std::string path = Which(p.path);
    if (path.empty()) {
      for (const char* impl : {"glibc", "parklot"}) {
        results.Get("programs", p.name, "", impl).skipped =
            absl::StrCat(p.path, " not installed (tools/setup installs it)");
      }
      continue;
    }
    runnable.emplace_back(&p, path);
  }
  if (shim.empty() || access(shim.c_str(), R_OK) != 0) {
    for (const auto& [p, path] : runnable) {
      results.Get("programs", p->name, "", "glibc").skipped = "no shim";
      results.Get("programs", p->name, "", "parklot").skipped =
          absl::StrCat("shim not found: '", shim, "' (--shim)");
    }
    return;
  }
  if (!runnable.empty()) {
    have_input = WriteInput(input, plan.data_bytes);
    if (!have_input) {
      report.Print("programs: cannot write %s\n", input);
      return;
    }
  }
  const absl::Time start = absl::Now();
  const absl::Time budget_end =
      std::min(start + plan.prog_budget, g_start + plan.total_target);
  g_progress.Start("7/7 programs",
                   runnable.size() * 2 * static_cast<size_t>(plan.prog_reps));
  int reps_done = 0;
  absl::Duration rep_time;
  for (int rep = 0; rep < plan.prog_reps; ++rep) {
    // Another repetition only if it should fit in the budget (with a
    // margin: the machine's load varies).
    if (rep > 0 && absl::Now() + rep_time * 1.25 > budget_end) break;
    const absl::Time rep_start = absl::Now();
    for (const auto& [p, path] : runnable) {
      for (const char* impl : {"glibc", "parklot"}) {
        Series& s = results.Get("programs", p->name, "", impl);
        if (rep == 0 && absl::Now() > budget_end) {
          s.skipped = "time budget spent";
          g_progress.Step("");
          continue;
        }
        ProgramSpec spec;
        spec.path = path;
        spec.argv = {path};
        spec.argv.insert(spec.argv.end(), p->args.begin(), p->args.end());
        if (p->data_arg) spec.argv.push_back(input);
        if (p->data_on_stdin) spec.stdin_path = input;
        spec.discard_stdout = !p->rate && !absl::StartsWith(p->name, "sysbench");
        spec.capture_stderr = p->rate;
        spec.timeout = absl::Seconds(300);
        if (std::string(impl) == "parklot") {
          spec.set_env = {absl::StrCat("LD_PRELOAD=", shim)};
        } else {
          spec.unset_env = {"LD_PRELOAD"};
        }
        const ChildOutcome out = RunProgram(spec);
        if (!out.ok) {
          s.failures.push_back(out.error);
        } else {
          Sample x;
          x.repetition = rep;
          x.iterations = 1;
          x.real_s = absl::ToDoubleSeconds(out.wall);
          x.cpu_s = absl::ToDoubleSeconds(out.cpu);
          Put(&x, "wall_ns", absl::ToDoubleNanoseconds(out.wall));
          Put(&x, "cpu_ns", absl::ToDoubleNanoseconds(out.cpu));
          Put(&x, "vcsw", static_cast<double>(out.voluntary_switches));
          Put(&x, "ivcsw", static_cast<double>(out.involuntary_switches));
          if (p->rate) {
            // "Nodes/second    : 1234567"
            const size_t at = out.stdout_text.find("Nodes/second");
            double nps = 0;
            if (at != std::string::npos) {
              const size_t colon = out.stdout_text.find(':', at);
              const size_t eol = out.stdout_text.find('\n', at);
              absl::SimpleAtod(
                  absl::StripAsciiWhitespace(out.stdout_text.substr(
                      colon + 1, eol == std::string::npos ? std::string::npos
                                                          : eol - colon - 1)),
                  &nps);
            }
            if (nps > 0) {
              Put(&x, "nodes_per_s", nps);
            } else {
              s.failures.push_back("no Nodes/second in its output");
              g_progress.Step("");
              continue;
            }
          }
          s.samples.push_back(x);
        }
        g_progress.Step(absl::StrFormat("repetition %d: %s (%s)", rep + 1,
                                        p->name, impl));
      }
    }
    rep_time = absl::Now() - rep_start;
    ++reps_done;
  }
  g_progress.Done();
  if (have_input) unlink(input.c_str());
  report.Print(
      "\nprograms: %d repetition(s) of %d asked (budget %s, or until the "
      "whole run reaches %s), input %s bytes\n",
      reps_done, plan.prog_reps, absl::FormatDuration(plan.prog_budget),
      absl::FormatDuration(plan.total_target),
      Si(static_cast<double>(plan.data_bytes)));
}

// ---------------------------------------------------------------------------
// Targets (issue 6), from the medians.

struct Verdict {
  std::string target, figure, result;
};

// Counts cells meeting `ok(ratio)` and the range of the ratios.
struct Tally {
  int met = 0, total = 0;
  std::vector<double> all;
  void Add(double r, bool ok) {
    if (!std::isfinite(r)) return;
    ++total;
    met += ok;
    all.push_back(r);
  }
  std::string Range(const char* unit = "x") const {
    if (total == 0) return "no data";
    std::vector<double> v = all;
    std::sort(v.begin(), v.end());
    const double med = v.size() % 2 ? v[v.size() / 2]
                                    : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    return absl::StrFormat("%d/%d cells; median %.2f%s, %.2f%s - %.2f%s", met,
                           total, med, unit, v.front(), unit, v.back(), unit);
  }
  std::string Result() const {
    if (total == 0) return "n/a";
    return met == total ? "met" : met == 0 ? "MISSED" : "partly";
  }
};

double Ratio(const Results& r, const std::string& scenario,
             const std::string& cell, const std::string& pin,
             const std::string& impl, const std::string& metric,
             const std::string& base = "glibc") {
  const Series* a = r.Find(scenario, cell, pin, impl);
  const Series* b = r.Find(scenario, cell, pin, base);
  if (a == nullptr || b == nullptr || a->samples.empty() ||
      b->samples.empty()) {
    return NAN;
  }
  const double bm = b->Median(metric);
  return bm != 0 ? a->Median(metric) / bm : NAN;
}

int CellThreads(const std::string& cell) {
  int t = -1;
  if (absl::StartsWith(cell, "T=")) {
    absl::SimpleAtoi(cell.substr(2, cell.find(' ') - 2), &t);
  }
  return t;
}

std::vector<Verdict> Targets(const Results& r) {
  std::vector<Verdict> v;
  {
    Tally t;
    for (const Series* s : r.Of("uncontended")) {
      if (s->impl != "parklot") continue;
      const double x =
          Ratio(r, "uncontended", s->cell, s->pin, "parklot", "cpu_ns_per_op");
      t.Add(x, x <= 1.0);
    }
    v.push_back({"1 uncontended: parklot CPU time/op <= 1.0x glibc",
                 t.Range(), t.Result()});
  }
  for (const auto& [threads, want] :
       std::vector<std::pair<int, double>>{{2, 1.5}, {16, 2.0}, {64, 2.0}}) {
    Tally t;
    for (const Series* s : r.Of("contended")) {
      if (s->impl != "parklot" || CellThreads(s->cell) != threads) continue;
      const double x =
          Ratio(r, "contended", s->cell, s->pin, "parklot", "ops_per_s");
      t.Add(x, x >= want);
    }
    v.push_back({absl::StrFormat("2 contended T=%d: ops/s >= %.1fx glibc",
                                 threads, want),
                 t.Range(), t.Result()});
  }
  {
    Tally t;
    for (const Series* s : r.Of("contended")) {
      if (s->impl != "parklot" || CellThreads(s->cell) < 2) continue;
      const double x =
          Ratio(r, "contended", s->cell, s->pin, "parklot", "cpu_ns_per_op");
      t.Add(x, x <= 1.0);
    }
    v.push_back({"2 contended T>=2: CPU time/op <= glibc", t.Range(),
                 t.Result()});
  }
  {
    Tally t;
    for (const Series* s : r.Of("fairness")) {
      if (s->impl != "parklot") continue;
      const double x =
          Ratio(r, "fairness", s->cell, s->pin, "parklot", "wait_p99_ns");
      t.Add(x, x <= 1.0);
    }
    v.push_back({"3 fairness: acquire-wait p99 <= glibc", t.Range(),
                 t.Result()});
  }
  for (const char* impl : {"parklot", "glibc"}) {
    Tally t;
    for (const Series* s : r.Of("fairness")) {
      if (s->impl != impl || s->samples.empty()) continue;
      const double x = s->Median("min_max");
      t.Add(x, x >= 0.5);
    }
    v.push_back({absl::StrCat("3 fairness: no thread starved, ", impl,
                              " per-thread min/max ops >= 0.5"),
                 t.Range(""), t.Result()});
  }
  {
    Tally t;
    for (const Series* s : r.Of("wakeup")) {
      if (s->impl != "park" && s->impl != "parklot") continue;
      const double x =
          Ratio(r, "wakeup", s->cell, s->pin, s->impl, "wake_p99_ns");
      t.Add(x, x <= 1.0);
    }
    v.push_back({"4 wake-up p99 <= glibc (park and parklot CondVar; "
                 "no issue target, for reference)",
                 t.Range(), t.Result()});
  }
  {
    Tally within, ahead;
    for (const std::string& pin : r.Pins("hash")) {
      for (const std::string& cell : r.Cells("hash")) {
        const Series* g = r.Find("hash", cell, pin, "parklot/threads");
        if (g == nullptr || g->samples.empty()) continue;
        const double gm = g->Median("ops_per_s");
        double best_fixed = 0, best_kernel = 0;
        for (const Series* s : r.Of("hash")) {
          if (s->cell != cell || s->pin != pin || s->samples.empty()) continue;
          const double m = s->Median("ops_per_s");
          if (absl::StartsWith(s->impl, "parklot/fixed:")) {
            best_fixed = std::max(best_fixed, m);
          }
          if (absl::StartsWith(s->impl, "kernel/")) {
            best_kernel = std::max(best_kernel, m);
          }
        }
        if (best_fixed > 0) within.Add(gm / best_fixed, gm / best_fixed >= 0.95);
        if (best_kernel > 0) ahead.Add(gm / best_kernel, gm > best_kernel);
      }
    }
    v.push_back({"5 hash: parklot/threads within 5% of the best fixed table",
                 within.Range(), within.Result()});
    v.push_back({"5 hash: parklot/threads ahead of the best kernel size at "
                 "every N",
                 ahead.Range(), ahead.Result()});
  }
  {
    // Voluntary switches are the ones a herd causes (waking only to block
    // on the mutex); involuntary ones are preemptions, shown beside.
    Tally vol, all;
    for (const Series* s : r.Of("broadcast")) {
      if (s->impl != "parklot" || s->samples.empty()) continue;
      const double x = s->Median("vcsw_per_waiter");
      vol.Add(x, x <= 1.2);
      const double y = s->Median("csw_per_waiter");
      all.Add(y, y <= 1.2);
    }
    v.push_back({"6 broadcast: parklot voluntary context switches <= 1.2 x "
                 "waiters",
                 vol.Range(" per waiter"), vol.Result()});
    v.push_back({"6 broadcast: the same counting involuntary switches "
                 "(preemptions) too",
                 all.Range(" per waiter"), all.Result()});
  }
  {
    Tally t;
    for (const std::string& cell : r.Cells("programs")) {
      const Series* g = r.Find("programs", cell, "", "glibc");
      const Series* p = r.Find("programs", cell, "", "parklot");
      if (g == nullptr || p == nullptr || g->samples.empty() ||
          p->samples.empty()) {
        continue;
      }
      const double speed = g->has("nodes_per_s")
                               ? p->Median("nodes_per_s") /
                                     g->Median("nodes_per_s")
                               : g->Median("wall_ns") / p->Median("wall_ns");
      t.Add(speed, speed >= 1.0);
    }
    v.push_back({"7 programs: speed under the shim >= glibc (no issue "
                 "target, for reference)",
                 t.Range(), t.Result()});
  }
  return v;
}

// ---------------------------------------------------------------------------
// Plots: gnuplot data files, scripts, PNGs.

std::string GnuplotPreamble(const std::string& png, int w, int h) {
  return absl::StrFormat(
      "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
      "  set terminal pngcairo size %d,%d font ',10' noenhanced\n"
      "} else {\n"
      "  set terminal png size %d,%d noenhanced\n"
      "}\n"
      "set output '%s'\n"
      "set grid\n"
      "set key outside right top vertical\n",
      w, h, w, h, png);
}

// A fixed colour (and dash) per implementation, the same in every plot:
// glibc black, parklot red, kernel configurations dashed.
std::string LineStyle(const std::string& impl, int column) {
  static const std::map<std::string, std::string> colors = {
      {"glibc", "#000000"},  {"glibc_adaptive", "#7f7f7f"},
      {"std", "#1f77b4"},    {"absl", "#2ca02c"},
      {"futex", "#9467bd"},  {"parklot", "#d62728"},
      {"park", "#ff7f0e"},
  };
  // futex_hash's configurations: kernel sizes dashed, parklot solid with
  // the growing table red.
  static const std::map<std::string, std::string> hash = {
      {"kernel/default", "#000000"},   {"kernel/global", "#7f7f7f"},
      {"kernel/16", "#8c564b"},        {"kernel/128", "#bcbd22"},
      {"kernel/1024", "#17becf"},      {"kernel/8192", "#e377c2"},
      {"kernel/65536", "#9467bd"},     {"parklot/threads", "#d62728"},
      {"parklot/cpus", "#ff7f0e"},     {"parklot/fixed:2", "#2ca02c"},
      {"parklot/fixed:16", "#1f77b4"}, {"parklot/fixed:1024", "#0b3d91"},
  };
  static const char* palette[] = {"#1f77b4", "#2ca02c", "#9467bd", "#8c564b",
                                  "#17becf", "#bcbd22", "#e377c2", "#ff7f0e"};
  auto it = colors.find(impl);
  auto ht = hash.find(impl);
  const std::string color =
      it != colors.end()   ? it->second
      : ht != hash.end()   ? ht->second
                           : palette[static_cast<size_t>(column) % 8];
  return absl::StrFormat("lc rgb '%s' dt %d", color,
                         absl::StartsWith(impl, "kernel/") ? 2 : 1);
}

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  return static_cast<bool>(f);
}

// A table: first column `x`, one column per implementation (medians of
// `metric`), '?' where missing (gnuplot skips it).
std::string DataTable(const Results& r, const std::string& scenario,
                      const std::string& pin,
                      const std::vector<std::pair<double, std::string>>& rows,
                      const std::string& metric, double scale = 1) {
  std::string t = "x";
  const std::vector<std::string> impls = r.Impls(scenario);
  for (const std::string& i : impls) absl::StrAppend(&t, " ", i);
  absl::StrAppend(&t, "\n");
  for (const auto& [x, cell] : rows) {
    absl::StrAppend(&t, x);
    for (const std::string& i : impls) {
      const Series* s = r.Find(scenario, cell, pin, i);
      const double m =
          s != nullptr && !s->samples.empty() ? s->Median(metric) : NAN;
      absl::StrAppend(&t, " ",
                      std::isfinite(m) ? absl::StrFormat("%.6g", m * scale)
                                       : std::string("?"));
    }
    absl::StrAppend(&t, "\n");
  }
  return t;
}

std::string PlotLines(const std::string& file,
                      const std::vector<std::string>& impls) {
  std::string cmd = "plot ";
  for (size_t i = 0; i < impls.size(); ++i) {
    absl::StrAppend(&cmd, i == 0 ? "" : ", \\\n     ",
                    absl::StrFormat("'%s' using 1:%d with linespoints lw 2 pt "
                                    "7 ps 0.8 %s title '%s'",
                                    i == 0 ? file : "", i + 2,
                                    LineStyle(impls[i], static_cast<int>(i)),
                                    impls[i]));
  }
  return cmd + "\n";
}

std::vector<std::string> WritePlots(const Plan& plan, const Results& r,
                                    const std::string& dir) {
  std::vector<std::string> scripts;
  const std::string data = dir + "/plotdata";
  mkdir(data.c_str(), 0755);
  // 2. Throughput vs threads: one figure per pinning, a panel per (work,
  // lock count).
  if (!r.Of("contended").empty()) {
    for (const std::string& pin : r.Pins("contended")) {
      const std::vector<std::string> impls = r.Impls("contended");
      std::string gp = GnuplotPreamble(
          absl::StrCat(dir, "/contended_", pin, ".png"), 1800, 1000);
      absl::StrAppend(
          &gp,
          "set multiplot layout 2,", plan.c_works.size(),
          " title 'contended throughput, ", pin,
          " (median ops/s vs threads; oversubscribed beyond ", g_cpus.size(),
          " CPUs)'\n",
          "set logscale x 2\nset logscale y\nset xlabel 'threads'\n"
          "set ylabel 'ops/s'\nset format y '%.0s%c'\n"
          "set key outside right top font ',8'\n");
      for (const char* locks : {"one", "half"}) {
        for (const auto& [in, out] : plan.c_works) {
          std::vector<std::pair<double, std::string>> rows;
          for (int t : plan.c_threads) {
            const int l = std::string(locks) == "one" ? 1 : t / 2;
            if (std::string(locks) == "half" && l <= 1) continue;
            rows.emplace_back(t, ContendedCell(t, in, out, l));
          }
          const std::string file = absl::StrFormat(
              "%s/contended_%s_%s_cs%d_out%d.dat", data, pin, locks, in, out);
          WriteFile(file, DataTable(r, "contended", pin, rows, "ops_per_s"));
          absl::StrAppend(&gp,
                          absl::StrFormat("set title 'cs=%d out=%d, %s'\n", in,
                                          out,
                                          std::string(locks) == "one"
                                              ? "one lock"
                                              : "T/2 locks"),
                          PlotLines(file, impls));
        }
      }
      absl::StrAppend(&gp, "unset multiplot\n");
      const std::string script = absl::StrCat(data, "/contended_", pin, ".gp");
      WriteFile(script, gp);
      scripts.push_back(script);
    }
  }
  // 3. Acquire-wait p99 vs threads, per critical section (first delay).
  if (!r.Of("fairness").empty() && !plan.f_delay_ns.empty()) {
    const std::vector<std::string> impls = r.Impls("fairness");
    std::string gp =
        GnuplotPreamble(dir + "/fairness_p99.png", 1800, 1000);
    absl::StrAppend(&gp, "set multiplot layout 2,", plan.f_cs.size(),
                    " title 'acquire-wait p99 (us) vs threads, delay between "
                    "sections 0'\n",
                    "set logscale x 2\nset logscale y\nset xlabel 'threads'\n"
                    "set ylabel 'p99 wait (us)'\nset key outside right top "
                    "font ',8'\n");
    for (const std::string& pin : r.Pins("fairness")) {
      for (Cs cs : plan.f_cs) {
        std::vector<std::pair<double, std::string>> rows;
        for (int t : plan.f_threads) {
          rows.emplace_back(t, FairnessCell(t, cs, plan.f_delay_ns[0]));
        }
        const std::string file = absl::StrFormat("%s/fairness_%s_%s.dat", data,
                                                 pin, CsName(cs));
        WriteFile(file,
                  DataTable(r, "fairness", pin, rows, "wait_p99_ns", 1e-3));
        absl::StrAppend(&gp,
                        absl::StrFormat("set title 'cs=%s, %s'\n", CsName(cs),
                                        pin),
                        PlotLines(file, impls));
      }
    }
    absl::StrAppend(&gp, "unset multiplot\n");
    const std::string script = data + "/fairness_p99.gp";
    WriteFile(script, gp);
    scripts.push_back(script);
  }
  // 4. Wake-up latency percentiles: x = p50, p99, p99.9.
  if (!r.Of("wakeup").empty()) {
    const std::vector<std::string> cells = r.Cells("wakeup");
    const std::vector<std::string> pins = r.Pins("wakeup");
    const std::vector<std::string> impls = r.Impls("wakeup");
    std::string gp = GnuplotPreamble(dir + "/wakeup_latency.png", 1600, 1000);
    absl::StrAppend(&gp, "set multiplot layout ", pins.size(), ",",
                    cells.size(),
                    " title 'wake-up latency percentiles (us), schbench "
                    "style'\n",
                    "set logscale y\nset xtics ('p50' 1, 'p99' 2, 'p99.9' 3)\n"
                    "set xrange [0.7:3.3]\nset ylabel 'us'\n"
                    "set key inside top left font ',8'\n");
    for (const std::string& pin : pins) {
      for (const std::string& cell : cells) {
        std::string t = "x";
        for (const std::string& i : impls) absl::StrAppend(&t, " ", i);
        absl::StrAppend(&t, "\n");
        const char* metrics[] = {"wake_p50_ns", "wake_p99_ns", "wake_p999_ns"};
        for (int k = 0; k < 3; ++k) {
          absl::StrAppend(&t, k + 1);
          for (const std::string& i : impls) {
            const Series* s = r.Find("wakeup", cell, pin, i);
            const double m = s != nullptr && !s->samples.empty()
                                 ? s->Median(metrics[k])
                                 : NAN;
            absl::StrAppend(&t, " ",
                            std::isfinite(m) && m > 0
                                ? absl::StrFormat("%.6g", m / 1e3)
                                : std::string("?"));
          }
          absl::StrAppend(&t, "\n");
        }
        const std::string file =
            absl::StrFormat("%s/wakeup_%s_%s.dat", data, pin, cell);
        WriteFile(file, t);
        absl::StrAppend(&gp,
                        absl::StrFormat("set title '%s, %s'\n", cell, pin),
                        PlotLines(file, impls));
      }
    }
    absl::StrAppend(&gp, "unset multiplot\n");
    const std::string script = data + "/wakeup_latency.gp";
    WriteFile(script, gp);
    scripts.push_back(script);
  }
  // 5. Hash scaling: ops/s vs threads per configuration.
  if (!r.Of("hash").empty()) {
    const std::vector<std::string> pins = r.Pins("hash");
    std::string gp = GnuplotPreamble(dir + "/hash_scaling.png", 1800, 800);
    absl::StrAppend(&gp, "set multiplot layout 1,", pins.size(),
                    " title 'futex hash storm (perf bench futex hash): "
                    "median ops/s vs threads'\n",
                    "set logscale x 2\nset logscale y\nset xlabel 'threads'\n"
                    "set ylabel 'ops/s'\nset format y '%.0s%c'\n"
                    "set key outside right font ',8'\n");
    for (const std::string& pin : pins) {
      std::vector<std::pair<double, std::string>> rows;
      for (const std::string& cell : r.Cells("hash")) {
        int n = 0;
        if (absl::SimpleAtoi(cell.substr(2), &n)) rows.emplace_back(n, cell);
      }
      std::sort(rows.begin(), rows.end());
      const std::string file = absl::StrFormat("%s/hash_%s.dat", data, pin);
      WriteFile(file, DataTable(r, "hash", pin, rows, "ops_per_s"));
      absl::StrAppend(&gp, absl::StrFormat("set title '%s'\n", pin),
                      PlotLines(file, r.Impls("hash")));
    }
    absl::StrAppend(&gp, "unset multiplot\n");
    const std::string script = data + "/hash_scaling.gp";
    WriteFile(script, gp);
    scripts.push_back(script);
  }
  // 6. Broadcast: context switches per waiter; producer/consumer items/s.
  if (!r.Of("broadcast").empty()) {
    const std::vector<std::string> impls = r.Impls("broadcast");
    std::string t = "case";
    for (const std::string& i : impls) absl::StrAppend(&t, " ", i);
    absl::StrAppend(&t, "\n");
    for (const std::string& pin : r.Pins("broadcast")) {
      for (const std::string& cell : r.Cells("broadcast")) {
        absl::StrAppend(&t, "\"", cell.substr(cell.find('=') + 1), " ",
                        pin == "pinned" ? "pin" : "unpin", "\"");
        for (const std::string& i : impls) {
          const Series* s = r.Find("broadcast", cell, pin, i);
          const double m = s != nullptr && !s->samples.empty()
                               ? s->Median("csw_per_waiter")
                               : NAN;
          absl::StrAppend(&t, " ",
                          std::isfinite(m) ? absl::StrFormat("%.4g", m)
                                           : std::string("?"));
        }
        absl::StrAppend(&t, "\n");
      }
    }
    const std::string file = data + "/broadcast.dat";
    WriteFile(file, t);
    std::string gp = GnuplotPreamble(dir + "/broadcast.png", 1200, 700);
    absl::StrAppend(
        &gp,
        "set title 'condvar broadcast: context switches per waiter "
        "(voluntary + involuntary; 1 = each waiter slept once; target <= "
        "1.2)'\n",
        "set style data histograms\nset style histogram clustered gap 1\n"
        "set style fill solid 0.8 border -1\nset boxwidth 0.9\n"
        "set yrange [0:*]\nset xlabel 'waiters'\n",
        "set ylabel 'context switches per waiter'\n",
        absl::StrFormat("plot for [i=2:%d] '%s' using i:xtic(1) title "
                        "columnheader(i), 1.2 with lines dt 2 lc rgb 'black' "
                        "title 'target 1.2'\n",
                        impls.size() + 1, file));
    const std::string script = data + "/broadcast.gp";
    WriteFile(script, gp);
    scripts.push_back(script);
  }
  // 7. Programs: speed under the shim relative to glibc.
  if (!r.Of("programs").empty()) {
    std::string t = "# program speed\n";
    int rows = 0;
    for (const std::string& cell : r.Cells("programs")) {
      const Series* g = r.Find("programs", cell, "", "glibc");
      const Series* p = r.Find("programs", cell, "", "parklot");
      if (g == nullptr || p == nullptr || g->samples.empty() ||
          p->samples.empty()) {
        continue;
      }
      const double speed = g->has("nodes_per_s")
                               ? p->Median("nodes_per_s") /
                                     g->Median("nodes_per_s")
                               : g->Median("wall_ns") / p->Median("wall_ns");
      absl::StrAppend(&t, "\"", cell, "\" ", absl::StrFormat("%.4g", speed),
                      "\n");
      ++rows;
    }
    if (rows > 0) {
      const std::string file = data + "/programs.dat";
      WriteFile(file, t);
      std::string gp = GnuplotPreamble(dir + "/programs.png", 1200, 700);
      absl::StrAppend(
          &gp,
          "set title 'real programs under the shim: speed relative to glibc "
          "(> 1 = faster; nodes/s for stockfish, 1/wall time otherwise)'\n",
          "set style data histograms\nset style fill solid 0.8 border -1\n"
          "set boxwidth 0.8\nset yrange [0:*]\nset xtics rotate by -30\n"
          "set key off\n",
          absl::StrFormat("set xrange [-0.6:%f]\n", rows - 0.4),
          absl::StrFormat("plot '%s' using 2:xtic(1), 1 with lines dt 2 lc "
                          "rgb 'black'\n",
                          file));
      const std::string script = data + "/programs.gp";
      WriteFile(script, gp);
      scripts.push_back(script);
    }
  }
  return scripts;
}

// ---------------------------------------------------------------------------
// Tables.

void PrintTables(const Plan& plan, Report& report, const Results& r) {
  report.Print(
      "\nRatios divide each implementation's median by glibc's in the same "
      "cell (for times, lower is better; for rates, higher).\n");
  using C = Column;
  PrintTable(report, r, "uncontended",
             "1. uncontended, one thread: CPU time per operation (the cost; "
             "wall time per operation also counts preemptions by other "
             "processes)",
             {{"cpu_ns_per_op", "cpu/op", C::kTime, true, true},
              {"ns_per_op", "wall/op", C::kTime, false, true}});
  PrintTable(report, r, "contended",
             "2. contended throughput: T threads, cs/out = work units "
             "(~1ns) inside/outside the lock",
             {{"ops_per_s", "ops/s", C::kRate, true, true},
              {"cpu_ns_per_op", "cpu/op", C::kTime, false, true},
              {"vcsw_per_op", "vcsw/op", C::kCount, false, false},
              {"ivcsw_per_op", "ivcsw/op", C::kCount, false, false},
              {"min_max", "thr min/max", C::kFixed, false, false},
              {"cv", "thr cv", C::kFixed, false, false}});
  PrintTable(report, r, "fairness",
             "3. fairness and long critical sections: one lock, acquire-wait "
             "percentiles",
             {{"wait_p50_ns", "wait p50", C::kTime, false, true},
              {"wait_p99_ns", "wait p99", C::kTime, true, true},
              {"wait_max_ns", "wait max", C::kTime, false, false},
              {"ops_per_s", "ops/s", C::kRate, false, true},
              {"min_max", "thr min/max", C::kFixed, false, false},
              {"jain", "jain", C::kFixed, false, false},
              {"cpu_ns_per_op", "cpu/op", C::kTime, false, false}});
  if (!r.Of("fairness").empty()) {
    report.Print(
        "note: percentiles are over acquisitions. A barging lock lets the "
        "releasing thread re-acquire at once, so its many quick "
        "re-acquisitions fill the percentiles while the other threads' long "
        "waits show only in 'wait max' and 'thr min/max'; a lock that hands "
        "off (parklot when its fairness timer fires) spreads the waiting "
        "over all acquisitions.\n");
    report.Print(
        "note: with many more threads than CPUs (here %d), a window of %s is "
        "shorter than the scheduler's round over all runnable threads: "
        "threads that never got a CPU show as starved (thr min/max 0) under "
        "every implementation; --window_scale=8 measures that better.\n",
        g_cpus.size(), absl::FormatDuration(plan.w_fairness));
  }
  PrintTable(report, r, "wakeup",
             "4. wake-up latency, schbench style: a waker stamps and wakes "
             "each worker in turn (glibc/absl/parklot = condvars; park = "
             "parklot Park/UnparkOne; futex = raw FUTEX_WAKE)",
             {{"wake_p50_ns", "p50", C::kTime, false, true},
              {"wake_p99_ns", "p99", C::kTime, true, true},
              {"wake_p999_ns", "p99.9", C::kTime, false, true},
              {"ops_per_s", "wakeups/s", C::kRate, false, false},
              {"cpu_ns_per_op", "cpu/wakeup", C::kTime, false, false},
              {"vcsw_per_op", "vcsw/wakeup", C::kCount, false, false}});
  PrintTable(report, r, "prodcons",
             "6a. condvar producer/consumer: P producers, C consumers, "
             "bounded queue",
             {{"ops_per_s", "items/s", C::kRate, true, true},
              {"cpu_ns_per_op", "cpu/item", C::kTime, false, true},
              {"vcsw_per_op", "vcsw/item", C::kCount, false, false},
              {"ivcsw_per_op", "ivcsw/item", C::kCount, false, false}});
  PrintTable(report, r, "broadcast",
             "6b. condvar broadcast (under the mutex) to N sleeping waiters: "
             "time until the last has passed; context switches per waiter "
             "(1 = it slept once)",
             {{"round_ns", "time", C::kTime, true, true},
              {"csw_per_waiter", "csw/waiter", C::kFixed, false, true},
              {"vcsw_per_waiter", "vcsw/waiter", C::kFixed, false, false},
              {"ivcsw_per_waiter", "ivcsw/waiter", C::kFixed, false, false},
              {"cpu_ns_per_waiter", "cpu/waiter", C::kTime, false, false}});
  (void)plan;
}

std::string MarkdownTargets(const std::vector<Verdict>& v) {
  std::string t = "| target (issue 6) | this run | result |\n|---|---|---|\n";
  for (const Verdict& x : v) {
    absl::StrAppend(&t, "| ", x.target, " | ", x.figure, " | ", x.result,
                    " |\n");
  }
  return t;
}

bool Wanted(int scenario) {
  const std::vector<std::string> only = absl::GetFlag(FLAGS_scenarios);
  if (only.empty()) return true;
  return std::find(only.begin(), only.end(), absl::StrCat(scenario)) !=
         only.end();
}

int Main(const char* argv0) {
  g_start = absl::Now();
  InitCpus();
  // Sleeps in critical sections mean what they say (default slack: 50us).
  prctl(PR_SET_TIMERSLACK, 1000, 0, 0, 0);
  const Plan plan = MakePlan();
  for (const std::string& s : absl::GetFlag(FLAGS_scenarios)) {
    int n;
    if (!absl::SimpleAtoi(s, &n) || n < 1 || n > 7) {
      absl::FPrintF(stderr, "suite: --scenarios takes numbers 1-7, not '%s'\n",
                    s);
      return 2;
    }
  }
  std::string out_dir = absl::GetFlag(FLAGS_out);
  // Under `bazel run` the working directory is the runfiles tree: a
  // relative --out means the caller's directory.
  const char* bwd = getenv("BUILD_WORKING_DIRECTORY");
  if (!out_dir.empty() && out_dir[0] != '/' && bwd != nullptr) {
    out_dir = absl::StrCat(bwd, "/", out_dir);
  }
  if (!out_dir.empty()) {
    mkdir(out_dir.c_str(), 0755);
    struct stat st;
    if (stat(out_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      absl::FPrintF(stderr, "suite: cannot create %s\n", out_dir);
      return 2;
    }
  }
  Report report;
  if (!report.Open(out_dir.empty() ? "" : out_dir + "/report.txt")) {
    absl::FPrintF(stderr, "suite: cannot write %s/report.txt\n", out_dir);
    return 2;
  }
  const std::string self = SelfDir();
  std::string hash_bin = absl::GetFlag(FLAGS_futex_hash);
  if (hash_bin.empty()) hash_bin = self + "/futex_hash";
  std::string schbench_bin = absl::GetFlag(FLAGS_futex_schbench);
  if (schbench_bin.empty()) schbench_bin = self + "/futex_schbench";
  std::string shim = absl::GetFlag(FLAGS_shim);
  if (shim.empty()) shim = self + "/../preload/libparklot_preload.so";
  // Absolute paths: programs run elsewhere get the shim in LD_PRELOAD.
  for (std::string* p : {&hash_bin, &schbench_bin, &shim}) {
    char buf[PATH_MAX];
    if (realpath(p->c_str(), buf) != nullptr) *p = buf;
  }

  utsname u;
  uname(&u);
  const std::string date = absl::FormatTime("%Y-%m-%d %H:%M %Z", absl::Now(),
                                            absl::LocalTimeZone());
  const std::string load_start = LoadAverage();
  const std::string machine = absl::StrFormat(
      "%s, %d CPUs online (nproc), %d usable; %s %s", CpuModel(),
      sysconf(_SC_NPROCESSORS_ONLN), g_cpus.size(), u.sysname, u.release);
  report.Print("parklot benchmark suite (issue 6), %s mode, %s\n", plan.mode,
               date);
  report.Print("machine: %s\nload average at start: %s\n", machine,
               load_start);
  report.Print(
      "in-process scenarios: %d repetitions, implementations interleaved in "
      "each; unpinned and pinned (round-robin over %d CPUs)\n",
      plan.reps, g_cpus.size());
  for (const std::string& n : plan.notes) report.Print("note: %s\n", n);
  if (!absl::GetFlag(FLAGS_scenarios).empty()) {
    report.Print("scenarios run: %s (the rest left out by --scenarios)\n",
                 absl::StrJoin(absl::GetFlag(FLAGS_scenarios), ","));
  }

  Results results;
  if (Wanted(1)) Scenario1(plan, results);
  if (Wanted(2)) Scenario2(plan, results);
  if (Wanted(3)) Scenario3(plan, results);
  if (Wanted(4)) Scenario4(plan, results);
  if (Wanted(6)) Scenario6(plan, results);
  PrintTables(plan, report, results);

  if (Wanted(4)) {
    if (plan.schbench_args.empty()) {
      report.Print("\n== 4b. raw-futex wake-ups (bench/futex_schbench) ==\n"
                   "left out in %s mode\n",
                   plan.mode);
    } else if (!Executable(schbench_bin)) {
      report.Print("\n== 4b. raw-futex wake-ups (bench/futex_schbench) ==\n"
                   "not built (%s)\n",
                   schbench_bin);
    } else {
      std::vector<std::string> args = plan.schbench_args;
      args.push_back(absl::StrCat("--shim=", shim));
      RunOtherBench(report,
                    "4b. raw syscall(SYS_futex) wake-ups, schbench style: "
                    "kernel hash sizes vs the shim (bench/futex_schbench)",
                    schbench_bin, args, absl::Minutes(5), nullptr);
    }
  }
  if (Wanted(5)) {
    if (!Executable(hash_bin)) {
      report.Print("\n== 5. hash scaling ==\nFAILED: futex_hash not found at "
                   "%s (--futex_hash)\n",
                   hash_bin);
      results.Get("hash", "N=?", "unpinned", "parklot/threads").failures.push_back(
          "futex_hash not found");
    } else {
      for (const std::string& pin : plan.pins) {
        std::vector<std::string> args =
            pin == "pinned" ? plan.hash_pinned_args : plan.hash_args;
        if (pin == "pinned") args.push_back("--pin");
        if (!out_dir.empty()) {
          args.push_back(absl::StrCat("--json_out=", out_dir, "/futex_hash",
                                      pin == "pinned" ? "_pinned" : "",
                                      ".json"));
        }
        std::string text;
        RunOtherBench(report,
                      absl::StrCat("5. hash scaling, perf bench futex hash "
                                   "style (bench/futex_hash), ",
                                   pin),
                      hash_bin, args, absl::Minutes(8), &text);
        ParseFutexHash(text, pin, results);
      }
    }
  }
  if (Wanted(7)) {
    Scenario7(plan, shim, out_dir.empty() ? "/tmp" : out_dir, report,
              results);
    PrintTable(report, results, "programs",
               "7. real programs, unmodified: glibc vs parklot (LD_PRELOAD "
               "shim); times are wall clock",
               {{"wall_ns", "wall", Column::kTime, true, true},
                {"nodes_per_s", "nodes/s", Column::kRate, true, true},
                {"cpu_ns", "cpu", Column::kTime, false, true},
                {"vcsw", "vcsw", Column::kCount, false, false},
                {"ivcsw", "ivcsw", Column::kCount, false, false}});
  }

  const std::vector<Verdict> targets = Targets(results);
  const std::string load_end = LoadAverage();
  report.Print("\n== targets (issue 6, on this machine; medians) ==\n");
  size_t w0 = 0, w1 = 0;
  for (const Verdict& v : targets) {
    w0 = std::max(w0, v.target.size());
    w1 = std::max(w1, v.figure.size());
  }
  for (const Verdict& v : targets) {
    report.Print("%-*s  %-*s  %s\n", w0, v.target, w1, v.figure, v.result);
  }
  const absl::Duration total =
      absl::Trunc(absl::Now() - g_start, absl::Seconds(1));
  report.Print("\nload average at end: %s; total time %s\n", load_end,
               absl::FormatDuration(total));

  int rc = 0;
  if (!out_dir.empty()) {
    std::map<std::string, std::string> context = {
        {"suite_mode", plan.mode},
        {"machine", machine},
        {"date", date},
        {"load_average_start", load_start},
        {"load_average_end", load_end},
        {"repetitions", absl::StrCat(plan.reps)},
        {"note",
         "one benchmark per scenario/cell/pinning/implementation; iterations "
         "= operations, real_time = wall ns per operation; counters are the "
         "figures of the tables; scenario 5 is in futex_hash*.json"}};
    if (!WriteJson(out_dir + "/suite.json", results, context, argv0)) {
      absl::FPrintF(stderr, "suite: cannot write %s/suite.json\n", out_dir);
      rc = 1;
    }
    std::string md = absl::StrFormat(
        "Machine: %s. Date: %s. Mode: %s (%d repetitions). Load average "
        "%s at start, %s at end.\n\n",
        machine, date, plan.mode, plan.reps, load_start, load_end);
    absl::StrAppend(&md, MarkdownTargets(targets));
    WriteFile(out_dir + "/summary.md", md);
    if (absl::GetFlag(FLAGS_plots)) {
      const std::string gnuplot = Which("gnuplot");
      if (gnuplot.empty()) {
        report.Print("plots: gnuplot not installed (tools/setup installs "
                     "gnuplot-nox); data in %s/plotdata\n",
                     out_dir);
      }
      for (const std::string& script : WritePlots(plan, results, out_dir)) {
        if (gnuplot.empty()) continue;
        ProgramSpec spec;
        spec.path = gnuplot;
        spec.argv = {gnuplot, script};
        spec.capture_stderr = true;
        spec.timeout = absl::Seconds(60);
        const ChildOutcome o = RunProgram(spec);
        if (!o.ok) {
          report.Print("plot %s: %s\n%s", script, o.error, o.stdout_text);
        }
      }
    }
    report.Print("\nresults in %s: report.txt, suite.json, futex_hash*.json, "
                 "summary.md, *.png (data and gnuplot scripts in plotdata/)\n",
                 out_dir);
  }
  // Any failed measurement makes the exit status non-zero.
  for (const Series* s : results.All()) {
    if (!s->failures.empty()) rc = 1;
  }
  return rc;
}

}  // namespace
}  // namespace bench
}  // namespace parklot

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "parklot's side-by-side benchmark suite (issue 6).\n"
      "  suite [--quick | --tiny] [--out=DIR] [--scenarios=1,2,...]\n"
      "Usually run through `tools/parklot bench [--quick] [--out DIR]`.");
  const std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    absl::FPrintF(stderr, "suite: unexpected argument '%s'\n", rest[1]);
    return 2;
  }
  return parklot::bench::Main(argv[0]);
}
