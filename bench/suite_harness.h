// The harness of //bench:suite, shared by every scenario: the
// machine (CPUs, pinning, clocks, per-thread usage), fixed-duration runs of
// T threads, cases run interleaved over repetitions, the plan of a mode,
// and the scenario interface with its registry.
//
// A scenario is one file, bench/suite_<N>_<name>.cc, that defines a
// subclass of Scenario and registers it with PARKLOT_SUITE_SCENARIO; adding
// one means that file and its line in bench/BUILD's suite srcs.
#ifndef PARKLOT_BENCH_SUITE_HARNESS_H_
#define PARKLOT_BENCH_SUITE_HARNESS_H_

#include <pthread.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "base/futex.h"
#include "bench/locks.h"
#include "bench/suite_report.h"

namespace parklot::internal {
namespace bench {

// ---------------------------------------------------------------------------
// Machine, clocks, usage.

// Records the start of the run and the CPUs this process may use. Called
// once, first, by main.
void InitMachine();
// The CPUs this process may run on (at least one).
const std::vector<int>& Cpus();
// When InitMachine ran.
absl::Time SuiteStart();
// Time since the start, "m:ss", for progress lines.
std::string Elapsed();

// Pins the calling thread to Cpus()[index % Cpus().size()].
void PinTo(int index);

inline int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// Sleeps `ns` nanoseconds (CLOCK_MONOTONIC), resuming after signals.
void SleepNs(int64_t ns);

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
  static Usage Thread();
};

// Usage summed over the threads of a run, each adding its own.
struct UsageSum {
  std::atomic<int64_t> vcsw{0}, ivcsw{0}, cpu_ns{0};
  // Adds what a thread used from `from` to `to`.
  void Add(const Usage& from, const Usage& to) {
    vcsw.fetch_add(to.vcsw - from.vcsw, std::memory_order_relaxed);
    ivcsw.fetch_add(to.ivcsw - from.ivcsw, std::memory_order_relaxed);
    cpu_ns.fetch_add(to.cpu_ns - from.cpu_ns, std::memory_order_relaxed);
  }
};

std::string CpuModel();
// /proc/loadavg's first three fields, "?" if unreadable.
std::string LoadAverage();
// The folder of the running binary.
std::string SelfDir();
// `path` as a user can run it from the workspace: a file in Bazel's output
// tree (in the user's cache folder, under a hashed name) becomes
// bazel-bin/PACKAGE/NAME; any other path is returned as it is.
std::string RunnablePath(const std::string& path);
bool Executable(const std::string& path);
// `name` as PATH finds it ("" if not found); a path is checked as is.
std::string Which(const std::string& name);
// Replaces `*path` by its absolute, resolved form if it exists.
void AbsolutePath(std::string* path);
bool WriteFile(const std::string& path, const std::string& text);
// Writes the gnuplot script `gp` to `path` and adds it to `scripts`.
void AddPlotScript(const std::string& path, const std::string& gp,
                   std::vector<std::string>* scripts);

// Sets metric `key` of `s` to `v` if `v` is finite.
void Put(Sample* s, const std::string& key, double v);

// ---------------------------------------------------------------------------
// Progress on standard error: one line updated in place on a terminal, a
// line every few seconds otherwise. Used by the main thread only.

class Progress {
 public:
  void Start(const std::string& label, size_t total);
  void Step(const std::string& detail);
  void Done();

 private:
  void Show(const std::string& detail);

  std::string label_;
  size_t total_ = 0, done_ = 0;
  absl::Time started_, last_;
  bool tty_ = false;
};

Progress& SuiteProgress();

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

struct WindowResult {
  std::string error;  // empty: ok
  int64_t elapsed_ns = 0;
  std::vector<WorkerOut> workers;
};

// Runs `body` on `threads` threads (each pinned if `pin`) for `window`,
// then sets the stop flag, calls `on_stop` and joins them. A thread that
// does not finish within 60s is reported in `error` and its state leaked.
WindowResult RunWindow(int threads, bool pin, absl::Duration window,
                       Body body, const std::function<void()>& on_stop = {});

// Joins `threads`, giving up at `deadline` (then the caller leaks what they
// use). Returns whether all were joined.
bool JoinAll(std::vector<pthread_t>& threads, absl::Time deadline);

// Threads a scenario starts itself, outside RunWindow: thread i is pinned
// (PinTo(i)) if asked, then runs fn(state, i).
class Threads {
 public:
  Threads() = default;
  Threads(const Threads&) = delete;
  Threads& operator=(const Threads&) = delete;
  // What the threads were given is freed only once all are joined: one
  // that is not may still use it (as it may use `state`, which the caller
  // then leaks too).
  ~Threads();

  // Starts `n` threads with stacks of `stack_bytes`. Stops at the first
  // that does not start and returns its error; "" if all started.
  std::string Start(int n, bool pin, size_t stack_bytes,
                    void (*fn)(void* state, int index), void* state);
  // How many started.
  int size() const { return static_cast<int>(threads_.size()); }
  // Joins them, giving up at `deadline`. Returns whether all were joined.
  bool Join(absl::Time deadline);

 private:
  struct Arg {
    void (*fn)(void*, int);
    void* state;
    int index;
    bool pin;
  };
  static void* Run(void* arg);

  std::vector<Arg>* args_ = nullptr;
  std::vector<pthread_t> threads_;
  bool joined_ = false;
};

// Waits until `*word` is not 0 (FUTEX_WAIT, waking every second to check
// the time) or `deadline` has passed. Returns whether it is not 0.
bool AwaitNonZero(std::atomic<uint32_t>* word, absl::Time deadline);

// The usual figures of a window into `s`: operations of workers
// [first, last), CPU and context switches of all.
void Summarize(const WindowResult& w, size_t first, size_t last, Sample* s);

// The table columns of Summarize's figures per `unit` ("op", "item"): the
// rate (UNITs/s) and CPU time per UNIT with ratios, context switches.
std::vector<Column> SummaryColumns(const std::string& unit);

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

// A lock and the data its critical section works on, on a line of its own.
template <typename L>
struct alignas(64) LockSlot {
  L lock;
  uint64_t data = 0;
};

// ---------------------------------------------------------------------------
// The plan: what a mode runs.

struct Plan {
  std::string mode;  // "full", "quick", "tiny"
  int reps = 7;      // repetitions of the in-process scenarios
  std::vector<std::string> pins = {"unpinned", "pinned"};
  double window_scale = 1;  // --window_scale
  // The mode's promise for the whole run (full <= 10 minutes, quick < 2);
  // scenario 7 stops starting programs once the run reaches it.
  absl::Duration total_target = absl::InfiniteDuration();

  // The value for this plan's mode.
  template <typename T>
  T Pick(const T& full, const T& quick, const T& tiny) const {
    return mode == "full" ? full : mode == "quick" ? quick : tiny;
  }
  // A measured window for this mode, times --window_scale.
  absl::Duration Window(absl::Duration full, absl::Duration quick,
                        absl::Duration tiny) const {
    return Pick(full, quick, tiny) * window_scale;
  }
};

// ---------------------------------------------------------------------------
// Running cases interleaved.

struct Case {
  std::string scenario, cell, pin, impl;
  // One measurement into the sample; returns "" or the error.
  std::function<std::string(Sample*)> run;
};

// Runs every case once per repetition, in order (A B C ... A B C), into
// the series of `results`; failures are kept in the series and printed.
void RunCases(const std::string& label, const std::vector<Case>& cases,
              int reps, Results& results);

// Runs another binary of bench/ as it is and copies its standard output
// into the report under "== title ==". Its output in `*text` if not null.
void RunOtherBench(Report& report, const std::string& title,
                   const std::string& path, std::vector<std::string> args,
                   absl::Duration timeout, std::string* text);

// ---------------------------------------------------------------------------
// Scenarios.

// What a scenario gets to run and report.
struct Context {
  const Plan& plan;
  Results& results;
  Report& report;
  std::string shim;     // libparklot_preload.so, absolute
  std::string out_dir;  // "" = terminal only
};

// One scenario of the suite (docs/results.md, "The suite"). The suite
// calls, for the scenarios --scenarios asks for, in the order of their numbers: Measure
// (every in-process measurement); then prints the Tables of every
// scenario; then RunAfterTables (other binaries, real programs, which print as they
// go); then Targets and Plots of every scenario. Scenarios are used by the
// main thread only.
class Scenario {
 public:
  virtual ~Scenario() = default;
  // Its number in --scenarios and in the report (1-8).
  virtual int number() const = 0;
  // What `plan`'s mode leaves out, for the report's header.
  virtual std::vector<std::string> Notes(const Plan& plan) const {
    (void)plan;
    return {};
  }
  virtual void Measure(Context& c) { (void)c; }
  // The tables of what Measure measured.
  virtual std::vector<Table> Tables(const Plan& plan) const {
    (void)plan;
    return {};
  }
  virtual void RunAfterTables(Context& c) { (void)c; }
  // Appends its issue-6 targets, judged on the medians in `r`.
  virtual void Targets(const Results& r, std::vector<Verdict>* v) const {
    (void)r;
    (void)v;
  }
  // Writes its gnuplot data under `data` and appends the scripts (each
  // writing a PNG into `dir`) to `scripts`.
  virtual void Plots(const Plan& plan, const Results& r,
                     const std::string& dir, const std::string& data,
                     std::vector<std::string>* scripts) const {
    (void)plan;
    (void)r;
    (void)dir;
    (void)data;
    (void)scripts;
  }
};

// Adds `s` (never freed) to the suite; returns true. Called by
// PARKLOT_SUITE_SCENARIO during static initialization.
bool RegisterScenario(Scenario* s);
// Every registered scenario, by number.
std::vector<Scenario*> Scenarios();

#define PARKLOT_SUITE_SCENARIO(Class) \
  const bool kRegistered##Class = ::parklot::internal::bench::RegisterScenario(new Class)

}  // namespace bench
}  // namespace parklot::internal

#endif  // PARKLOT_BENCH_SUITE_HARNESS_H_
