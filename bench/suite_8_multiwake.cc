// Scenario 8 of //bench:suite: one call that releases many sleeping threads
//. 8a releases N threads parked on one key (the kernel's one
// FUTEX_WAKE on a shared word as the baseline, the lot's UnparkAll); 8b a
// write unlock that lets N blocked readers in (pthread_rwlock vs
// parklot::SharedMutex); 8c barrier rounds (pthread_barrier vs
// parklot::Barrier, 8, 64 and 1,024 threads); 8d `perf bench futex
// wake-parallel -t 512 -w 8` under the kernel and under the shim with
// PARKLOT_SYSCALL_FUTEX=1, if perf is installed.
#include <limits.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/subprocess.h"
#include "bench/suite_harness.h"
#include "runtime/parking_lot.h"
#include "sync/barrier.h"
#include "sync/shared_mutex.h"

namespace parklot::internal {
namespace bench {
namespace {

struct Params {
  std::vector<std::pair<int, int>> release;  // waiters, rounds
  std::vector<std::pair<int, int>> barrier;  // threads, rounds
  int perf_reps;
};

Params ParamsFor(const Plan& plan) {
  using Pairs = std::vector<std::pair<int, int>>;
  return {plan.Pick<Pairs>({{8, 100}, {64, 30}, {1024, 5}},
                           {{8, 30}, {64, 10}, {1024, 3}}, {{4, 2}, {40, 2}}),
          plan.Pick<Pairs>({{8, 2000}, {64, 250}, {1024, 20}},
                           {{8, 500}, {64, 60}, {1024, 5}}, {{4, 20}, {40, 5}}),
          plan.Pick(3, 1, 0)};
}

// --- 8a/8b: release N sleepers ----------------------------------------------
// An implementation: Arm() (main thread, before the waiters arrive), Wait()
// (a waiter, blocks until released), Release() (main thread, times it).

struct KernelWord {
  static constexpr const char* kName = "kernel";
  alignas(64) std::atomic<uint32_t> gen{0};
  uint32_t armed = 0;
  void Arm() { armed = gen.load(std::memory_order_relaxed); }
  void Wait() {
    const uint32_t my = armed;
    while (gen.load(std::memory_order_acquire) == my) FutexWaitPrivate(&gen, my);
  }
  void Release() {
    gen.fetch_add(1, std::memory_order_release);
    FutexWakePrivate(&gen, INT_MAX);
  }
};

struct LotUnparkAll {
  static constexpr const char* kName = "parklot";
  alignas(64) std::atomic<uint32_t> gen{0};
  uint32_t armed = 0;
  void Arm() { armed = gen.load(std::memory_order_relaxed); }
  void Wait() {
    const uint32_t my = armed;
    while (gen.load(std::memory_order_acquire) == my) {
      Park(KeyOf(&gen), [this, my] {
        return gen.load(std::memory_order_relaxed) == my;
      });
    }
  }
  void Release() {
    gen.fetch_add(1, std::memory_order_release);
    UnparkAll(KeyOf(&gen));
  }
};

struct GlibcRwlock {
  static constexpr const char* kName = "glibc";
  pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
  void Arm() { pthread_rwlock_wrlock(&rw); }
  void Wait() {
    pthread_rwlock_rdlock(&rw);
    pthread_rwlock_unlock(&rw);
  }
  void Release() { pthread_rwlock_unlock(&rw); }
};

struct LotSharedMutex {
  static constexpr const char* kName = "parklot";
  SharedMutex mu;
  void Arm() { mu.Lock(); }
  void Wait() {
    mu.LockShared();
    mu.UnlockShared();
  }
  void Release() { mu.Unlock(); }
};

// N waiters, `rounds` rounds: the main thread arms, opens the round, waits
// until every waiter has arrived and had time to fall asleep, then times
// the release until the last waiter has passed; each waiter counts its CPU
// time and context switches from its arrival to its pass. Between rounds
// the waiters wait on a kernel futex gate (the same for every
// implementation, not measured).
template <typename I>
std::string RunRelease(int waiters, int rounds, bool pin, Sample* s) {
  struct State {
    I impl;
    int n = 0;
    alignas(64) std::atomic<uint32_t> gate{0};
    alignas(64) std::atomic<int> arrived{0};
    alignas(64) std::atomic<int> passed{0};
    std::atomic<uint32_t> done{0};
    std::atomic<int64_t> t_last{0};
    UsageSum used;
    std::atomic<bool> stop{false};
  };
  auto* st = new State;  // leaked if a waiter never returns
  st->n = waiters;
  auto waiter = [](void* p, int) {
    State& q = *static_cast<State*>(p);
    for (uint32_t round = 1;; ++round) {
      for (uint32_t g; (g = q.gate.load(std::memory_order_acquire)) < round;) {
        FutexWaitPrivate(&q.gate, g);
      }
      if (q.stop.load(std::memory_order_acquire)) break;
      const Usage u0 = Usage::Thread();
      q.arrived.fetch_add(1, std::memory_order_release);
      q.impl.Wait();
      const int64_t t = NowNs();
      q.used.Add(u0, Usage::Thread());
      int64_t last = q.t_last.load(std::memory_order_relaxed);
      while (t > last && !q.t_last.compare_exchange_weak(last, t)) {
      }
      if (q.passed.fetch_add(1, std::memory_order_acq_rel) + 1 == q.n) {
        q.done.store(1, std::memory_order_release);
        FutexWakePrivate(&q.done, 1);
      }
    }
  };
  Threads threads;
  std::string error = threads.Start(waiters, pin, 128 * 1024, waiter, st);
  const int n = threads.size();
  st->n = n;
  std::vector<double> round_ns, waker_ns;
  for (int r = 0; r < rounds && error.empty(); ++r) {
    st->impl.Arm();
    st->arrived.store(0, std::memory_order_relaxed);
    st->passed.store(0, std::memory_order_relaxed);
    st->done.store(0, std::memory_order_relaxed);
    st->t_last.store(0, std::memory_order_relaxed);
    st->gate.fetch_add(1, std::memory_order_release);
    FutexWakePrivate(&st->gate, INT_MAX);
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (st->arrived.load(std::memory_order_acquire) < n) {
      if (absl::Now() > deadline) break;
      SleepNs(100000);
    }
    if (st->arrived.load() < n) {
      error = "waiters did not all arrive within 60s";
      break;
    }
    // Time for the last arrivals to reach the kernel.
    SleepNs(n >= 512 ? 5000000 : 1000000);
    const Usage r0 = Usage::Thread();
    const int64_t t0 = NowNs();
    st->impl.Release();
    const int64_t t1 = NowNs();
    const Usage r1 = Usage::Thread();
    // The release's own CPU time and context switches count with the
    // waiters': the kernel wakes every waiter inside the releaser's call,
    // serial wakes preempt the releaser, a wake tree wakes partly in the
    // waiters' threads.
    st->used.Add(r0, r1);
    if (!AwaitNonZero(&st->done, deadline)) {
      error = "not every waiter passed within 60s (lost wake-up?)";
      break;
    }
    waker_ns.push_back(static_cast<double>(t1 - t0));
    round_ns.push_back(
        static_cast<double>(st->t_last.load(std::memory_order_relaxed) - t0));
  }
  st->stop.store(true, std::memory_order_release);
  st->gate.fetch_add(1, std::memory_order_release);
  FutexWakePrivate(&st->gate, INT_MAX);
  if (!threads.Join(absl::Now() + absl::Seconds(60))) {
    return error.empty() ? "waiters did not exit within 60s" : error;
  }
  if (error.empty() && !round_ns.empty()) {
    const double per =
        static_cast<double>(n) * static_cast<double>(round_ns.size());
    std::sort(round_ns.begin(), round_ns.end());
    std::sort(waker_ns.begin(), waker_ns.end());
    const double med = round_ns[round_ns.size() / 2];
    s->iterations = per;
    s->real_s = med * static_cast<double>(round_ns.size()) / 1e9;
    const UsageSum& u = st->used;
    s->cpu_s = static_cast<double>(u.cpu_ns.load()) / 1e9;
    Put(s, "round_ns", med);
    Put(s, "waker_ns", waker_ns[waker_ns.size() / 2]);
    Put(s, "csw_per_waiter",
        static_cast<double>(u.vcsw.load() + u.ivcsw.load()) / per);
    Put(s, "cpu_ns_per_waiter", static_cast<double>(u.cpu_ns.load()) / per);
  }
  delete st;
  return error;
}

// --- 8c: barrier rounds -----------------------------------------------------

struct GlibcBarrier {
  static constexpr const char* kName = "glibc";
  pthread_barrier_t b;
  explicit GlibcBarrier(int n) {
    pthread_barrier_init(&b, nullptr, static_cast<unsigned>(n));
  }
  ~GlibcBarrier() { pthread_barrier_destroy(&b); }
  void Wait() { pthread_barrier_wait(&b); }
};

struct LotBarrier {
  static constexpr const char* kName = "parklot";
  Barrier b;
  explicit LotBarrier(int n) : b(static_cast<uint32_t>(n)) {}
  void Wait() { b.Wait(); }
};

// T threads meet `rounds` times; wall time per round, and the threads' CPU
// time and context switches per round.
template <typename B>
std::string RunBarrier(int threads, int rounds, bool pin, Sample* s) {
  struct State {
    explicit State(int n) : barrier(n) {}
    B barrier;
    int rounds = 0;
    UsageSum used;
  };
  auto* st = new State(threads);  // leaked if a thread never returns
  st->rounds = rounds;
  auto worker = [](void* p, int) {
    State& q = *static_cast<State*>(p);
    const Usage u0 = Usage::Thread();
    for (int i = 0; i < q.rounds; ++i) q.barrier.Wait();
    q.used.Add(u0, Usage::Thread());
  };
  Threads t;
  const int64_t t0 = NowNs();
  const std::string error = t.Start(threads, pin, 128 * 1024, worker, st);
  // A thread that did not start leaves the barrier never full: nothing can
  // be measured.
  if (!error.empty()) return error;  // leaks st: threads wait forever
  if (!t.Join(absl::Now() + absl::Seconds(120))) {
    return "barrier threads did not finish within 120s";
  }
  const int64_t t1 = NowNs();
  s->iterations = rounds;
  s->real_s = static_cast<double>(t1 - t0) / 1e9;
  const UsageSum& u = st->used;
  s->cpu_s = static_cast<double>(u.cpu_ns.load()) / 1e9;
  Put(s, "round_ns", static_cast<double>(t1 - t0) / rounds);
  Put(s, "cpu_ns_per_round", static_cast<double>(u.cpu_ns.load()) / rounds);
  Put(s, "csw_per_round",
      static_cast<double>(u.vcsw.load() + u.ivcsw.load()) / rounds);
  delete st;
  return "";
}

// --- 8d: perf bench futex wake-parallel -------------------------------------

// One `perf bench futex wake-parallel -t 512 -w 8` run: the mean per-waker
// latency in ms, or NaN. perf's own start-up race (a blocked worker not yet
// asleep when the wakers run waits forever, under the kernel too) is a
// timeout, retried up to twice.
double WakeParallelMs(const std::string& perf, const std::string& shim,
                      std::string* error) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    ProgramSpec spec;
    spec.path = perf;
    spec.argv = {perf, "bench", "futex", "wake-parallel", "-t", "512", "-w", "8"};
    if (!shim.empty()) {
      spec.set_env = {absl::StrCat("LD_PRELOAD=", shim),
                      "PARKLOT_SYSCALL_FUTEX=1"};
    }
    spec.capture_stderr = true;
    spec.timeout = absl::Seconds(40);
    const ChildOutcome o = RunProgram(spec);
    for (absl::string_view line : absl::StrSplit(o.stdout_text, '\n')) {
      if (!absl::StartsWith(line, "Avg per-thread latency")) continue;
      // "... waking 64/512 threads) in 1.2345 ms (+-9.38%)"
      const size_t in = line.rfind(" in ");
      if (in == absl::string_view::npos) continue;
      std::vector<absl::string_view> f =
          absl::StrSplit(line.substr(in + 4), ' ');
      double v;
      if (!f.empty() && absl::SimpleAtod(f[0], &v)) return v;
    }
    *error = o.ok ? "no latency line" : o.error;
  }
  return NAN;
}

class MultiWake : public Scenario {
 public:
  int number() const override { return 8; }

  std::vector<std::string> Notes(const Plan& plan) const override {
    return plan.Pick<std::vector<std::string>>(
        {}, {}, {"tiny 8: perf wake-parallel left out"});
  }

  void Measure(Context& c) override {
    const Plan& plan = c.plan;
    const Params p = ParamsFor(plan);
    std::vector<Case> rel, rd, bar;
    for (const auto& [n, rounds] : p.release) {
      for (const std::string& pin : plan.pins) {
        const bool pinned = pin == "pinned";
        const std::string cell = absl::StrFormat("waiters=%d", n);
        auto add = [&, n = n, rounds = rounds]<typename I>(
                       std::vector<Case>* v, const std::string& scenario) {
          v->push_back({scenario, cell, pin, I::kName, [=](Sample* s) {
                          return RunRelease<I>(n, rounds, pinned, s);
                        }});
        };
        add.template operator()<KernelWord>(&rel, "release");
        add.template operator()<LotUnparkAll>(&rel, "release");
        add.template operator()<GlibcRwlock>(&rd, "readers");
        add.template operator()<LotSharedMutex>(&rd, "readers");
      }
    }
    for (const auto& [n, rounds] : p.barrier) {
      for (const std::string& pin : plan.pins) {
        const bool pinned = pin == "pinned";
        const std::string cell = absl::StrFormat("T=%d", n);
        auto add = [&, n = n, rounds = rounds]<typename B>() {
          bar.push_back({"barrier", cell, pin, B::kName, [=](Sample* s) {
                           return RunBarrier<B>(n, rounds, pinned, s);
                         }});
        };
        add.template operator()<GlibcBarrier>();
        add.template operator()<LotBarrier>();
      }
    }
    RunCases("8a release many", rel, plan.reps, c.results);
    RunCases("8b rwlock readers", rd, plan.reps, c.results);
    RunCases("8c barrier", bar, plan.reps, c.results);
  }

  std::vector<Table> Tables(const Plan& plan) const override {
    (void)plan;
    using C = Column;
    const std::vector<Column> release_cols = {
        {"round_ns", "last passed", C::kTime, true, true},
        {"waker_ns", "waker", C::kTime, true, true},
        {"cpu_ns_per_waiter", "cpu/waiter", C::kTime, false, true},
        {"csw_per_waiter", "csw/waiter", C::kFixed, false, false}};
    return {
        {"release",
         "8a. release N threads asleep on one key: the kernel's one "
         "FUTEX_WAKE on a shared word (baseline) vs the lot's UnparkAll "
         "(what a served FUTEX_WAKE, a latch or a once does); time until "
         "the last has passed, the waker's own time, CPU and context "
         "switches (waiters' and releaser's) per waiter",
         release_cols,
         {"ratios in 8a are to the kernel, not glibc"},
         "kernel"},
        {"readers",
         "8b. write unlock releasing N blocked readers: pthread_rwlock vs "
         "parklot::SharedMutex",
         release_cols},
        {"barrier",
         "8c. barrier rounds: pthread_barrier_wait vs parklot::Barrier "
         "(the shim's barrier)",
         {{"round_ns", "time/round", C::kTime, true, true},
          {"cpu_ns_per_round", "cpu/round", C::kTime, false, true},
          {"csw_per_round", "csw/round", C::kFixed, false, false}}}};
  }

  void RunAfterTables(Context& c) override {
    const Params p = ParamsFor(c.plan);
    const std::string title =
        "\n== 8d. perf bench futex wake-parallel -t 512 -w 8 (8 wakers, each "
        "waking 64): per-waker latency, kernel vs the shim with "
        "PARKLOT_SYSCALL_FUTEX=1 ==\n";
    const std::string perf = Which("perf");
    if (p.perf_reps == 0) {
      c.report.Print("%sleft out in %s mode\n", title, c.plan.mode);
      return;
    }
    if (perf.empty()) {
      c.report.Print("%sperf is not installed (Debian: linux-perf)\n", title);
      return;
    }
    c.report.Print("%s", title);
    SuiteProgress().Start("8d perf wake-parallel", 2 * p.perf_reps);
    // Interleaved: kernel, shim, kernel, shim, ...
    for (int r = 0; r < p.perf_reps; ++r) {
      for (const char* impl : {"kernel", "parklot"}) {
        Series& s = c.results.Get("wakeparallel", "t=512 w=8", "", impl);
        std::string error;
        const double ms = WakeParallelMs(
            perf, std::string(impl) == "kernel" ? "" : c.shim, &error);
        SuiteProgress().Step(impl);
        if (!std::isfinite(ms)) {
          s.failures.push_back(error);
          continue;
        }
        Sample x;
        x.repetition = r;
        x.iterations = 1;
        x.real_s = ms / 1e3;
        Put(&x, "waker_ns", ms * 1e6);
        s.samples.push_back(x);
      }
    }
    SuiteProgress().Done();
    const Series* k = c.results.Find("wakeparallel", "t=512 w=8", "", "kernel");
    const Series* l = c.results.Find("wakeparallel", "t=512 w=8", "", "parklot");
    for (const Series* s : {k, l}) {
      if (s->samples.empty()) {
        c.report.Print("  %-8s no run finished (%s)\n", s->impl,
                       s->failures.empty() ? "?" : s->failures.back());
        continue;
      }
      c.report.Print("  %-8s %s [%s - %s] per waker, %d runs%s\n", s->impl,
                     HumanNs(s->Median("waker_ns")), HumanNs(s->Min("waker_ns")),
                     HumanNs(s->Max("waker_ns")), s->samples.size(),
                     s == l && !k->samples.empty()
                         ? absl::StrFormat(", %.2fx the kernel",
                                           l->Median("waker_ns") /
                                               k->Median("waker_ns"))
                         : "");
    }
  }

  void Targets(const Results& r, std::vector<Verdict>* v) const override {
    Tally bar;
    for (const Series* s : r.Of("barrier")) {
      if (s->impl != "parklot" || s->samples.empty()) continue;
      if (s->cell != "T=8" && s->cell != "T=64") continue;
      const double x = Ratio(r, "barrier", s->cell, s->pin, s->impl, "round_ns");
      bar.Add(x, x <= 1.05);
    }
    v->push_back({"8c barrier rounds, 8 and 64 threads: parklot <= 1.05x glibc",
                  bar.Range(), bar.Result()});
    Tally wp;
    const Series* k = r.Find("wakeparallel", "t=512 w=8", "", "kernel");
    const Series* l = r.Find("wakeparallel", "t=512 w=8", "", "parklot");
    if (k != nullptr && l != nullptr && !k->samples.empty() &&
        !l->samples.empty()) {
      const double x = l->Median("waker_ns") / k->Median("waker_ns");
      wp.Add(x, x <= 1.05);
    }
    v->push_back({"8d perf wake-parallel -t 512 -w 8 under the shim (--futex): "
                  "<= 1.05x the kernel's per-waker latency",
                  wp.Range(), wp.Result()});
  }
};

PARKLOT_SUITE_SCENARIO(MultiWake);

}  // namespace
}  // namespace bench
}  // namespace parklot::internal
