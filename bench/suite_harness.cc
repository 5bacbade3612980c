#include "bench/suite_harness.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "bench/subprocess.h"

namespace parklot::internal {
namespace bench {
namespace {

std::vector<int> g_cpus;  // the CPUs this process may run on
absl::Time g_start;

std::string ReadFirstLine(const char* path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

std::vector<Scenario*>& Registry() {
  static auto* v = new std::vector<Scenario*>;
  return *v;
}

}  // namespace

// ---------------------------------------------------------------------------
// Machine, clocks, usage.

void InitMachine() {
  g_start = absl::Now();
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) g_cpus.push_back(c);
    }
  }
  if (g_cpus.empty()) g_cpus.push_back(0);
}

const std::vector<int>& Cpus() { return g_cpus; }

absl::Time SuiteStart() { return g_start; }

std::string Elapsed() {
  const int64_t s = absl::ToInt64Seconds(absl::Now() - g_start);
  return absl::StrFormat("%d:%02d", s / 60, s % 60);
}

void PinTo(int index) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(g_cpus[static_cast<size_t>(index) % g_cpus.size()], &set);
  sched_setaffinity(0, sizeof set, &set);
}

void SleepNs(int64_t ns) {
  timespec ts = {static_cast<time_t>(ns / 1000000000),
                 static_cast<long>(ns % 1000000000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR) {
  }
}

Usage Usage::Thread() {
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

std::string SelfDir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}

std::string RunnablePath(const std::string& path) {
  // Bazel's output tree: .../bazel-out/CONFIG/bin/PACKAGE/NAME, in the
  // user's cache folder; the workspace's bazel-bin link names the same.
  const size_t out = path.find("/bazel-out/");
  if (out == std::string::npos) return path;
  const size_t bin = path.find("/bin/", out + 11);
  if (bin == std::string::npos) return path;
  return "bazel-bin/" + path.substr(bin + 5);
}

bool Executable(const std::string& path) {
  return !path.empty() && access(path.c_str(), X_OK) == 0;
}

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

void AbsolutePath(std::string* path) {
  char buf[PATH_MAX];
  if (realpath(path->c_str(), buf) != nullptr) *path = buf;
}

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  return static_cast<bool>(f);
}

void AddPlotScript(const std::string& path, const std::string& gp,
                   std::vector<std::string>* scripts) {
  WriteFile(path, gp);
  scripts->push_back(path);
}

void Put(Sample* s, const std::string& key, double v) {
  if (std::isfinite(v)) s->metrics[key] = v;
}

// ---------------------------------------------------------------------------
// Progress.

// A duration for the progress lines, always with its unit: "0.4s", "12s",
// "3m5s".
std::string ShowDuration(absl::Duration d) {
  if (d < absl::Seconds(10)) {
    return absl::StrFormat("%.1fs", absl::ToDoubleSeconds(d));
  }
  return absl::FormatDuration(absl::Trunc(d, absl::Seconds(1)));
}

// The progress label of a scenario ("4a wake-up latency", or a report
// title "4b. raw ...: ..."): "scenario 4a (wake-up latency)" reads the same
// for both.
std::string ScenarioLabel(const std::string& label) {
  size_t id_end = 0;
  while (id_end < label.size() &&
         (isdigit(static_cast<unsigned char>(label[id_end])) ||
          islower(static_cast<unsigned char>(label[id_end])))) {
    ++id_end;
  }
  if (id_end == 0) return label;
  std::string name = label.substr(id_end);
  while (!name.empty() && (name[0] == '.' || name[0] == ' ')) name.erase(0, 1);
  const size_t cut = name.find_first_of(":,(");
  if (cut != std::string::npos) name.resize(cut);
  while (!name.empty() && name.back() == ' ') name.pop_back();
  return absl::StrCat("scenario ", label.substr(0, id_end), " of 8",
                      name.empty() ? "" : absl::StrCat(" (", name, ")"));
}

void Progress::Start(const std::string& label, size_t total) {
  label_ = ScenarioLabel(label);
  total_ = total;
  done_ = 0;
  started_ = absl::Now();
  last_ = absl::InfinitePast();
  tty_ = isatty(STDERR_FILENO);
  Show("");
}

void Progress::Step(const std::string& detail) {
  ++done_;
  Show(detail);
}

void Progress::Done() {
  if (tty_) absl::FPrintF(stderr, "\r\033[K");
  absl::FPrintF(stderr, "[%s] %s: done in %s\n", Elapsed(), label_,
                ShowDuration(absl::Now() - started_));
}

void Progress::Show(const std::string& detail) {
  const absl::Time now = absl::Now();
  if (!tty_ && now - last_ < absl::Seconds(10) && done_ != 0) return;
  last_ = now;
  std::string eta;
  if (done_ > 0 && total_ > done_) {
    const absl::Duration per = (now - started_) / static_cast<double>(done_);
    eta = absl::StrCat(", about ",
                          ShowDuration(per * static_cast<double>(total_ - done_)),
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

Progress& SuiteProgress() {
  static auto* p = new Progress;
  return *p;
}

// ---------------------------------------------------------------------------
// Fixed-duration runs.

namespace {

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

}  // namespace

bool JoinAll(std::vector<pthread_t>& threads, absl::Time deadline) {
  const timespec ts = absl::ToTimespec(deadline);
  for (pthread_t t : threads) {
    if (pthread_timedjoin_np(t, nullptr, &ts) != 0) return false;
  }
  return true;
}

Threads::~Threads() {
  if (joined_ || threads_.empty()) delete args_;
}

void* Threads::Run(void* arg) {
  const Arg a = *static_cast<Arg*>(arg);
  if (a.pin) PinTo(a.index);
  a.fn(a.state, a.index);
  return nullptr;
}

std::string Threads::Start(int n, bool pin, size_t stack_bytes,
                           void (*fn)(void* state, int index), void* state) {
  args_ = new std::vector<Arg>(static_cast<size_t>(n));
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, stack_bytes);
  std::string error;
  for (int i = 0; i < n; ++i) {
    Arg& a = (*args_)[static_cast<size_t>(i)];
    a = {fn, state, i, pin};
    pthread_t t;
    const int e = pthread_create(&t, &attr, Run, &a);
    if (e != 0) {
      error = absl::StrCat("pthread_create: ", strerror(e));
      break;
    }
    threads_.push_back(t);
  }
  pthread_attr_destroy(&attr);
  return error;
}

bool Threads::Join(absl::Time deadline) {
  joined_ = JoinAll(threads_, deadline);
  return joined_;
}

bool AwaitNonZero(std::atomic<uint32_t>* word, absl::Time deadline) {
  while (word->load(std::memory_order_acquire) == 0) {
    timespec ts = {1, 0};
    RawFutex(word, FUTEX_WAIT_PRIVATE, 0, &ts, nullptr, 0);
    if (absl::Now() > deadline) break;
  }
  return word->load(std::memory_order_acquire) != 0;
}

WindowResult RunWindow(int threads, bool pin, absl::Duration window,
                       Body body, const std::function<void()>& on_stop) {
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

std::vector<Column> SummaryColumns(const std::string& unit) {
  using C = Column;
  return {{"ops_per_s", unit + "s/s", C::kRate, true, true},
          {"cpu_ns_per_op", "cpu/" + unit, C::kTime, false, true},
          {"vcsw_per_op", "vcsw/" + unit, C::kCount, false, false},
          {"ivcsw_per_op", "ivcsw/" + unit, C::kCount, false, false}};
}

// ---------------------------------------------------------------------------
// Cases, other binaries.

void RunCases(const std::string& label, const std::vector<Case>& cases,
              int reps, Results& results) {
  Progress& progress = SuiteProgress();
  progress.Start(label, cases.size() * static_cast<size_t>(reps));
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
      progress.Step(absl::StrFormat("repetition %d/%d: %s %s %s", rep + 1,
                                    reps, c.cell, c.pin, c.impl));
    }
  }
  progress.Done();
}

void RunOtherBench(Report& report, const std::string& title,
                   const std::string& path, std::vector<std::string> args,
                   absl::Duration timeout, std::string* text) {
  report.Print("\n== %s ==\n$ %s %s\n", title, RunnablePath(path),
               absl::StrJoin(args, " "));
  ProgramSpec spec;
  spec.path = path;
  spec.argv = {path};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.stdin_path = "";
  spec.timeout = timeout;
  const absl::Time start = absl::Now();
  absl::FPrintF(stderr, "[%s] %s: running %s (its progress below)\n",
                Elapsed(), ScenarioLabel(title), path.substr(path.rfind('/') + 1));
  const ChildOutcome out = RunProgram(spec);
  report.Write(out.stdout_text);
  if (!out.ok) report.Print("FAILED: %s\n", out.error);
  absl::FPrintF(stderr, "[%s] %s: done in %s\n", Elapsed(), ScenarioLabel(title),
                ShowDuration(absl::Now() - start));
  if (text != nullptr) *text = out.stdout_text;
}

// ---------------------------------------------------------------------------
// Scenarios.

bool RegisterScenario(Scenario* s) {
  Registry().push_back(s);
  return true;
}

std::vector<Scenario*> Scenarios() {
  std::vector<Scenario*> v = Registry();
  std::sort(v.begin(), v.end(), [](const Scenario* a, const Scenario* b) {
    return a->number() < b->number();
  });
  return v;
}

}  // namespace bench
}  // namespace parklot::internal
