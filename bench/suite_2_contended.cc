// Scenario 2 of //bench:suite: contended throughput. T threads x (work
// inside, outside) x one lock or T/2 locks, fixed-duration runs: total
// ops/s, per-thread min/max and coefficient of variation, CPU and context
// switches per op.
#include <stdlib.h>

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/suite_harness.h"

ABSL_FLAG(std::vector<std::string>, threads, {},
          "Scenario 2's thread counts, comma-separated (e.g. 16,32,64 on a "
          "many-core machine). Default: the mode's (1,2,4,16,64; tiny: "
          "1,2,4).");

namespace parklot::internal {
namespace bench {
namespace {

struct Params {
  absl::Duration window;
  std::vector<int> threads;
  std::vector<std::pair<int, int>> works;  // (inside, outside)
};

// --threads, or the mode's thread counts. A count that is not a number
// from 1 to 4,096 ends the run: a benchmark run on a mistyped list would
// measure something else than asked.
std::vector<int> ThreadCounts(const Plan& plan) {
  const std::vector<std::string> given = absl::GetFlag(FLAGS_threads);
  if (given.empty()) {
    return plan.Pick<std::vector<int>>({1, 2, 4, 16, 64}, {1, 2, 4, 16, 64},
                                       {1, 2, 4});
  }
  std::vector<int> counts;
  for (const std::string& g : given) {
    int t = 0;
    if (!absl::SimpleAtoi(g, &t) || t < 1 || t > 4096) {
      absl::FPrintF(stderr, "suite: --threads takes counts 1-4096, not '%s'\n",
                    g);
      exit(2);
    }
    counts.push_back(t);
  }
  return counts;
}

Params ParamsFor(const Plan& plan) {
  using Works = std::vector<std::pair<int, int>>;
  return {plan.Window(absl::Milliseconds(40), absl::Milliseconds(15),
                      absl::Milliseconds(3)),
          ThreadCounts(plan),
          plan.Pick<Works>({{1, 0}, {10, 100}, {100, 1000}},
                           {{1, 0}, {100, 1000}}, {{10, 100}})};
}

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

// The thread count of a cell "T=<n> ...", -1 if none.
int CellThreads(const std::string& cell) {
  int t = -1;
  if (absl::StartsWith(cell, "T=")) {
    absl::SimpleAtoi(cell.substr(2, cell.find(' ') - 2), &t);
  }
  return t;
}

class Contended : public Scenario {
 public:
  int number() const override { return 2; }

  std::vector<std::string> Notes(const Plan& plan) const override {
    return plan.Pick<std::vector<std::string>>(
        {}, {"quick 2: work (10,100) left out"}, {});
  }

  void Measure(Context& c) override {
    const Plan& plan = c.plan;
    const Params p = ParamsFor(plan);
    std::vector<Case> cases;
    for (int t : p.threads) {
      for (const auto& [in, out] : p.works) {
        std::vector<int> lock_counts = {1};
        if (t / 2 > 1) lock_counts.push_back(t / 2);
        for (int locks : lock_counts) {
          for (const std::string& pin : plan.pins) {
            ForEachMutex([&, in = in, out = out]<typename L>() {
              const bool pinned = pin == "pinned";
              const absl::Duration window = p.window;
              cases.push_back({"contended", ContendedCell(t, in, out, locks),
                               pin, L::kName, [=](Sample* s) {
                                 return RunContended<L>(t, locks, in, out,
                                                        pinned, window, s);
                               }});
            });
          }
        }
      }
    }
    RunCases("2 contended", cases, plan.reps, c.results);
  }

  std::vector<Table> Tables(const Plan& plan) const override {
    (void)plan;
    std::vector<Column> columns = SummaryColumns("op");
    columns.push_back({"min_max", "thr min/max", Column::kFixed, false, false});
    columns.push_back({"cv", "thr cv", Column::kFixed, false, false});
    return {{"contended",
             "2. contended throughput: T threads, cs/out = work units "
             "(~1ns) inside/outside the lock",
             columns}};
  }

  void Targets(const Results& r, std::vector<Verdict>* v) const override {
    for (const auto& [threads, want] :
         std::vector<std::pair<int, double>>{{2, 1.5}, {16, 2.0}, {64, 2.0}}) {
      Tally t;
      for (const Series* s : r.Of("contended")) {
        if (s->impl != "parklot" || CellThreads(s->cell) != threads) continue;
        const double x =
            Ratio(r, "contended", s->cell, s->pin, "parklot", "ops_per_s");
        t.Add(x, x >= want);
      }
      v->push_back({absl::StrFormat("2 contended T=%d: ops/s >= %.1fx glibc",
                                    threads, want),
                    t.Range(), t.Result()});
    }
    Tally t;
    for (const Series* s : r.Of("contended")) {
      if (s->impl != "parklot" || CellThreads(s->cell) < 2) continue;
      const double x =
          Ratio(r, "contended", s->cell, s->pin, "parklot", "cpu_ns_per_op");
      t.Add(x, x <= 1.0);
    }
    v->push_back({"2 contended T>=2: CPU time/op <= glibc", t.Range(),
                  t.Result()});
  }

  // Throughput vs threads: one figure per pinning, a panel per (work, lock
  // count).
  void Plots(const Plan& plan, const Results& r, const std::string& dir,
             const std::string& data,
             std::vector<std::string>* scripts) const override {
    if (r.Of("contended").empty()) return;
    const Params p = ParamsFor(plan);
    for (const std::string& pin : r.Pins("contended")) {
      const std::vector<std::string> impls = r.Impls("contended");
      std::string gp = GnuplotPreamble(
          absl::StrCat(dir, "/contended_", pin, ".png"), 1800, 1000);
      absl::StrAppend(
          &gp, "set multiplot layout 2,", p.works.size(),
          " title 'contended throughput, ", pin,
          " (median ops/s vs threads; oversubscribed beyond ", Cpus().size(),
          " CPUs)'\n",
          "set logscale x 2\nset logscale y\nset xlabel 'threads'\n"
          "set ylabel 'ops/s'\nset format y '%.0s%c'\n"
          "set key outside right top font ',8'\n");
      for (const bool one : {true, false}) {
        for (const auto& [in, out] : p.works) {
          std::vector<std::pair<double, std::string>> rows;
          for (int t : p.threads) {
            const int l = one ? 1 : t / 2;
            if (!one && l <= 1) continue;
            rows.emplace_back(t, ContendedCell(t, in, out, l));
          }
          const std::string file =
              absl::StrFormat("%s/contended_%s_%s_cs%d_out%d.dat", data, pin,
                              one ? "one" : "half", in, out);
          WriteFile(file, DataTable(r, "contended", pin, rows, "ops_per_s", 1, true));
          absl::StrAppend(&gp,
                          absl::StrFormat("set title 'cs=%d out=%d, %s'\n", in,
                                          out, one ? "one lock" : "T/2 locks"),
                          PlotLines(file, impls, true));
        }
      }
      absl::StrAppend(&gp, "unset multiplot\n");
      AddPlotScript(absl::StrCat(data, "/contended_", pin, ".gp"), gp,
                    scripts);
    }
  }
};

PARKLOT_SUITE_SCENARIO(Contended);

}  // namespace
}  // namespace bench
}  // namespace parklot::internal
