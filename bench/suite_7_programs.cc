// Scenario 7 of //bench:suite: real programs, unmodified, under the
// preload shim vs glibc (wall time, or stockfish's nodes/s).
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "bench/subprocess.h"
#include "bench/suite_harness.h"

ABSL_FLAG(std::vector<std::string>, programs, {},
          "Comma-separated subset of scenario 7's programs, by first word "
          "(stockfish, sysbench, pigz, xz, zstd, sort). Default: all.");
ABSL_FLAG(absl::Duration, programs_budget, absl::ZeroDuration(),
          "Wall-time budget of scenario 7; repetitions (and, once spent, "
          "programs) stop there. 0 = 170s (quick: 35s).");

namespace parklot::internal {
namespace bench {
namespace {

struct Program {
  std::string name;  // as shown: "stockfish bench 16 1 12"
  std::string path;  // found in PATH unless it has a '/'
  std::vector<std::string> args;
  bool data_on_stdin = false;  // the generated input on standard input
  bool data_arg = false;       // the input file as the last argument
  bool rate = false;           // stockfish: parse "Nodes/second"
};

struct Params {
  int reps = 7;
  absl::Duration budget;
  size_t data_bytes = 0;
  std::vector<Program> programs;
};

std::vector<Program> AllPrograms(const std::string& mode) {
  std::vector<Program> v;
  const bool full = mode == "full";
  const std::string depth = full ? "12" : "8";
  for (const char* t : {"1", "2", "8"}) {
    v.push_back({absl::StrCat("stockfish bench 16 ", t, " ", depth),
                 "/usr/games/stockfish",
                 {"bench", "16", t, depth},
                 false,
                 false,
                 true});
  }
  v.push_back({"sysbench mutex", "sysbench",
               {"mutex", "--threads=8", "--mutex-num=64",
                full ? "--mutex-locks=20000" : "--mutex-locks=5000", "run"}});
  v.push_back({"sysbench threads", "sysbench",
               {"threads", "--threads=16", "--time=0",
                full ? "--events=300" : "--events=60", "run"}});
  v.push_back({"pigz -p 4", "pigz", {"-p", "4", "-c"}, true});
  v.push_back(
      {"xz -T4 -3", "xz", {"-T4", "-3", "--block-size=1MiB", "-c"}, true});
  v.push_back({"zstd -T4 -12", "zstd", {"-T4", "-12", "-c", "-q"}, true});
  v.push_back({"sort --parallel=4", "sort",
               {"--parallel=4", "-S", "8M"},
               false,
               true});
  return v;
}

Params ParamsFor(const Plan& plan) {
  Params p;
  p.reps = plan.Pick(7, 1, 1);
  p.budget = plan.Pick(absl::Seconds(170), absl::Seconds(35),
                       absl::Seconds(60));
  if (absl::GetFlag(FLAGS_programs_budget) > absl::ZeroDuration()) {
    p.budget = absl::GetFlag(FLAGS_programs_budget);
  }
  p.data_bytes = plan.Pick<size_t>(12 << 20, 3 << 20, 256 << 10);
  std::vector<Program> programs = AllPrograms(plan.mode);
  const std::vector<std::string> only = absl::GetFlag(FLAGS_programs);
  if (plan.mode == "tiny" && only.empty()) {
    programs.erase(std::remove_if(programs.begin(), programs.end(),
                                  [](const Program& x) {
                                    return !absl::StartsWith(x.name, "sort");
                                  }),
                   programs.end());
  }
  for (const Program& x : programs) {
    const std::string first = x.name.substr(0, x.name.find(' '));
    if (only.empty() ||
        std::find(only.begin(), only.end(), first) != only.end()) {
      p.programs.push_back(x);
    }
  }
  return p;
}

// The speed of the program of `cell` under the shim relative to glibc
// (> 1: faster), by nodes/s where it reports them, else by wall time; NaN
// without samples of both.
double Speed(const Results& r, const std::string& cell) {
  const Series* g = r.Find("programs", cell, "", "glibc");
  const Series* p = r.Find("programs", cell, "", "parklot");
  if (g == nullptr || p == nullptr || g->samples.empty() ||
      p->samples.empty()) {
    return NAN;
  }
  return g->has("nodes_per_s")
             ? p->Median("nodes_per_s") / g->Median("nodes_per_s")
             : g->Median("wall_ns") / p->Median("wall_ns");
}

bool WriteInput(const std::string& path, size_t bytes) {
  FILE* f = fopen(path.c_str(), "w");
  if (f == nullptr) return false;
  size_t written = 0;
  // Runs of consecutive numbers, restarting higher: compresses, not
  // trivially; sorts with many duplicates.
  for (long i = 1; written < bytes; ++i) {
    for (long j = i * 1000; j < i * 1000 + 13000 && written < bytes; ++j) {
      char buf[32];
      const int n = snprintf(buf, sizeof buf, "%ld\n", j);
      fwrite(buf, 1, static_cast<size_t>(n), f);
      written += static_cast<size_t>(n);
    }
  }
  return fclose(f) == 0;
}

void RunPrograms(const Plan& plan, const Params& prm,
                 const std::string& shim, const std::string& work_dir,
                 Report& report, Results& results) {
  const std::string input = work_dir + "/programs_input.txt";
  bool have_input = false;
  std::vector<std::pair<const Program*, std::string>> runnable;
  for (const Program& p : prm.programs) {
    const std::string path = Which(p.path);
    if (path.empty()) {
      for (const char* impl : {"glibc", "parklot"}) {
        results.Get("programs", p.name, "", impl).skipped =
            absl::StrCat(p.path, " not installed (tools/setup installs it)");
      }
      continue;
    }
    runnable.emplace_back(&p, path);
  }
  if (shim.empty() || access(shim.c_str(), R_OK) != 0) {
    for (const auto& [p, path] : runnable) {
      results.Get("programs", p->name, "", "glibc").skipped = "no shim";
      results.Get("programs", p->name, "", "parklot").skipped =
          absl::StrCat("shim not found: '", shim, "' (--shim)");
    }
    return;
  }
  if (!runnable.empty()) {
    have_input = WriteInput(input, prm.data_bytes);
    if (!have_input) {
      report.Print("programs: cannot write %s\n", input);
      return;
    }
  }
  const absl::Time start = absl::Now();
  Progress& progress = SuiteProgress();
  const absl::Time budget_end =
      std::min(start + prm.budget, SuiteStart() + plan.total_target);
  progress.Start("7 programs",
                   runnable.size() * 2 * static_cast<size_t>(prm.reps));
  int reps_done = 0;
  absl::Duration rep_time;
  for (int rep = 0; rep < prm.reps; ++rep) {
    // Another repetition only if it should fit in the budget (with a
    // margin: the machine's load varies).
    if (rep > 0 && absl::Now() + rep_time * 1.25 > budget_end) break;
    const absl::Time rep_start = absl::Now();
    for (const auto& [p, path] : runnable) {
      for (const char* impl : {"glibc", "parklot"}) {
        Series& s = results.Get("programs", p->name, "", impl);
        if (rep == 0 && absl::Now() > budget_end) {
          s.skipped = "time budget spent";
          progress.Step("");
          continue;
        }
        ProgramSpec spec;
        spec.path = path;
        spec.argv = {path};
        spec.argv.insert(spec.argv.end(), p->args.begin(), p->args.end());
        if (p->data_arg) spec.argv.push_back(input);
        if (p->data_on_stdin) spec.stdin_path = input;
        spec.discard_stdout = !p->rate && !absl::StartsWith(p->name, "sysbench");
        spec.capture_stderr = p->rate;
        spec.timeout = absl::Seconds(300);
        if (std::string(impl) == "parklot") {
          spec.set_env = {absl::StrCat("LD_PRELOAD=", shim)};
        } else {
          spec.unset_env = {"LD_PRELOAD"};
        }
        const ChildOutcome out = RunProgram(spec);
        if (!out.ok) {
          s.failures.push_back(out.error);
        } else {
          Sample x;
          x.repetition = rep;
          x.iterations = 1;
          x.real_s = absl::ToDoubleSeconds(out.wall);
          x.cpu_s = absl::ToDoubleSeconds(out.cpu);
          Put(&x, "wall_ns", absl::ToDoubleNanoseconds(out.wall));
          Put(&x, "cpu_ns", absl::ToDoubleNanoseconds(out.cpu));
          Put(&x, "vcsw", static_cast<double>(out.voluntary_switches));
          Put(&x, "ivcsw", static_cast<double>(out.involuntary_switches));
          if (p->rate) {
            // "Nodes/second    : 1234567"
            const size_t at = out.stdout_text.find("Nodes/second");
            double nps = 0;
            if (at != std::string::npos) {
              const size_t colon = out.stdout_text.find(':', at);
              const size_t eol = out.stdout_text.find('\n', at);
              absl::SimpleAtod(
                  absl::StripAsciiWhitespace(out.stdout_text.substr(
                      colon + 1, eol == std::string::npos ? std::string::npos
                                                          : eol - colon - 1)),
                  &nps);
            }
            if (nps > 0) {
              Put(&x, "nodes_per_s", nps);
            } else {
              s.failures.push_back("no Nodes/second in its output");
              progress.Step("");
              continue;
            }
          }
          s.samples.push_back(x);
        }
        progress.Step(absl::StrFormat("repetition %d: %s (%s)", rep + 1,
                                        p->name, impl));
      }
    }
    rep_time = absl::Now() - rep_start;
    ++reps_done;
  }
  progress.Done();
  if (have_input) unlink(input.c_str());
  report.Print(
      "\nprograms: %d repetition(s) of %d asked (budget %s, or until the "
      "whole run reaches %s), input %s bytes\n",
      reps_done, prm.reps, absl::FormatDuration(prm.budget),
      absl::FormatDuration(plan.total_target),
      Si(static_cast<double>(prm.data_bytes)));
}

// ---------------------------------------------------------------------------

class Programs : public Scenario {
 public:
  int number() const override { return 7; }

  std::vector<std::string> Notes(const Plan& plan) const override {
    return plan.Pick<std::vector<std::string>>(
        {"scenario 7: repetitions stop when the time budget is spent"},
        {"quick 7: stockfish depth 8 (full: 12), smaller inputs, 1 "
         "repetition"},
        {});
  }

  void RunAfterTables(Context& c) override {
    RunPrograms(c.plan, ParamsFor(c.plan), c.shim,
                c.out_dir.empty() ? "/tmp" : c.out_dir, c.report, c.results);
    PrintTable(c.report, c.results, "programs",
               "7. real programs, unmodified: glibc vs parklot (LD_PRELOAD "
               "shim); times are wall clock",
               {{"wall_ns", "wall", Column::kTime, true, true},
                {"nodes_per_s", "nodes/s", Column::kRate, true, true},
                {"cpu_ns", "cpu", Column::kTime, false, true},
                {"vcsw", "vcsw", Column::kCount, false, false},
                {"ivcsw", "ivcsw", Column::kCount, false, false}});
  }

  void Targets(const Results& r, std::vector<Verdict>* v) const override {
    Tally t;
    for (const std::string& cell : r.Cells("programs")) {
      const double speed = Speed(r, cell);
      t.Add(speed, speed >= 1.0);
    }
    v->push_back({"7 programs: speed under the shim >= glibc (no target, "
                  "for reference)",
                  t.Range(), t.Result()});
  }

  // Speed under the shim relative to glibc.
  void Plots(const Plan& plan, const Results& r, const std::string& dir,
             const std::string& data,
             std::vector<std::string>* scripts) const override {
    (void)plan;
    if (r.Of("programs").empty()) return;
    std::string t = "# program speed\n";
    int rows = 0;
    for (const std::string& cell : r.Cells("programs")) {
      const double speed = Speed(r, cell);
      if (!std::isfinite(speed)) continue;
      absl::StrAppend(&t, "\"", cell, "\" ", absl::StrFormat("%.4g", speed),
                      "\n");
      ++rows;
    }
    if (rows == 0) return;
    const std::string file = data + "/programs.dat";
    WriteFile(file, t);
    std::string gp = GnuplotPreamble(dir + "/programs.png", 1200, 700);
    absl::StrAppend(
        &gp,
        "set title 'real programs under the shim: speed relative to glibc "
        "(> 1 = faster; nodes/s for stockfish, 1/wall time otherwise)'\n",
        "set style data histograms\nset style fill solid 0.8 border -1\n"
        "set boxwidth 0.8\nset yrange [0:*]\nset xtics rotate by -30\n"
        "set key off\n",
        absl::StrFormat("set xrange [-0.6:%f]\n", rows - 0.4),
        absl::StrFormat("plot '%s' using 2:xtic(1), 1 with lines dt 2 lc "
                        "rgb 'black'\n",
                        file));
    AddPlotScript(data + "/programs.gp", gp, scripts);
  }
};

PARKLOT_SUITE_SCENARIO(Programs);

}  // namespace
}  // namespace bench
}  // namespace parklot::internal
