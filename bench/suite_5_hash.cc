// Scenario 5 of //bench:suite: hash scaling. Runs bench/futex_hash (perf
// bench futex hash): kernel PR_FUTEX_HASH sizes vs parklot growth
// policies, as it is; its tables are copied into the report and its rows
// parsed for the plots and targets.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "bench/suite_harness.h"
#include "hash/bucket_table.h"

ABSL_FLAG(std::string, futex_hash, "",
          "The futex_hash binary (scenario 5). Default: beside this binary.");

namespace parklot::internal {
namespace bench {
namespace {

// The configuration the targets judge: the default growth policy.
std::string DefaultPolicy() {
  return absl::StrCat("parklot/", GrowthPolicyName(TableOptions().policy));
}

struct Params {
  std::vector<std::string> args, pinned_args;
};

Params ParamsFor(const Plan& plan) {
  using S = std::vector<std::string>;
  const std::string quick_configs =
      "--configs=kernel/default,kernel/global,kernel/1024,parklot/adaptive,"
      "parklot/threads,parklot/cpus,parklot/fixed:1024";
  const S tiny = {"--threads=1,3", "--keys=32", "--repetitions=1",
                  "--duration=5ms",
                  "--configs=kernel/default,parklot/adaptive,parklot/threads,"
                  "parklot/fixed:16"};
  return {
      plan.Pick<S>({"--threads=2,32,256,1024", "--repetitions=7",
                    "--duration=60ms"},
                   {"--threads=2,32,256,1024", "--repetitions=3",
                    "--duration=30ms", quick_configs},
                   tiny),
      plan.Pick<S>(
          {"--threads=2,32,256,1024", "--repetitions=7", "--duration=60ms",
           "--configs=kernel/default,kernel/global,parklot/adaptive,"
           "parklot/threads,parklot/cpus,parklot/fixed:1024"},
          {"--threads=2,1024", "--repetitions=3", "--duration=30ms",
           quick_configs},
          tiny)};
}

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

class HashScaling : public Scenario {
 public:
  int number() const override { return 5; }

  std::vector<std::string> Notes(const Plan& plan) const override {
    return plan.Pick<std::vector<std::string>>(
        {"scenario 5 pinned: 6 of the 13 configurations (kernel/default, "
         "kernel/global, parklot/adaptive, parklot/threads, parklot/cpus, "
         "parklot/fixed:1024)"},
        {"quick 5: 7 of 13 configurations; pinned at 2 and 1024 threads "
         "only"},
        {});
  }

  void RunAfterTables(Context& c) override {
    std::string bin = absl::GetFlag(FLAGS_futex_hash);
    if (bin.empty()) bin = SelfDir() + "/futex_hash";
    AbsolutePath(&bin);
    if (!Executable(bin)) {
      c.report.Print("\n== 5. hash scaling ==\nFAILED: futex_hash not found "
                     "at %s (--futex_hash)\n",
                     bin);
      c.results.Get("hash", "N=?", "unpinned", DefaultPolicy())
          .failures.push_back("futex_hash not found");
      return;
    }
    const Params p = ParamsFor(c.plan);
    for (const std::string& pin : c.plan.pins) {
      std::vector<std::string> args =
          pin == "pinned" ? p.pinned_args : p.args;
      if (pin == "pinned") args.push_back("--pin");
      if (!c.out_dir.empty()) {
        args.push_back(absl::StrCat("--json_out=", c.out_dir, "/futex_hash",
                                    pin == "pinned" ? "_pinned" : "",
                                    ".json"));
      }
      std::string text;
      RunOtherBench(c.report,
                    absl::StrCat("5. hash scaling, perf bench futex hash "
                                 "style (bench/futex_hash), ",
                                 pin),
                    bin, args, absl::Minutes(8), &text);
      ParseFutexHash(text, pin, c.results);
    }
  }

  void Targets(const Results& r, std::vector<Verdict>* v) const override {
    Tally within, ahead;
    for (const std::string& pin : r.Pins("hash")) {
      for (const std::string& cell : r.Cells("hash")) {
        const Series* g = r.Find("hash", cell, pin, DefaultPolicy());
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
    v->push_back({absl::StrCat("5 hash: ", DefaultPolicy(),
                               " within 5% of the best fixed table"),
                  within.Range(), within.Result()});
    v->push_back({absl::StrCat("5 hash: ", DefaultPolicy(),
                               " ahead of the best kernel size at every N"),
                  ahead.Range(), ahead.Result()});
  }

  // ops/s vs threads per configuration.
  void Plots(const Plan& plan, const Results& r, const std::string& dir,
             const std::string& data,
             std::vector<std::string>* scripts) const override {
    (void)plan;
    if (r.Of("hash").empty()) return;
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
      WriteFile(file, DataTable(r, "hash", pin, rows, "ops_per_s", 1, true));
      absl::StrAppend(&gp, absl::StrFormat("set title '%s'\n", pin),
                      PlotLines(file, r.Impls("hash"), true));
    }
    absl::StrAppend(&gp, "unset multiplot\n");
    AddPlotScript(data + "/hash_scaling.gp", gp, scripts);
  }
};

PARKLOT_SUITE_SCENARIO(HashScaling);

}  // namespace
}  // namespace bench
}  // namespace parklot::internal
