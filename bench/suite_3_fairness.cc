// Scenario 3 of //bench:suite: fairness and long critical sections. T
// threads on one lock, critical section 0 / 1us busy / 10us busy / 100us
// asleep, delay between: acquire-wait p50/p99/max, per-thread min/max,
// Jain's index.
#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/suite_harness.h"

namespace parklot::internal {
namespace bench {
namespace {

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

struct Params {
  absl::Duration window;
  std::vector<int> threads;
  std::vector<Cs> cs;
  std::vector<int> delay_ns;
};

Params ParamsFor(const Plan& plan) {
  using V = std::vector<int>;
  using CsV = std::vector<Cs>;
  return {plan.Window(absl::Milliseconds(20), absl::Milliseconds(15),
                      absl::Milliseconds(3)),
          plan.Pick<V>({2, 8, 32}, {2, 32}, {2}),
          plan.Pick<CsV>(
              {Cs::kNone, Cs::kBusy1us, Cs::kBusy10us, Cs::kSleep100us},
              {Cs::kNone, Cs::kBusy1us, Cs::kSleep100us},
              {Cs::kNone, Cs::kSleep100us}),
          plan.Pick<V>({0, 1000, 10000}, {0, 10000}, {0})};
}

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

class Fairness : public Scenario {
 public:
  int number() const override { return 3; }

  std::vector<std::string> Notes(const Plan& plan) const override {
    return plan.Pick<std::vector<std::string>>(
        {},
        {"quick 3: T=8, critical section 10us-busy and delay 1us left out"},
        {});
  }

  void Measure(Context& c) override {
    const Plan& plan = c.plan;
    const Params p = ParamsFor(plan);
    std::vector<Case> cases;
    for (int t : p.threads) {
      for (Cs cs : p.cs) {
        for (int delay : p.delay_ns) {
          for (const std::string& pin : plan.pins) {
            ForEachMutex([&]<typename L>() {
              const bool pinned = pin == "pinned";
              // Sleeping critical sections complete few acquisitions per
              // window; give them twice the time.
              const absl::Duration window =
                  cs == Cs::kSleep100us ? p.window * 2 : p.window;
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
    RunCases("3 fairness", cases, plan.reps, c.results);
  }

  std::vector<Table> Tables(const Plan& plan) const override {
    using C = Column;
    return {
        {"fairness",
         "3. fairness and long critical sections: one lock, "
         "acquire-wait percentiles",
         {{"wait_p50_ns", "wait p50", C::kTime, false, true},
          {"wait_p99_ns", "wait p99", C::kTime, true, true},
          {"wait_max_ns", "wait max", C::kTime, false, false},
          {"ops_per_s", "ops/s", C::kRate, false, true},
          {"min_max", "thr min/max", C::kFixed, false, false},
          {"jain", "jain", C::kFixed, false, false},
          {"cpu_ns_per_op", "cpu/op", C::kTime, false, false}},
         {"percentiles are over acquisitions. A barging lock lets the "
          "releasing thread re-acquire at once, so its many quick "
          "re-acquisitions fill the percentiles while the other threads' "
          "long waits show only in 'wait max' and 'thr min/max'; a lock that "
          "hands off (parklot when its fairness timer fires) spreads the "
          "waiting over all acquisitions.",
          absl::StrFormat(
              "with many more threads than CPUs (here %d), a window of %s is "
              "shorter than the scheduler's round over all runnable threads: "
              "threads that never got a CPU show as starved (thr min/max 0) "
              "under every implementation; --window_scale=8 measures that "
              "better.",
              Cpus().size(), absl::FormatDuration(ParamsFor(plan).window))}}};
  }

  void Targets(const Results& r, std::vector<Verdict>* v) const override {
    Tally p99;
    for (const Series* s : r.Of("fairness")) {
      if (s->impl != "parklot") continue;
      const double x =
          Ratio(r, "fairness", s->cell, s->pin, "parklot", "wait_p99_ns");
      p99.Add(x, x <= 1.0);
    }
    v->push_back({"3 fairness: acquire-wait p99 <= glibc", p99.Range(),
                  p99.Result()});
    for (const char* impl : {"parklot", "glibc"}) {
      Tally t;
      for (const Series* s : r.Of("fairness")) {
        if (s->impl != impl || s->samples.empty()) continue;
        const double x = s->Median("min_max");
        t.Add(x, x >= 0.5);
      }
      v->push_back({absl::StrCat("3 fairness: no thread starved, ", impl,
                                 " per-thread min/max ops >= 0.5"),
                    t.Range(""), t.Result()});
    }
  }

  // Acquire-wait p99 vs threads, per critical section (first delay).
  void Plots(const Plan& plan, const Results& r, const std::string& dir,
             const std::string& data,
             std::vector<std::string>* scripts) const override {
    const Params p = ParamsFor(plan);
    if (r.Of("fairness").empty() || p.delay_ns.empty()) return;
    const std::vector<std::string> impls = r.Impls("fairness");
    std::string gp = GnuplotPreamble(dir + "/fairness_p99.png", 1800, 1000);
    absl::StrAppend(&gp, "set multiplot layout 2,", p.cs.size(),
                    " title 'acquire-wait p99 (us) vs threads, delay between "
                    "sections 0'\n",
                    "set logscale x 2\nset logscale y\nset xlabel 'threads'\n"
                    "set ylabel 'p99 wait (us)'\nset key outside right top "
                    "font ',8'\n");
    for (const std::string& pin : r.Pins("fairness")) {
      for (Cs cs : p.cs) {
        std::vector<std::pair<double, std::string>> rows;
        for (int t : p.threads) {
          rows.emplace_back(t, FairnessCell(t, cs, p.delay_ns[0]));
        }
        const std::string file = absl::StrFormat("%s/fairness_%s_%s.dat", data,
                                                 pin, CsName(cs));
        WriteFile(file,
                  DataTable(r, "fairness", pin, rows, "wait_p99_ns", 1e-3, true));
        absl::StrAppend(&gp,
                        absl::StrFormat("set title 'cs=%s, %s'\n", CsName(cs),
                                        pin),
                        PlotLines(file, impls, true));
      }
    }
    absl::StrAppend(&gp, "unset multiplot\n");
    AddPlotScript(data + "/fairness_p99.gp", gp, scripts);
  }
};

PARKLOT_SUITE_SCENARIO(Fairness);

}  // namespace
}  // namespace bench
}  // namespace parklot::internal
