// futex_schbench: a schbench-style wake-up benchmark on raw futex calls
// through glibc's syscall(), side by side:
//
//   kernel/default   the kernel's private futex hash at its default size
//   kernel/global    prctl(PR_FUTEX_HASH, SET_SLOTS, 0): the shared hash
//   kernel/N         prctl(PR_FUTEX_HASH, SET_SLOTS, N)
//   parklot/shim     the same binary run with LD_PRELOAD of the shim and
//                    PARKLOT_SYSCALL_FUTEX=1: every call served by the lot
//
// M message threads each own W workers. A message thread stamps the time
// and wakes each of its workers (FUTEX_WAKE_PRIVATE on the worker's word),
// then sleeps on its own word until all W have answered. A worker wakes,
// records the wake-up latency (now - stamp), works for --work_ns, answers
// (the last one wakes the message thread) and sleeps again
// (FUTEX_WAIT_PRIVATE). Reported per configuration: requests (worker
// answers) per second and the wake-up latency p50/p99/p99.9, for
// (M x W) = 1x4, 2x64, 4x256 by default. With --reps=N every configuration
// runs N times, interleaved (rep 1 of every configuration, then rep 2, ...),
// and each row shows medians with the [min - max] of requests/s and p99,
// followed by the shim's ratios to the best kernel configuration (highest
// median requests/s). Warm-up (thread start, first waits) is outside every
// measured window.
//
// Every measurement runs in a fresh child (this binary re-executed): the
// kernel's hash size is per process and fixed once set, and the parklot
// child needs the preload in its environment.
//
//   bazel run //bench:futex_schbench -- --quick
//   bazel run //bench:futex_schbench -- --pairs=2x64 --duration=2s
//   bazel run //bench:futex_schbench -- --reps=5 --configs=kernel/default,parklot/shim
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
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
#include "absl/time/time.h"
#include "bench/futex_prctl.h"
#include "bench/subprocess.h"


ABSL_FLAG(std::vector<std::string>, pairs, {},
          "Comma-separated MxW pairs (message threads x workers each). "
          "Default: 1x4,2x64,4x256.");
ABSL_FLAG(absl::Duration, duration, absl::ZeroDuration(),
          "Measured time of one run. 0 = 1s, or 250ms with --quick.");
ABSL_FLAG(bool, quick, false, "Shorter runs.");
ABSL_FLAG(int, reps, 1,
          "Interleaved repetitions of every configuration; rows show medians "
          "and [min - max].");
ABSL_FLAG(int64_t, work_ns, 2000, "A worker's busy time per request.");
ABSL_FLAG(std::vector<std::string>, configs, {},
          "Subset of the configurations (see --list_configs). Default: all.");
ABSL_FLAG(bool, list_configs, false, "Print the configurations and exit.");
ABSL_FLAG(std::string, shim, "",
          "The shim for parklot/shim. Default: preload/libparklot_preload.so "
          "beside this binary's bench/ folder.");
ABSL_FLAG(std::string, child, "", "Internal: run one configuration.");
ABSL_FLAG(int, child_m, 1, "Internal: message threads.");
ABSL_FLAG(int, child_w, 4, "Internal: workers per message thread.");

namespace parklot::internal::bench {
namespace {

struct Configuration {
  std::string name;
  long slots;  // -1: no prctl; -2: the shim
};
constexpr long kDefault = -1;
constexpr long kShim = -2;

const std::vector<Configuration>& AllConfigurations() {
  static const auto* v = new std::vector<Configuration>{
      {"kernel/default", kDefault}, {"kernel/global", 0},
      {"kernel/16", 16},            {"kernel/256", 256},
      {"kernel/4096", 4096},        {"parklot/shim", kShim}};
  return *v;
}

const Configuration* Find(const std::string& name) {
  for (const auto& c : AllConfigurations()) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

long FutexWait(std::atomic<uint32_t>* w, uint32_t v) {
  return syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, v, nullptr, nullptr, 0);
}
long FutexWake(std::atomic<uint32_t>* w, int n) {
  return syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, n, nullptr, nullptr, 0);
}

// Log-linear latency histogram over nanoseconds: 64 buckets per power of 2.
struct Histogram {
  static constexpr int kSub = 64;
  static constexpr int kBuckets = kSub * 40;
  std::vector<uint64_t> counts = std::vector<uint64_t>(kBuckets);

  static int Index(uint64_t v) {
    if (v < kSub) return static_cast<int>(v);
    const int msb = 63 - __builtin_clzll(v);
    const int shift = msb - 6;
    const int i = (shift + 1) * kSub + static_cast<int>((v >> shift) & (kSub - 1));
    return std::min(i, kBuckets - 1);
  }
  static uint64_t Lower(int i) {
    if (i < kSub) return static_cast<uint64_t>(i);
    const int shift = i / kSub - 1;
    return (uint64_t{kSub} + (i % kSub)) << shift;
  }
  void Add(uint64_t v) { ++counts[Index(v)]; }
  void Merge(const Histogram& o) {
    for (int i = 0; i < kBuckets; ++i) counts[i] += o.counts[i];
  }
  uint64_t Percentile(double p) const {
    uint64_t total = 0;
    for (uint64_t c : counts) total += c;
    if (total == 0) return 0;
    const uint64_t want = static_cast<uint64_t>(p / 100.0 * total);
    uint64_t seen = 0;
    for (int i = 0; i < kBuckets; ++i) {
      seen += counts[i];
      if (seen > want) return Lower(i);
    }
    return Lower(kBuckets - 1);
  }
};

struct Group;

struct alignas(64) Worker {
  std::atomic<uint32_t> word{0};
  std::atomic<int64_t> stamp{0};
  Group* group = nullptr;
  pthread_t thread{};
  uint64_t requests = 0;
  Histogram latency;
};

struct Group {
  alignas(64) std::atomic<uint32_t> pending{0};
  alignas(64) std::atomic<bool>* stop = nullptr;
  std::atomic<uint32_t>* ready = nullptr;
  // Message threads running, and the start of the measured window.
  std::atomic<uint32_t>* running = nullptr;
  std::atomic<bool>* go = nullptr;
  std::vector<std::unique_ptr<Worker>> workers;
  pthread_t thread{};
  int64_t work_ns = 0;
};

void* WorkerMain(void* arg) {
  Worker* w = static_cast<Worker*>(arg);
  Group* g = w->group;
  g->ready->fetch_add(1, std::memory_order_release);
  for (;;) {
    while (w->word.load(std::memory_order_acquire) == 0) FutexWait(&w->word, 0);
    if (g->stop->load(std::memory_order_acquire) &&
        w->stamp.load(std::memory_order_relaxed) == 0) {
      break;
    }
    const int64_t now = NowNs();
    w->latency.Add(static_cast<uint64_t>(
        std::max<int64_t>(0, now - w->stamp.load(std::memory_order_relaxed))));
    const int64_t until = now + g->work_ns;
    while (NowNs() < until) {
    }
    ++w->requests;
    w->word.store(0, std::memory_order_relaxed);
    if (g->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      FutexWake(&g->pending, 1);
    }
  }
  return nullptr;
}

void* MessageMain(void* arg) {
  Group* g = static_cast<Group*>(arg);
  const uint32_t n = static_cast<uint32_t>(g->workers.size());
  // The window opens once every message thread runs: on a busy machine a
  // thread just created may not run within a short window at all.
  g->running->fetch_add(1, std::memory_order_release);
  while (!g->go->load(std::memory_order_acquire)) sched_yield();
  while (!g->stop->load(std::memory_order_acquire)) {
    g->pending.store(n, std::memory_order_relaxed);
    for (auto& w : g->workers) {
      w->stamp.store(NowNs(), std::memory_order_relaxed);
      w->word.store(1, std::memory_order_release);
      FutexWake(&w->word, 1);
    }
    uint32_t p;
    while ((p = g->pending.load(std::memory_order_acquire)) != 0) {
      FutexWait(&g->pending, p);
    }
  }
  return nullptr;
}

constexpr char kTag[] = "futex_schbench_result";

int RunChild(const Configuration& c, int m, int wcount, absl::Duration d,
             int64_t work_ns) {
  if (c.slots >= 0 &&
      prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_SET_SLOTS, c.slots, 0, 0) != 0) {
    absl::PrintF("%s config=%s status=refused errno=%s\n", kTag, c.name,
                 strerrorname_np(errno));
    return 0;
  }
  if (c.slots == kShim && getenv("PARKLOT_SYSCALL_FUTEX") == nullptr) {
    absl::FPrintF(stderr, "futex_schbench: parklot/shim child without the shim\n");
    return 2;
  }
  std::atomic<bool> stop{false};
  std::atomic<uint32_t> ready{0};
  std::atomic<uint32_t> running{0};
  std::atomic<bool> go{false};
  std::vector<std::unique_ptr<Group>> groups;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 128 * 1024);
  for (int i = 0; i < m; ++i) {
    auto g = std::make_unique<Group>();
    g->stop = &stop;
    g->ready = &ready;
    g->running = &running;
    g->go = &go;
    g->work_ns = work_ns;
    for (int j = 0; j < wcount; ++j) {
      auto w = std::make_unique<Worker>();
      w->group = g.get();
      g->workers.push_back(std::move(w));
    }
    for (auto& w : g->workers) {
      if (pthread_create(&w->thread, &attr, WorkerMain, w.get()) != 0) {
        absl::FPrintF(stderr, "futex_schbench: pthread_create failed\n");
        return 3;
      }
    }
    groups.push_back(std::move(g));
  }
  // Warm-up outside the window: every worker started and, a moment later,
  // asleep (a served first wait registers the thread with the lot, which
  // may grow its table).
  const uint32_t threads = static_cast<uint32_t>(m * wcount);
  while (ready.load(std::memory_order_acquire) < threads) {
    timespec pause = {0, 1000000};
    nanosleep(&pause, nullptr);
  }
  timespec settle = {0, 20000000};
  nanosleep(&settle, nullptr);
  for (auto& g : groups) pthread_create(&g->thread, &attr, MessageMain, g.get());
  while (running.load(std::memory_order_acquire) < static_cast<uint32_t>(m)) {
    sched_yield();
  }
  const int64_t t0 = NowNs();
  go.store(true, std::memory_order_release);
  timespec ts = absl::ToTimespec(d);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
  stop.store(true, std::memory_order_release);
  for (auto& g : groups) pthread_join(g->thread, nullptr);
  const int64_t t1 = NowNs();
  Histogram all;
  uint64_t requests = 0;
  for (auto& g : groups) {
    for (auto& w : g->workers) {
      w->stamp.store(0, std::memory_order_relaxed);
      w->word.store(1, std::memory_order_release);
      FutexWake(&w->word, 1);
    }
    for (auto& w : g->workers) {
      pthread_join(w->thread, nullptr);
      all.Merge(w->latency);
      requests += w->requests;
    }
  }
  pthread_attr_destroy(&attr);
  absl::PrintF(
      "%s config=%s status=ok requests=%d elapsed_ns=%d p50=%d p99=%d "
      "p999=%d\n",
      kTag, c.name, requests, t1 - t0, all.Percentile(50), all.Percentile(99),
      all.Percentile(99.9));
  return 0;
}

// ---------------------------------------------------------------------------

struct Row {
  std::string status;  // "ok", "refused: ...", "failed: ..."
  double rps = 0;
  int64_t p50 = 0, p99 = 0, p999 = 0;
};

Row Measure(const std::string& argv0, const Configuration& c, int m, int w,
            absl::Duration d, int64_t work_ns, const std::string& shim) {
  Row row;
  if (c.slots == kShim) {
    setenv("LD_PRELOAD", shim.c_str(), 1);
    setenv("PARKLOT_SYSCALL_FUTEX", "1", 1);
  }
  const ChildOutcome out = RunSelf(
      argv0,
      {absl::StrCat("--child=", c.name), absl::StrCat("--child_m=", m),
       absl::StrCat("--child_w=", w),
       absl::StrCat("--duration=", absl::FormatDuration(d)),
       absl::StrCat("--work_ns=", work_ns)},
      d + absl::Seconds(120));
  unsetenv("LD_PRELOAD");
  unsetenv("PARKLOT_SYSCALL_FUTEX");
  std::map<std::string, std::string> f;
  for (absl::string_view line : absl::StrSplit(out.stdout_text, '\n')) {
    if (!absl::StartsWith(line, kTag)) continue;
    for (absl::string_view kv : absl::StrSplit(line, ' ')) {
      const size_t eq = kv.find('=');
      if (eq != absl::string_view::npos) {
        f[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
      }
    }
  }
  if (!out.ok) {
    row.status = "failed: " + out.error;
    return row;
  }
  if (f["status"] == "refused") {
    row.status = "refused: prctl(PR_FUTEX_HASH, SET_SLOTS) -> " + f["errno"];
    return row;
  }
  int64_t requests = 0, elapsed = 0;
  if (f["status"] != "ok" || !absl::SimpleAtoi(f["requests"], &requests) ||
      !absl::SimpleAtoi(f["elapsed_ns"], &elapsed) || elapsed <= 0 ||
      !absl::SimpleAtoi(f["p50"], &row.p50) ||
      !absl::SimpleAtoi(f["p99"], &row.p99) ||
      !absl::SimpleAtoi(f["p999"], &row.p999)) {
    row.status = "failed: no result line";
    return row;
  }
  row.status = "ok";
  row.rps = static_cast<double>(requests) * 1e9 / static_cast<double>(elapsed);
  return row;
}

std::string Us(int64_t ns) { return absl::StrFormat("%.1f", ns / 1000.0); }

int RunParent(const std::string& argv0) {
  std::vector<std::pair<int, int>> pairs;
  std::vector<std::string> pair_text = absl::GetFlag(FLAGS_pairs);
  if (pair_text.empty()) pair_text = {"1x4", "2x64", "4x256"};
  for (const std::string& p : pair_text) {
    std::vector<std::string> mw = absl::StrSplit(p, 'x');
    int m, w;
    if (mw.size() != 2 || !absl::SimpleAtoi(mw[0], &m) ||
        !absl::SimpleAtoi(mw[1], &w) || m < 1 || w < 1 || m * w > 20000) {
      absl::FPrintF(stderr, "futex_schbench: bad pair '%s'\n", p);
      return 2;
    }
    pairs.push_back({m, w});
  }
  std::vector<const Configuration*> configs;
  for (const std::string& n : absl::GetFlag(FLAGS_configs)) {
    const Configuration* c = Find(n);
    if (c == nullptr) {
      absl::FPrintF(stderr, "futex_schbench: unknown configuration '%s'\n", n);
      return 2;
    }
    configs.push_back(c);
  }
  if (configs.empty()) {
    for (const auto& c : AllConfigurations()) configs.push_back(&c);
  }
  absl::Duration d = absl::GetFlag(FLAGS_duration);
  if (d == absl::ZeroDuration()) {
    d = absl::GetFlag(FLAGS_quick) ? absl::Milliseconds(250) : absl::Seconds(1);
  }
  std::string shim = absl::GetFlag(FLAGS_shim);
  if (shim.empty()) {
    char exe[4096];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    std::string dir = n > 0 ? std::string(exe, static_cast<size_t>(n)) : "";
    dir = dir.substr(0, dir.rfind('/'));
    shim = dir + "/../preload/libparklot_preload.so";
  }
  if (access(shim.c_str(), R_OK) != 0) {
    absl::FPrintF(stderr, "futex_schbench: shim %s not found (--shim)\n", shim);
    return 2;
  }
  const int64_t work_ns = absl::GetFlag(FLAGS_work_ns);
  absl::PrintF(
      "futex_schbench: schbench-style wake-ups on raw syscall(SYS_futex); "
      "%s per run, %dns work per request; latency in microseconds\n",
      absl::FormatDuration(d), work_ns);
  const int reps = std::max(1, absl::GetFlag(FLAGS_reps));
  int failures = 0;
  for (const auto& [m, w] : pairs) {
    absl::PrintF("\nfutex schbench: %d message threads x %d workers\n", m, w);
    absl::PrintF("%-16s %14s %10s %10s %10s %9s%s\n", "config", "requests/s",
                 "p50 us", "p99 us", "p99.9 us", "vs kernel",
                 reps > 1 ? absl::StrFormat("   [min - max] of %d reps: "
                                            "requests/s; p99 us",
                                            reps)
                          : "");
    // runs[c]: the configuration's successful runs, in order.
    std::vector<std::vector<Row>> runs(configs.size());
    std::vector<std::string> status(configs.size(), "ok");
    for (int r = 0; r < reps; ++r) {
      for (size_t i = 0; i < configs.size(); ++i) {
        if (status[i] != "ok") continue;
        const Row row = Measure(argv0, *configs[i], m, w, d, work_ns, shim);
        if (row.status != "ok") {
          status[i] = row.status;
          continue;
        }
        runs[i].push_back(row);
      }
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      const size_t n = v.size();
      return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    };
    double base = 0;
    double best_kernel = 0, best_kernel_p99 = 0, shim_rps = 0, shim_p99 = 0;
    std::string best_name;
    for (size_t i = 0; i < configs.size(); ++i) {
      const Configuration* c = configs[i];
      if (status[i] != "ok") {
        absl::PrintF("%-16s %s\n", c->name, status[i]);
        if (absl::StartsWith(status[i], "failed")) ++failures;
        continue;
      }
      std::vector<double> rps, p50, p99, p999;
      for (const Row& row : runs[i]) {
        rps.push_back(row.rps);
        p50.push_back(static_cast<double>(row.p50));
        p99.push_back(static_cast<double>(row.p99));
        p999.push_back(static_cast<double>(row.p999));
      }
      const double mrps = median(rps), mp99 = median(p99);
      if (c->name == "kernel/default") base = mrps;
      if (c->slots == kShim) {
        shim_rps = mrps;
        shim_p99 = mp99;
      } else if (mrps > best_kernel) {
        best_kernel = mrps;
        best_kernel_p99 = mp99;
        best_name = c->name;
      }
      std::string range;
      if (reps > 1) {
        range = absl::StrFormat(
            "   [%.0f - %.0f]; [%s - %s]",
            *std::min_element(rps.begin(), rps.end()),
            *std::max_element(rps.begin(), rps.end()),
            Us(static_cast<int64_t>(*std::min_element(p99.begin(), p99.end()))),
            Us(static_cast<int64_t>(*std::max_element(p99.begin(), p99.end()))));
      }
      absl::PrintF("%-16s %14.0f %10s %10s %10s %9s%s\n", c->name, mrps,
                   Us(static_cast<int64_t>(median(p50))),
                   Us(static_cast<int64_t>(mp99)),
                   Us(static_cast<int64_t>(median(p999))),
                   base > 0 ? absl::StrFormat("%.2fx", mrps / base) : "-",
                   range);
    }
    if (reps > 1 && best_kernel > 0 && shim_rps > 0 && best_kernel_p99 > 0) {
      absl::PrintF(
          "parklot/shim vs the best kernel configuration (%s): requests/s "
          "%.2fx, p99 %.2fx (medians of %d)\n",
          best_name, shim_rps / best_kernel, shim_p99 / best_kernel_p99, reps);
    }
    fflush(stdout);
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace parklot::internal::bench

int main(int argc, char** argv) {
  using namespace parklot::internal::bench;
  absl::SetProgramUsageMessage(
      "schbench-style futex wake-ups: kernel private hash sizes vs the "
      "parklot shim's syscall path.");
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_list_configs)) {
    for (const auto& c : AllConfigurations()) absl::PrintF("%s\n", c.name);
    return 0;
  }
  const std::string child = absl::GetFlag(FLAGS_child);
  if (child.empty()) return RunParent(argv[0]);
  const Configuration* c = Find(child);
  if (c == nullptr) return 2;
  return RunChild(*c, absl::GetFlag(FLAGS_child_m), absl::GetFlag(FLAGS_child_w),
                  absl::GetFlag(FLAGS_duration), absl::GetFlag(FLAGS_work_ns));
}
