// Scenario 4 of //bench:suite: wake-up latency, schbench style. A waker
// stamps the time and wakes, the woken thread measures (pthread_cond,
// absl::CondVar, parklot::CondVar, parklot Park/UnparkOne, raw futex);
// then bench/futex_schbench (kernel vs shim, 4b), if built.
#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/suite_harness.h"
#include "runtime/parking_lot.h"

ABSL_FLAG(std::string, futex_schbench, "",
          "The futex_schbench binary (scenario 4b; skipped if absent). "
          "Default: beside this binary.");

namespace parklot::internal {
namespace bench {
namespace {

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

struct Params {
  absl::Duration window;
  std::vector<int> workers;
  int64_t work_ns = 2000;
  std::vector<std::string> schbench_args;  // empty: 4b left out
};

Params ParamsFor(const Plan& plan) {
  using V = std::vector<int>;
  using S = std::vector<std::string>;
  return {plan.Window(absl::Milliseconds(100), absl::Milliseconds(50),
                      absl::Milliseconds(10)),
          plan.Pick<V>({1, 8}, {1, 8}, {1, 2}), 2000,
          plan.Pick<S>({"--pairs=1x4,2x64", "--duration=250ms"},
                       {"--pairs=1x4,2x64", "--duration=60ms",
                        "--configs=kernel/default,kernel/global,parklot/shim"},
                       {})};
}

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

class Wakeup : public Scenario {
 public:
  int number() const override { return 4; }

  void Measure(Context& c) override {
    const Plan& plan = c.plan;
    const Params p = ParamsFor(plan);
    std::vector<Case> cases;
    for (int workers : p.workers) {
      for (const std::string& pin : plan.pins) {
        ForEachWaiter([&]<typename W>() {
          const bool pinned = pin == "pinned";
          const absl::Duration window = p.window;
          const int64_t work = p.work_ns;
          cases.push_back({"wakeup", absl::StrFormat("workers=%d", workers),
                           pin, W::kName, [=](Sample* s) {
                             return RunWakeup<W>(workers, work, pinned, window,
                                                 s);
                           }});
        });
      }
    }
    RunCases("4a wake-up latency", cases, plan.reps, c.results);
  }

  std::vector<Table> Tables(const Plan& plan) const override {
    (void)plan;
    using C = Column;
    return {
        {"wakeup",
         "4. wake-up latency, schbench style: a waker stamps and wakes "
         "each worker in turn (glibc/absl/parklot = condvars; park = "
         "parklot Park/UnparkOne; futex = raw FUTEX_WAKE)",
         {{"wake_p50_ns", "p50", C::kTime, false, true},
          {"wake_p99_ns", "p99", C::kTime, true, true},
          {"wake_p999_ns", "p99.9", C::kTime, false, true},
          {"ops_per_s", "wakeups/s", C::kRate, false, false},
          {"cpu_ns_per_op", "cpu/wakeup", C::kTime, false, false},
          {"vcsw_per_op", "vcsw/wakeup", C::kCount, false, false}}}};
  }

  // 4b: bench/futex_schbench, kernel hash sizes vs the shim.
  void RunAfterTables(Context& c) override {
    const Params p = ParamsFor(c.plan);
    std::string bin = absl::GetFlag(FLAGS_futex_schbench);
    if (bin.empty()) bin = SelfDir() + "/futex_schbench";
    AbsolutePath(&bin);
    if (p.schbench_args.empty()) {
      c.report.Print("\n== 4b. raw-futex wake-ups (bench/futex_schbench) ==\n"
                     "left out in %s mode\n",
                     c.plan.mode);
    } else if (!Executable(bin)) {
      c.report.Print("\n== 4b. raw-futex wake-ups (bench/futex_schbench) ==\n"
                     "not built (%s)\n",
                     bin);
    } else {
      std::vector<std::string> args = p.schbench_args;
      args.push_back(absl::StrCat("--shim=", c.shim));
      RunOtherBench(c.report,
                    "4b. raw syscall(SYS_futex) wake-ups, schbench style: "
                    "kernel hash sizes vs the shim (bench/futex_schbench)",
                    bin, args, absl::Minutes(5), nullptr);
    }
  }

  void Targets(const Results& r, std::vector<Verdict>* v) const override {
    Tally t;
    for (const Series* s : r.Of("wakeup")) {
      if (s->impl != "park" && s->impl != "parklot") continue;
      const double x =
          Ratio(r, "wakeup", s->cell, s->pin, s->impl, "wake_p99_ns");
      t.Add(x, x <= 1.0);
    }
    v->push_back({"4 wake-up p99 <= glibc (park and parklot CondVar; "
                  "no target, for reference)",
                  t.Range(), t.Result()});
  }

  // Latency percentiles: x = p50, p99, p99.9.
  void Plots(const Plan& plan, const Results& r, const std::string& dir,
             const std::string& data,
             std::vector<std::string>* scripts) const override {
    (void)plan;
    if (r.Of("wakeup").empty()) return;
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
    AddPlotScript(data + "/wakeup_latency.gp", gp, scripts);
  }
};

PARKLOT_SUITE_SCENARIO(Wakeup);

}  // namespace
}  // namespace bench
}  // namespace parklot::internal
