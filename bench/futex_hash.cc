// futex_hash: `perf bench futex hash`, side by side.
//
// T threads each own F futex words (F = 1024, as perf's default) and wait on
// them in turn with a value that never matches, so every wait fails
// validation and returns at once: the figure is the cost of hashing a key,
// locking its bucket and checking the word, and of the contention between
// threads on the table. Two implementations of that wait:
//
//   kernel/...   FUTEX_WAIT_PRIVATE with a mismatched value (-EAGAIN), with
//                the kernel's private futex hash at its default size, on the
//                global hash (slots = 0), and at prctl(PR_FUTEX_HASH,
//                PR_FUTEX_HASH_SET_SLOTS, N) for several N;
//   parklot/...  parklot::internal::Park whose validate callback returns false
//                (kInvalid), under each table growth policy.
//
// Both the kernel's hash size and parklot's policy are per process and
// fixed once used, so every measurement runs in a fresh child: this binary
// re-executes itself (/proc/self/exe) with --child naming the configuration,
// and the child prints one result line. Configurations are interleaved
// within each repetition (A B C ... A B C); the table reports the median and
// the min-max over repetitions, and the ratio of each median to the kernel's
// default. --json_out writes every run in Google Benchmark's JSON format.
//
//   bazel run //bench:futex_hash -- --quick
//   bazel run //bench:futex_hash -- --threads=2,64 --repetitions=9
//       --duration=500ms --json_out=/tmp/futex_hash.json   (one line)
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/futex.h"
#include "bench/futex_prctl.h"
#include "bench/subprocess.h"
#include "benchmark/benchmark.h"
#include "hash/bucket_table.h"
#include "runtime/config.h"
#include "runtime/parking_lot.h"
#include "runtime/stats.h"


ABSL_FLAG(std::vector<std::string>, threads, {},
          "Comma-separated thread counts. Default: 2,32,256,1024 and the "
          "number of CPUs this process may run on.");
ABSL_FLAG(int, keys, 1024,
          "Futex words per thread (perf bench futex hash -f).");
ABSL_FLAG(std::string, workload, "uniform",
          "uniform: each thread waits round-robin on its own --keys words. "
          "hot: every thread on the same --hot_keys words (many threads, few "
          "keys). phase: hot for the first half of the window, then uniform "
          "(a phase change). Few threads on many keys: uniform with a small "
          "--threads and a large --keys.");
ABSL_FLAG(int, hot_keys, 4, "Words shared by all threads in hot phases.");
ABSL_FLAG(int, repetitions, 0,
          "Repetitions of the whole interleaved sequence. 0 = 5, or 3 with "
          "--quick.");
ABSL_FLAG(absl::Duration, duration, absl::ZeroDuration(),
          "Measured wall time of one run, all threads running. 0 = 300ms, or "
          "100ms with --quick.");
ABSL_FLAG(bool, pin, false,
          "Pin each worker thread to one CPU, round-robin over the CPUs this "
          "process may run on (sched_setaffinity).");
ABSL_FLAG(bool, quick, false,
          "Quick mode: 3 repetitions of 100ms unless --repetitions or "
          "--duration say otherwise.");
ABSL_FLAG(std::vector<std::string>, configs, {},
          "Comma-separated subset of the configurations (see --list_configs; "
          "any other parklot/POLICY that PARKLOT_POLICY accepts also works). "
          "Default: all.");
ABSL_FLAG(bool, list_configs, false, "Print the configurations and exit.");
ABSL_FLAG(std::string, json_out, "",
          "Also write every run, and the median/min/max aggregates, to this "
          "file in Google Benchmark's JSON format ('-' = standard output).");
ABSL_FLAG(absl::Duration, child_timeout, absl::Seconds(120),
          "Kill a measurement child that runs longer than --duration plus "
          "this.");
ABSL_FLAG(std::string, child, "",
          "Internal: measure this one configuration in this process (with "
          "--threads=<one count>) and print a result line.");

namespace parklot::internal {
namespace bench {
namespace {

// ---------------------------------------------------------------------------
// Configurations.

enum class Impl { kKernel, kParklot };

struct Configuration {
  std::string name;
  Impl impl;
  // kernel: slots for PR_FUTEX_HASH_SET_SLOTS; kKernelDefault = no prctl.
  long slots = 0;
  // parklot: the growth policy, as PARKLOT_POLICY spells it.
  std::string policy;
};

constexpr long kKernelDefault = -1;
constexpr char kBaseline[] = "kernel/default";

const std::vector<Configuration>& AllConfigurations() {
  static const auto* configs = [] {
    auto* v = new std::vector<Configuration>;
    v->push_back({kBaseline, Impl::kKernel, kKernelDefault, ""});
    // Slots 0 = the shared global hash: the kernel before 6.16.
    v->push_back({"kernel/global", Impl::kKernel, 0, ""});
    for (long n : {16, 128, 1024, 8192, 65536}) {
      v->push_back({absl::StrCat("kernel/", n), Impl::kKernel, n, ""});
    }
    for (const char* p : {"threads", "cpus", "fixed:2", "fixed:16",
                          "fixed:1024", "adaptive"}) {
      v->push_back({absl::StrCat("parklot/", p), Impl::kParklot, 0, p});
    }
    return v;
  }();
  return *configs;
}

// A listed configuration, or any other `parklot/POLICY` that PARKLOT_POLICY
// accepts (e.g. parklot/fixed:4096), made on first use.
const Configuration* FindConfiguration(absl::string_view name) {
  for (const Configuration& c : AllConfigurations()) {
    if (c.name == name) return &c;
  }
  absl::string_view policy = name;
  GrowthPolicy parsed;
  size_t buckets = 0;
  if (!absl::ConsumePrefix(&policy, "parklot/") ||
      !ParseGrowthPolicy(std::string_view(policy.data(), policy.size()),
                         &parsed, &buckets)) {
    return nullptr;
  }
  static auto* extra = new std::vector<std::unique_ptr<Configuration>>;
  for (const auto& c : *extra) {
    if (c->name == name) return c.get();
  }
  extra->push_back(std::make_unique<Configuration>(Configuration{
      std::string(name), Impl::kParklot, 0, std::string(policy)}));
  return extra->back().get();
}

std::string ErrnoName(int err) {
  const char* name = strerrorname_np(err);
  return name != nullptr ? name : absl::StrCat("errno", err);
}

size_t AllowedCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    return static_cast<size_t>(CPU_COUNT(&set));
  }
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<size_t>(n) : 1;
}

int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

int64_t TimevalNs(const timeval& tv) {
  return int64_t{tv.tv_sec} * 1000000000 + int64_t{tv.tv_usec} * 1000;
}

// ---------------------------------------------------------------------------
// The child: one measurement of one configuration.

// The value no word ever holds: every wait fails validation.
constexpr uint32_t kMismatch = 1234;

enum class Workload { kUniform, kHot, kPhase };

bool ParseWorkload(absl::string_view text, Workload* w) {
  if (text == "uniform") {
    *w = Workload::kUniform;
  } else if (text == "hot") {
    *w = Workload::kHot;
  } else if (text == "phase") {
    *w = Workload::kPhase;
  } else {
    return false;
  }
  return true;
}

// Shared state, each hot field on its own cache line. During the measured
// window the workers only read `stop`.
struct Shared {
  alignas(64) std::atomic<uint32_t> ready{0};
  alignas(64) std::atomic<uint32_t> go{0};
  alignas(64) std::atomic<bool> stop{false};
  // --workload=phase: set halfway through the window.
  alignas(64) std::atomic<bool> phase2{false};
  Impl impl = Impl::kKernel;
  int keys = 0;
  Workload workload = Workload::kUniform;
  // The words every thread shares in hot phases.
  std::atomic<uint32_t>* hot_words = nullptr;
  int hot_keys = 0;
  std::vector<int> pin_cpus;  // empty: unpinned
};

struct alignas(64) Worker {
  Shared* shared = nullptr;
  int index = 0;
  pthread_t thread{};
  uint64_t ops = 0;
  uint64_t errors = 0;  // waits that did not fail validation as expected
};

// FUTEX_WAIT_PRIVATE on a word that does not hold the expected value: the
// kernel hashes the key, locks the bucket, reads the word and returns
// -EAGAIN. Through the raw syscall instruction (base/futex.h), so the
// kernel is measured even under the preload shim.
struct KernelWait {
  bool operator()(std::atomic<uint32_t>* word) const {
    return RawFutex(word, FUTEX_WAIT_PRIVATE, kMismatch, nullptr, nullptr, 0) ==
           -EAGAIN;
  }
};

// parklot::internal::Park whose validate callback (run under the bucket lock) finds
// the word changed: returns kInvalid without sleeping.
struct ParklotWait {
  bool operator()(std::atomic<uint32_t>* word) const {
    return Park(KeyOf(word),
                [word] {
                  return word->load(std::memory_order_relaxed) == kMismatch;
                })
        .invalid();
  }
};

// Each thread: its own words (perf allocates one array per thread), one
// warm-up wait on each (faults the words in and registers the thread with
// the parking lot, which may grow its table), then the start gate, then
// waits round-robin over its words until `stop`.
template <typename Wait>
void WorkerLoop(Worker* w, Wait wait) {
  Shared& s = *w->shared;
  const int keys = s.keys;
  std::unique_ptr<std::atomic<uint32_t>[]> words(
      new std::atomic<uint32_t>[keys]());
  uint64_t errors = 0;
  for (int i = 0; i < keys; ++i) errors += !wait(&words[i]);
  for (int i = 0; i < s.hot_keys; ++i) errors += !wait(&s.hot_words[i]);

  s.ready.fetch_add(1, std::memory_order_acq_rel);
  FutexWakePrivate(&s.ready, 1);
  while (s.go.load(std::memory_order_acquire) == 0) {
    FutexWaitPrivate(&s.go, 0);
  }

  uint64_t ops = 0;
  for (;;) {
    // One round over this phase's words (hot: from a per-thread offset, so
    // that the threads spread over them).
    const bool hot = s.workload == Workload::kHot ||
                     (s.workload == Workload::kPhase &&
                      !s.phase2.load(std::memory_order_relaxed));
    std::atomic<uint32_t>* base = hot ? s.hot_words : words.get();
    const int n = hot ? s.hot_keys : keys;
    const int first = hot ? w->index % n : 0;
    for (int j = 0; j < n; ++j) {
      if (s.stop.load(std::memory_order_relaxed)) goto done;
      const int i = first + j < n ? first + j : first + j - n;
      errors += !wait(&base[i]);
      ++ops;
    }
  }
done:
  w->ops = ops;
  w->errors = errors;
}

void* WorkerMain(void* arg) {
  Worker* w = static_cast<Worker*>(arg);
  const std::vector<int>& cpus = w->shared->pin_cpus;
  if (!cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpus[static_cast<size_t>(w->index) % cpus.size()], &set);
    sched_setaffinity(0, sizeof set, &set);
  }
  if (w->shared->impl == Impl::kKernel) {
    WorkerLoop(w, KernelWait{});
  } else {
    WorkerLoop(w, ParklotWait{});
  }
  return nullptr;
}

// The result line the child prints and the parent parses.
constexpr char kResultTag[] = "futex_hash_result";

void PrintResult(const std::map<std::string, std::string>& fields) {
  std::string line = kResultTag;
  for (const auto& [k, v] : fields) absl::StrAppend(&line, " ", k, "=", v);
  absl::PrintF("%s\n", line);
  fflush(stdout);
}

int RunChild(const Configuration& config, int threads, int keys,
             Workload workload, int hot_keys, absl::Duration duration) {
  std::map<std::string, std::string> result;
  result["config"] = config.name;

  if (config.impl == Impl::kParklot) {
    Config c = ConfigFromEnvironment();
    GrowthPolicy policy;
    size_t fixed = c.table.buckets;
    if (!ParseGrowthPolicy(config.policy, &policy, &fixed)) {
      absl::FPrintF(stderr, "futex_hash: bad policy %s\n", config.policy);
      return 2;
    }
    c.table.policy = policy;
    if (policy == GrowthPolicy::kFixed) c.table.buckets = fixed;
    if (!SetConfig(c)) {
      absl::FPrintF(stderr, "futex_hash: parklot was configured already\n");
      return 2;
    }
  } else if (config.slots != kKernelDefault) {
    // Before any thread exists: a size set by the process sticks, and the
    // kernel's own sizing at thread creation leaves it alone.
    if (prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_SET_SLOTS, config.slots, 0, 0) !=
        0) {
      result["status"] = "refused";
      result["errno"] = ErrnoName(errno);
      PrintResult(result);
      return 0;
    }
  }

  Shared shared;
  shared.impl = config.impl;
  shared.keys = keys;
  shared.workload = workload;
  std::unique_ptr<std::atomic<uint32_t>[]> hot_words;
  if (workload != Workload::kUniform) {
    hot_words.reset(new std::atomic<uint32_t>[hot_keys]());
    shared.hot_words = hot_words.get();
    shared.hot_keys = hot_keys;
  }
  if (absl::GetFlag(FLAGS_pin)) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
      for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (CPU_ISSET(cpu, &set)) shared.pin_cpus.push_back(cpu);
      }
    }
  }
  std::vector<Worker> workers(static_cast<size_t>(threads));
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  int started = 0;
  int create_error = 0;
  for (Worker& w : workers) {
    w.shared = &shared;
    w.index = static_cast<int>(&w - workers.data());
    create_error = pthread_create(&w.thread, &attr, WorkerMain, &w);
    if (create_error != 0) break;
    ++started;
  }
  pthread_attr_destroy(&attr);

  // The start gate: wait until every thread is ready, then release them all
  // at once; the window runs from the release to `stop`.
  for (uint32_t r; (r = shared.ready.load(std::memory_order_acquire)) <
                   static_cast<uint32_t>(started);) {
    FutexWaitPrivate(&shared.ready, r);
  }
  // The main thread only opens and closes the window, but among T busy
  // threads a fair scheduler may leave it waiting for CPU for many slices,
  // stretching the window far past --duration (seconds at T = 1024). So it
  // takes a real-time priority for the window if it may (SCHED_FIFO 1;
  // root, CAP_SYS_NICE or RLIMIT_RTPRIO), and the workers, created before,
  // stay SCHED_OTHER. Without it the figures stay valid (ops over the
  // measured elapsed time) but the window may overrun; the parent says so.
  sched_param fifo = {};
  fifo.sched_priority = 1;
  const bool rt = pthread_setschedparam(pthread_self(), SCHED_FIFO, &fifo) == 0;
  rusage ru0, ru1;
  getrusage(RUSAGE_SELF, &ru0);
  const int64_t t0 = MonotonicNs();
  shared.go.store(1, std::memory_order_release);
  FutexWakePrivate(&shared.go, INT_MAX);
  auto sleep_until = [](int64_t end) {
    timespec ts = {static_cast<time_t>(end / 1000000000),
                   static_cast<long>(end % 1000000000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) ==
           EINTR) {
    }
  };
  if (create_error == 0) {
    const int64_t span = absl::ToInt64Nanoseconds(duration);
    if (workload == Workload::kPhase) {
      sleep_until(t0 + span / 2);
      shared.phase2.store(true, std::memory_order_relaxed);
    }
    sleep_until(t0 + span);
  }
  shared.stop.store(true, std::memory_order_relaxed);
  const int64_t t1 = MonotonicNs();
  getrusage(RUSAGE_SELF, &ru1);
  if (rt) {
    sched_param other = {};
    pthread_setschedparam(pthread_self(), SCHED_OTHER, &other);
  }
  for (int i = 0; i < started; ++i) pthread_join(workers[i].thread, nullptr);

  if (create_error != 0) {
    absl::FPrintF(stderr, "futex_hash: pthread_create (thread %d of %d): %s\n",
                  started + 1, threads, strerror(create_error));
    return 3;
  }
  uint64_t ops = 0, errors = 0;
  for (const Worker& w : workers) {
    ops += w.ops;
    errors += w.errors;
  }
  result["status"] = "ok";
  result["ops"] = absl::StrCat(ops);
  result["errors"] = absl::StrCat(errors);
  result["elapsed_ns"] = absl::StrCat(t1 - t0);
  result["window"] = rt ? "fifo" : "other";
  result["cpu_ns"] =
      absl::StrCat(TimevalNs(ru1.ru_utime) - TimevalNs(ru0.ru_utime) +
                   TimevalNs(ru1.ru_stime) - TimevalNs(ru0.ru_stime));
  result["vcsw"] = absl::StrCat(ru1.ru_nvcsw - ru0.ru_nvcsw);
  result["ivcsw"] = absl::StrCat(ru1.ru_nivcsw - ru0.ru_nivcsw);
  if (config.impl == Impl::kKernel) {
    // The size in force with all threads alive (0 = the global hash).
    const int slots = prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_GET_SLOTS, 0, 0, 0);
    result["table"] = slots >= 0 ? absl::StrCat(slots) : "-1";
    if (slots < 0) result["errno"] = ErrnoName(errno);
  } else {
    const Stats st = GetStats();
    result["table"] = absl::StrCat(st.buckets);
    result["growths"] = absl::StrCat(st.growths);
    result["collision_growths"] = absl::StrCat(st.collision_growths);
    result["sampled_locks"] = absl::StrCat(st.sampled_locks);
    result["sampled_collisions"] = absl::StrCat(st.sampled_collisions);
  }
  PrintResult(result);
  if (errors != 0) {
    absl::FPrintF(stderr,
                  "futex_hash: %s: %d waits did not fail validation as "
                  "expected\n",
                  config.name, errors);
    return 4;
  }
  return 0;
}

// ---------------------------------------------------------------------------
// The parent: runs the children, aggregates, prints.

struct Sample {
  double ops_per_s = 0;
  uint64_t ops = 0;
  int64_t elapsed_ns = 0;
  int64_t cpu_ns = 0;
  int64_t vcsw = 0;
  int64_t ivcsw = 0;
  int64_t table = 0;
  int64_t growths = -1;  // parklot only
  int repetition = 0;
  bool rt_window = false;  // the window was timed by a SCHED_FIFO thread
};

struct Cell {
  std::vector<Sample> samples;
  std::vector<std::string> failures;  // one per failed run
  std::string refused;                // set when the kernel refused the size
};

// Parses "futex_hash_result k=v k=v ..." from a child's output.
bool ParseResult(const std::string& text,
                 std::map<std::string, std::string>* fields) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<absl::string_view> words =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (words.empty() || words[0] != kResultTag) continue;
    fields->clear();
    for (size_t i = 1; i < words.size(); ++i) {
      std::pair<std::string, std::string> kv =
          absl::StrSplit(words[i], absl::MaxSplits('=', 1));
      (*fields)[kv.first] = kv.second;
    }
    return true;
  }
  return false;
}

bool GetInt(const std::map<std::string, std::string>& f, const char* key,
            int64_t* out) {
  auto it = f.find(key);
  return it != f.end() && absl::SimpleAtoi(it->second, out);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string Si(double v) {
  if (v >= 1e9) return absl::StrFormat("%.2fG", v / 1e9);
  if (v >= 1e6) return absl::StrFormat("%.2fM", v / 1e6);
  if (v >= 1e3) return absl::StrFormat("%.2fk", v / 1e3);
  return absl::StrFormat("%.0f", v);
}

std::string TableText(const Configuration& c, const Cell& cell) {
  const Sample& s = cell.samples.back();
  bool varies = false;
  for (const Sample& o : cell.samples) varies |= o.table != s.table;
  std::string t;
  if (c.impl == Impl::kKernel) {
    t = s.table == 0  ? std::string("global hash")
        : s.table < 0 ? std::string("slots: n/a")
                      : absl::StrCat(s.table, " slots");
  } else {
    t = absl::StrCat(s.table, " buckets");
    if (c.policy == "threads" || c.policy == "cpus" || c.policy == "adaptive") {
      absl::StrAppend(&t, ", ", s.growths, " growths");
    }
  }
  if (varies) absl::StrAppend(&t, " (varies)");
  return t;
}

struct Plan {
  std::vector<const Configuration*> configs;
  std::vector<int> threads;
  int keys = 0;
  int repetitions = 0;
  absl::Duration duration;
};

// cells[threads index][config index]
using Results = std::vector<std::vector<Cell>>;

double MedianOpsPerS(const Cell& cell) {
  std::vector<double> v;
  for (const Sample& s : cell.samples) v.push_back(s.ops_per_s);
  return Median(v);
}

void PrintTables(const Plan& plan, const Results& results) {
  for (size_t ti = 0; ti < plan.threads.size(); ++ti) {
    absl::PrintF(
        "\nfutex hash: %d threads x %d keys; ops/s over %d repetitions of "
        "%s: median [min - max]\n",
        plan.threads[ti], plan.keys, plan.repetitions,
        absl::FormatDuration(plan.duration));
    absl::PrintF("%-18s %-27s %9s  %-21s %s\n", "configuration", "table",
                 "ops/s", "[min - max]", "vs kernel/default");
    double base = 0;
    for (size_t ci = 0; ci < plan.configs.size(); ++ci) {
      const Cell& cell = results[ti][ci];
      if (plan.configs[ci]->name == kBaseline && !cell.samples.empty()) {
        base = MedianOpsPerS(cell);
      }
    }
    double best_fixed = 0;
    std::string best_fixed_name;
    double growth = 0;
    for (size_t ci = 0; ci < plan.configs.size(); ++ci) {
      const Configuration& c = *plan.configs[ci];
      const Cell& cell = results[ti][ci];
      if (!cell.refused.empty()) {
        absl::PrintF(
            "%-18s refused: prctl(PR_FUTEX_HASH, SET_SLOTS, %d) -> "
            "%s\n",
            c.name, c.slots, cell.refused);
        continue;
      }
      if (cell.samples.empty()) {
        absl::PrintF(
            "%-18s FAILED: %s\n", c.name,
            cell.failures.empty() ? "no result" : cell.failures.front());
        continue;
      }
      double lo = cell.samples[0].ops_per_s, hi = lo;
      for (const Sample& s : cell.samples) {
        lo = std::min(lo, s.ops_per_s);
        hi = std::max(hi, s.ops_per_s);
      }
      const double med = MedianOpsPerS(cell);
      const std::string ratio =
          base > 0 ? absl::StrFormat("%.2fx", med / base) : "n/a";
      std::string note;
      if (!cell.failures.empty()) {
        note = absl::StrFormat("  (%d runs failed: %s)", cell.failures.size(),
                               cell.failures.front());
      }
      absl::PrintF("%-18s %-27s %9s  %-21s %s%s\n", c.name, TableText(c, cell),
                   Si(med), absl::StrCat("[", Si(lo), " - ", Si(hi), "]"),
                   ratio, note);
      if (c.impl == Impl::kParklot) {
        if (c.policy == GrowthPolicyName(TableOptions().policy)) growth = med;
        if (absl::StartsWith(c.policy, "fixed:") && med > best_fixed) {
          best_fixed = med;
          best_fixed_name = c.name;
        }
      }
    }
    int runs = 0, overran = 0, not_rt = 0;
    for (const Cell& cell : results[ti]) {
      for (const Sample& s : cell.samples) {
        ++runs;
        overran += absl::Nanoseconds(s.elapsed_ns) > plan.duration * 1.25;
        not_rt += !s.rt_window;
      }
    }
    if (overran != 0) {
      absl::PrintF("note: %d of %d runs overran the %s window by over 25%%%s\n",
                   overran, runs, absl::FormatDuration(plan.duration),
                   not_rt != 0 ? " (no SCHED_FIFO for the timing thread: "
                                 "run as root or raise RLIMIT_RTPRIO)"
                               : "");
    }
    if (growth > 0 && best_fixed > 0) {
      absl::PrintF(
          "growing vs fixed table: parklot/%s (the default policy) = %.2fx "
          "%s (the fastest fixed table)\n",
          GrowthPolicyName(TableOptions().policy), growth / best_fixed,
          best_fixed_name);
    }
  }
}

// Every run and the median/min/max aggregates, through Google Benchmark's
// own JSON reporter.
bool WriteJson(const std::string& path, const Plan& plan,
               const Results& results, const char* argv0) {
  std::ofstream file;
  std::ostream* out = &std::cout;
  if (path != "-") {
    file.open(path);
    if (!file) {
      absl::FPrintF(stderr, "futex_hash: cannot write %s\n", path);
      return false;
    }
    out = &file;
  }
  utsname u;
  if (uname(&u) == 0) {
    benchmark::AddCustomContext("kernel",
                                absl::StrCat(u.sysname, " ", u.release));
  }
  benchmark::AddCustomContext("keys_per_thread", absl::StrCat(plan.keys));
  benchmark::AddCustomContext("duration", absl::FormatDuration(plan.duration));
  benchmark::AddCustomContext("repetitions", absl::StrCat(plan.repetitions));
  benchmark::AddCustomContext("pinned",
                              absl::GetFlag(FLAGS_pin) ? "true" : "false");
  benchmark::AddCustomContext(
      "note",
      "iterations = waits (all threads); real_time = wall ns per wait; "
      "cpu_time = process CPU ns per wait; one child process per run");

  benchmark::BenchmarkReporter::Context::executable_name = argv0;
  benchmark::JSONReporter reporter;
  reporter.SetOutputStream(out);
  reporter.SetErrorStream(&std::cerr);
  benchmark::BenchmarkReporter::Context context;
  reporter.ReportContext(context);

  for (size_t ti = 0; ti < plan.threads.size(); ++ti) {
    for (size_t ci = 0; ci < plan.configs.size(); ++ci) {
      const Cell& cell = results[ti][ci];
      auto make_run = [&] {
        benchmark::BenchmarkReporter::Run run;
        run.run_name.function_name = "futex_hash";
        run.run_name.args = plan.configs[ci]->name;
        run.run_name.threads = absl::StrCat("threads:", plan.threads[ti]);
        run.family_index = static_cast<int64_t>(ci);
        run.per_family_instance_index = static_cast<int64_t>(ti);
        run.threads = plan.threads[ti];
        run.repetitions = plan.repetitions;
        run.repetition_index = 0;
        run.time_unit = benchmark::kNanosecond;
        run.statistics = nullptr;
        return run;
      };
      std::vector<benchmark::BenchmarkReporter::Run> runs;
      if (!cell.refused.empty() || cell.samples.empty()) {
        auto run = make_run();
        run.error_occurred = true;
        run.error_message =
            !cell.refused.empty()
                ? absl::StrCat("prctl(PR_FUTEX_HASH) refused: ", cell.refused)
                : (cell.failures.empty() ? std::string("no result")
                                         : cell.failures.front());
        runs.push_back(run);
        reporter.ReportRuns(runs);
        continue;
      }
      std::vector<double> ns_per_op, cpu_per_op, ops_per_s, table;
      for (const Sample& s : cell.samples) {
        auto run = make_run();
        run.repetition_index = s.repetition;
        run.iterations = static_cast<benchmark::IterationCount>(s.ops);
        run.real_accumulated_time = static_cast<double>(s.elapsed_ns) / 1e9;
        run.cpu_accumulated_time = static_cast<double>(s.cpu_ns) / 1e9;
        run.counters["ops_per_s"] = s.ops_per_s;
        run.counters["table_size"] = static_cast<double>(s.table);
        if (s.growths >= 0) {
          run.counters["growths"] = static_cast<double>(s.growths);
        }
        run.counters["voluntary_csw"] = static_cast<double>(s.vcsw);
        run.counters["involuntary_csw"] = static_cast<double>(s.ivcsw);
        runs.push_back(run);
        const double ops = std::max<double>(1, static_cast<double>(s.ops));
        ns_per_op.push_back(static_cast<double>(s.elapsed_ns) / ops);
        cpu_per_op.push_back(static_cast<double>(s.cpu_ns) / ops);
        ops_per_s.push_back(s.ops_per_s);
        table.push_back(static_cast<double>(s.table));
      }
      // Aggregates as Google Benchmark writes them: one "iteration", the
      // statistic of the per-wait times, and the statistic of the counters.
      auto stat_run = [&](const char* name, double (*f)(std::vector<double>)) {
        auto run = make_run();
        run.run_type = benchmark::BenchmarkReporter::Run::RT_Aggregate;
        run.aggregate_name = name;
        run.aggregate_unit = benchmark::kTime;
        run.repetitions = static_cast<int64_t>(cell.samples.size());
        run.iterations = 1;
        run.real_accumulated_time = f(ns_per_op) / 1e9;
        run.cpu_accumulated_time = f(cpu_per_op) / 1e9;
        run.counters["ops_per_s"] = f(ops_per_s);
        run.counters["table_size"] = f(table);
        return run;
      };
      runs.push_back(stat_run("median", Median));
      runs.push_back(stat_run("min", [](std::vector<double> v) {
        return *std::min_element(v.begin(), v.end());
      }));
      runs.push_back(stat_run("max", [](std::vector<double> v) {
        return *std::max_element(v.begin(), v.end());
      }));
      reporter.ReportRuns(runs);
    }
  }
  reporter.Finalize();
  out->flush();
  return static_cast<bool>(*out);
}

bool ParseThreads(const std::vector<std::string>& text, std::vector<int>* out) {
  for (const std::string& t : text) {
    int n;
    if (!absl::SimpleAtoi(t, &n) || n < 1 || n > 100000) {
      absl::FPrintF(stderr, "futex_hash: bad thread count '%s'\n", t);
      return false;
    }
    out->push_back(n);
  }
  return true;
}

bool MakePlan(Plan* plan) {
  const bool quick = absl::GetFlag(FLAGS_quick);
  plan->repetitions = absl::GetFlag(FLAGS_repetitions);
  if (plan->repetitions == 0) plan->repetitions = quick ? 3 : 5;
  plan->duration = absl::GetFlag(FLAGS_duration);
  if (plan->duration == absl::ZeroDuration()) {
    plan->duration = quick ? absl::Milliseconds(100) : absl::Milliseconds(300);
  }
  plan->keys = absl::GetFlag(FLAGS_keys);
  if (plan->repetitions < 1 || plan->keys < 1 ||
      plan->duration <= absl::ZeroDuration()) {
    absl::FPrintF(stderr,
                  "futex_hash: --repetitions, --keys and --duration must be "
                  "positive\n");
    return false;
  }
  if (!ParseThreads(absl::GetFlag(FLAGS_threads), &plan->threads)) {
    return false;
  }
  if (plan->threads.empty()) {
    plan->threads = {2, 32, 256, 1024, static_cast<int>(AllowedCpus())};
  }
  std::sort(plan->threads.begin(), plan->threads.end());
  plan->threads.erase(std::unique(plan->threads.begin(), plan->threads.end()),
                      plan->threads.end());
  const std::vector<std::string> names = absl::GetFlag(FLAGS_configs);
  if (names.empty()) {
    for (const Configuration& c : AllConfigurations()) {
      plan->configs.push_back(&c);
    }
  } else {
    for (const std::string& n : names) {
      const Configuration* c = FindConfiguration(n);
      if (c == nullptr) {
        absl::FPrintF(stderr,
                      "futex_hash: unknown configuration '%s' (see "
                      "--list_configs)\n",
                      n);
        return false;
      }
      plan->configs.push_back(c);
    }
  }
  return true;
}

int RunParent(const char* argv0) {
  Plan plan;
  if (!MakePlan(&plan)) return 2;
  utsname u;
  uname(&u);
  absl::PrintF(
      "futex_hash: perf-bench-futex-hash style storm of waits that fail "
      "validation\n%s %s, %d CPUs usable; %d configurations x %d thread "
      "counts x %d repetitions of %s, each run in a fresh process%s\n",
      u.sysname, u.release, AllowedCpus(), plan.configs.size(),
      plan.threads.size(), plan.repetitions,
      absl::FormatDuration(plan.duration),
      absl::GetFlag(FLAGS_pin) ? "; threads pinned round-robin" : "");
  fflush(stdout);

  const absl::Duration timeout =
      plan.duration + absl::GetFlag(FLAGS_child_timeout);
  Results results(plan.threads.size(), std::vector<Cell>(plan.configs.size()));
  int failures = 0;
  for (int rep = 0; rep < plan.repetitions; ++rep) {
    for (size_t ti = 0; ti < plan.threads.size(); ++ti) {
      const absl::Time start = absl::Now();
      for (size_t ci = 0; ci < plan.configs.size(); ++ci) {
        const Configuration& c = *plan.configs[ci];
        Cell& cell = results[ti][ci];
        if (!cell.refused.empty()) continue;  // the kernel will refuse again
        const ChildOutcome out = RunSelf(
            argv0,
            {absl::StrCat("--child=", c.name),
             absl::StrCat("--threads=", plan.threads[ti]),
             absl::StrCat("--keys=", plan.keys),
             absl::StrCat("--workload=", absl::GetFlag(FLAGS_workload)),
             absl::StrCat("--hot_keys=", absl::GetFlag(FLAGS_hot_keys)),
             absl::StrCat("--duration=", absl::FormatDuration(plan.duration)),
             absl::StrCat("--pin=",
                          absl::GetFlag(FLAGS_pin) ? "true" : "false")},
            timeout);
        std::map<std::string, std::string> f;
        const bool parsed = ParseResult(out.stdout_text, &f);
        std::string error = out.error;
        if (out.ok && !parsed) error = "no result line";
        if (parsed && f["status"] == "refused") {
          cell.refused = f["errno"];
          continue;
        }
        Sample s;
        s.repetition = rep;
        int64_t ops = 0;
        if (error.empty() &&
            !(GetInt(f, "ops", &ops) &&
              GetInt(f, "elapsed_ns", &s.elapsed_ns) &&
              GetInt(f, "cpu_ns", &s.cpu_ns) && GetInt(f, "vcsw", &s.vcsw) &&
              GetInt(f, "ivcsw", &s.ivcsw) && GetInt(f, "table", &s.table) &&
              s.elapsed_ns > 0)) {
          error = "malformed result line";
        }
        if (!error.empty()) {
          absl::FPrintF(stderr, "futex_hash: %s, %d threads: %s\n", c.name,
                        plan.threads[ti], error);
          cell.failures.push_back(error);
          ++failures;
          continue;
        }
        GetInt(f, "growths", &s.growths);
        s.rt_window = f["window"] == "fifo";
        s.ops = static_cast<uint64_t>(ops);
        s.ops_per_s =
            static_cast<double>(ops) * 1e9 / static_cast<double>(s.elapsed_ns);
        cell.samples.push_back(s);
      }
      absl::FPrintF(stderr, "  repetition %d/%d, %4d threads: %d runs in %s\n",
                    rep + 1, plan.repetitions, plan.threads[ti],
                    plan.configs.size(),
                    absl::FormatDuration(absl::Trunc(absl::Now() - start,
                                                     absl::Milliseconds(10))));
    }
  }
  PrintTables(plan, results);
  fflush(stdout);
  const std::string json = absl::GetFlag(FLAGS_json_out);
  if (!json.empty() && !WriteJson(json, plan, results, argv0)) return 1;
  if (failures != 0) {
    absl::FPrintF(stderr, "futex_hash: %d runs failed\n", failures);
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace parklot::internal

int main(int argc, char** argv) {
  using namespace parklot::internal::bench;
  absl::SetProgramUsageMessage(
      "perf bench futex hash, side by side: kernel FUTEX_WAIT_PRIVATE at "
      "several private-hash sizes vs parklot::internal::Park under each table policy.\n"
      "  futex_hash [--quick] [--threads=2,32] [--repetitions=N] "
      "[--duration=300ms] [--json_out=FILE]");
  const std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    absl::FPrintF(stderr, "futex_hash: unexpected argument '%s'\n", rest[1]);
    return 2;
  }
  if (absl::GetFlag(FLAGS_list_configs)) {
    for (const Configuration& c : AllConfigurations()) {
      absl::PrintF("%s\n", c.name);
    }
    return 0;
  }
  const std::string child = absl::GetFlag(FLAGS_child);
  Workload parsed_workload;
  if (child.empty() &&
      !ParseWorkload(absl::GetFlag(FLAGS_workload), &parsed_workload)) {
    absl::FPrintF(stderr, "futex_hash: unknown --workload=%s\n",
                  absl::GetFlag(FLAGS_workload));
    return 2;
  }
  if (child.empty()) return RunParent(argv[0]);

  const Configuration* c = FindConfiguration(child);
  std::vector<int> threads;
  Workload workload;
  if (c == nullptr || !ParseThreads(absl::GetFlag(FLAGS_threads), &threads) ||
      threads.size() != 1 || absl::GetFlag(FLAGS_keys) < 1 ||
      !ParseWorkload(absl::GetFlag(FLAGS_workload), &workload) ||
      absl::GetFlag(FLAGS_hot_keys) < 1 ||
      absl::GetFlag(FLAGS_duration) <= absl::ZeroDuration()) {
    absl::FPrintF(stderr,
                  "futex_hash: --child needs a known configuration, one "
                  "--threads count, positive --keys, --hot_keys and "
                  "--duration, and a known --workload\n");
    return 2;
  }
  return RunChild(*c, threads[0], absl::GetFlag(FLAGS_keys), workload,
                  absl::GetFlag(FLAGS_hot_keys), absl::GetFlag(FLAGS_duration));
}
