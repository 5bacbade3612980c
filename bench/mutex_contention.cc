// Mutex benchmark, side by side in one binary: parklot::Mutex vs
// glibc pthread_mutex (normal and PTHREAD_MUTEX_ADAPTIVE_NP), std::mutex,
// absl::Mutex and a raw futex mutex. Google Benchmark's fixed iteration
// counts per thread; //bench:suite has the fixed-duration runs with
// per-thread fairness, repetitions and every scenario of the suite.
//
//   uncontended   lock + unlock on one thread (ns/op)
//   pingpong      two threads hand a turn back and forth under the lock
//   contended     T threads, `cs` units of work inside, `out` outside
//
// Every row reports total ops/s, process CPU ns per op (spin waste shows
// here) and voluntary context switches per op; the table at the end gives
// each implementation's ratio to glibc. Run the binary under the preload
// shim and the glibc rows become parklot too: run it plain.
//
//   bazel run -c opt //bench:mutex_contention -- --benchmark_repetitions=7 \
//       --benchmark_enable_random_interleaving=true
#include <pthread.h>
#include <sys/resource.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/locks.h"
#include "benchmark/benchmark.h"

namespace {

// The adapters are bench/locks.h's, shared with //bench:suite.
using parklot::bench::AbslLock;
using parklot::bench::FutexLock;
using parklot::bench::GlibcAdaptiveLock;
using parklot::bench::GlibcLock;
using parklot::bench::ParklotLock;
using parklot::bench::StdLock;

// `units` of dependent arithmetic the compiler cannot remove (~1 ns each).
inline void Work(int units, uint64_t* acc) {
  uint64_t x = *acc;
  for (int i = 0; i < units; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    benchmark::DoNotOptimize(x);
  }
  *acc = x;
}

struct ProcessUsage {
  int64_t cpu_ns;
  int64_t voluntary_switches;
  static ProcessUsage Now() {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return {(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ll +
                (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ll,
            ru.ru_nvcsw};
  }
};

// Thread 0 measures the whole process around the timed loop (the library
// starts and stops all threads together); the other threads report 0, so
// the summed counters are per-run figures.
void ReportPerOp(benchmark::State& state, const ProcessUsage& before) {
  state.counters["ops/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  if (state.thread_index() != 0) {
    state.counters["cpu_ns/op"] = 0;
    state.counters["vcsw/op"] = 0;
    return;
  }
  const ProcessUsage after = ProcessUsage::Now();
  const double ops =
      static_cast<double>(state.iterations()) * state.threads();
  state.counters["cpu_ns/op"] = (after.cpu_ns - before.cpu_ns) / ops;
  state.counters["vcsw/op"] =
      (after.voluntary_switches - before.voluntary_switches) / ops;
}

template <typename Lock>
void Uncontended(benchmark::State& state) {
  Lock lock;
  const ProcessUsage before = ProcessUsage::Now();
  for (auto _ : state) {
    lock.lock();
    lock.unlock();
  }
  ReportPerOp(state, before);
}

// Shared by the threads of one run; reset by thread 0 before the loop.
template <typename Lock>
struct Shared {
  static Lock lock;
  static int turn;
  static uint64_t counter;
};
template <typename Lock>
Lock Shared<Lock>::lock;
template <typename Lock>
int Shared<Lock>::turn;
template <typename Lock>
uint64_t Shared<Lock>::counter;

template <typename Lock>
void PingPong(benchmark::State& state) {
  using S = Shared<Lock>;
  const int me = state.thread_index();
  if (me == 0) S::turn = 0;
  const ProcessUsage before = ProcessUsage::Now();
  // Both threads run the same number of iterations and strictly alternate,
  // so both finish.
  for (auto _ : state) {
    for (;;) {
      S::lock.lock();
      if (S::turn == me) {
        S::turn = 1 - me;
        S::lock.unlock();
        break;
      }
      S::lock.unlock();
    }
  }
  ReportPerOp(state, before);
}

template <typename Lock>
void Contended(benchmark::State& state) {
  using S = Shared<Lock>;
  const int cs = static_cast<int>(state.range(0));
  const int out = static_cast<int>(state.range(1));
  uint64_t acc = state.thread_index();
  const ProcessUsage before = ProcessUsage::Now();
  for (auto _ : state) {
    S::lock.lock();
    Work(cs, &S::counter);
    S::lock.unlock();
    Work(out, &acc);
  }
  ReportPerOp(state, before);
}

template <typename Lock>
void RegisterAll(const std::string& scenario_filter) {
  (void)scenario_filter;
  benchmark::RegisterBenchmark(
      absl::StrCat("uncontended/", Lock::kName).c_str(), Uncontended<Lock>);
  benchmark::RegisterBenchmark(absl::StrCat("pingpong/", Lock::kName).c_str(),
                               PingPong<Lock>)
      ->Threads(2)
      ->UseRealTime();
}

template <typename Lock>
void RegisterContended(int threads, int cs, int out) {
  benchmark::RegisterBenchmark(
      absl::StrFormat("contended/cs:%d/out:%d/T:%d/%s", cs, out, threads,
                      Lock::kName)
          .c_str(),
      Contended<Lock>)
      ->Args({cs, out})
      ->Threads(threads)
      ->UseRealTime();
}

template <typename... Locks>
void RegisterInterleaved() {
  // Implementations side by side within each scenario.
  (RegisterAll<Locks>(""), ...);
  for (int threads : {1, 2, 4, 16, 64}) {
    for (auto [cs, out] : {std::pair{10, 50}, std::pair{500, 500}}) {
      (RegisterContended<Locks>(threads, cs, out), ...);
    }
  }
}

// Prints, after the usual output, each row's ratio to the glibc row of the
// same scenario (medians when repetitions are on).
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.run_type == Run::RT_Aggregate && run.aggregate_name != "median") {
        continue;
      }
      std::string name = run.run_name.function_name;
      const size_t slash = name.rfind('/');
      if (slash == std::string::npos) continue;
      const std::string scenario =
          absl::StrCat(name.substr(0, slash),
                       run.run_name.threads.empty()
                           ? ""
                           : absl::StrCat("/", run.run_name.threads));
      const std::string impl = name.substr(slash + 1);
      Row& row = rows_[scenario][impl];
      auto get = [&run](const char* key) {
        auto it = run.counters.find(key);
        return it == run.counters.end() ? 0.0 : it->second.value;
      };
      row.ops = get("ops/s");
      row.cpu = get("cpu_ns/op");
      row.vcsw = get("vcsw/op");
      if (std::find(order_.begin(), order_.end(), scenario) == order_.end()) {
        order_.push_back(scenario);
      }
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf("\n%-40s %-15s %14s %8s %10s %8s %9s\n", "scenario", "impl",
                "ops/s", "x glibc", "cpu ns/op", "x glibc", "vcsw/op");
    for (const std::string& scenario : order_) {
      const auto& impls = rows_[scenario];
      auto base = impls.find("glibc");
      for (const auto& [impl, row] : impls) {
        const double ops_ratio = base != impls.end() && base->second.ops > 0
                                     ? row.ops / base->second.ops
                                     : 0;
        const double cpu_ratio = base != impls.end() && base->second.cpu > 0
                                     ? row.cpu / base->second.cpu
                                     : 0;
        std::printf("%-40s %-15s %14.0f %8.2f %10.1f %8.2f %9.4f\n",
                    scenario.c_str(), impl.c_str(), row.ops, ops_ratio,
                    row.cpu, cpu_ratio, row.vcsw);
      }
    }
    std::fflush(stdout);
  }

 private:
  struct Row {
    double ops = 0, cpu = 0, vcsw = 0;
  };
  std::map<std::string, std::map<std::string, Row>> rows_;
  std::vector<std::string> order_;
};

}  // namespace

int main(int argc, char** argv) {
  RegisterInterleaved<GlibcLock, GlibcAdaptiveLock, StdLock, AbslLock,
                      FutexLock, ParklotLock>();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
