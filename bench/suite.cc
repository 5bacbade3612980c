// suite: the side-by-side benchmark suite, one harness for every
// scenario of DESIGN.md's "Measuring". Every implementation is an adapter
// (bench/locks.h) in this binary:
//
//   mutexes     glibc pthread_mutex (normal; the baseline), glibc adaptive
//               (PTHREAD_MUTEX_ADAPTIVE_NP), std::mutex, absl::Mutex, a raw
//               futex mutex ("Futexes Are Tricky"), parklot::Mutex
//   condvars    pthread_cond (baseline), std::condition_variable,
//               absl::CondVar, parklot::CondVar, each with its own mutex
//
// Scenarios:
//   1 uncontended   lock+unlock, trylock+unlock, notify with no waiter (ns/op)
//   2 contended     T threads x (work inside, outside) x one lock or T/2
//                   locks, fixed-duration runs: total ops/s, per-thread
//                   min/max and coefficient of variation, CPU and context
//                   switches per op
//   3 fairness      T threads on one lock, critical section 0 / 1us busy /
//                   10us busy / 100us asleep, delay between: acquire-wait
//                   p50/p99/max, per-thread min/max, Jain's index
//   4 wake-up       schbench style: a waker stamps the time and wakes, the
//                   woken thread measures (pthread_cond, absl::CondVar,
//                   parklot::CondVar, parklot Park/UnparkOne, raw futex);
//                   then bench/futex_schbench (kernel vs shim), if built
//   5 hash scaling  bench/futex_hash (perf bench futex hash): kernel
//                   PR_FUTEX_HASH sizes vs parklot growth policies
//   6 condvar       producer/consumer over a bounded queue; broadcast to
//                   64 and 1024 waiters (time, context switches per waiter)
//   7 programs      real programs under the preload shim vs glibc
//   8 multi-wake    one call releasing many sleepers: N threads parked on
//                   one key (kernel FUTEX_WAKE vs UnparkAll), a write unlock
//                   to N readers, barrier rounds (8, 64, 1024 threads),
//                   `perf bench futex wake-parallel` kernel vs the shim
//
// In-process scenarios (1-4, 6, 8a-c) run every implementation interleaved
// within each repetition (A B C ... A B C), unpinned and pinned (each thread
// to one CPU, round-robin over the CPUs the process may use); tables give
// the median [min - max] over repetitions and the ratio to glibc (8a: to the
// kernel). Per-thread CPU
// time and context switches come from getrusage(RUSAGE_THREAD).
//
//   tools/parklot bench [--quick] [--out DIR]        (builds, then runs this)
//
// This file is the driver: flags, the plan of each mode, the report's
// header, the order of the phases, targets, JSON and plots. The shared
// harness is bench/suite_harness.*, the bookkeeping and report helpers
// bench/suite_report.*, and each scenario is bench/suite_<N>_<name>.cc.
#include <limits.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/subprocess.h"
#include "bench/suite_harness.h"
#include "bench/suite_report.h"

ABSL_FLAG(bool, quick, false,
          "Quick mode (under 2 minutes on 2 cores): 3 repetitions, shorter "
          "runs, a subset of the matrix (the output says which).");
ABSL_FLAG(bool, tiny, false,
          "Smoke-test mode: 1 repetition of a few milliseconds per cell and "
          "the smallest matrix that still prints every scenario's rows.");
ABSL_FLAG(std::string, out, "",
          "Output folder (created): report.txt, suite.json, futex_hash*.json, "
          "summary.md, plots (*.png), their data and scripts. Empty: "
          "terminal only.");
ABSL_FLAG(std::vector<std::string>, scenarios, {},
          "Comma-separated subset of the scenarios 1-8. Default: all.");
ABSL_FLAG(int, repetitions, 0,
          "Repetitions of the in-process scenarios. 0 = 7 (quick: 3, tiny: "
          "1).");
ABSL_FLAG(std::string, shim, "",
          "libparklot_preload.so (scenarios 4b and 7). Default: "
          "../preload/libparklot_preload.so from this binary's folder.");
ABSL_FLAG(double, window_scale, 1.0,
          "Multiplies the measured window of every in-process run (e.g. 4 "
          "for steadier figures, at 4 times the time).");
ABSL_FLAG(bool, plots, true, "Write PNG plots with gnuplot (if installed).");

namespace parklot {
namespace bench {
namespace {

Plan MakePlan() {
  Plan p;
  const bool quick = absl::GetFlag(FLAGS_quick);
  const bool tiny = absl::GetFlag(FLAGS_tiny);
  p.mode = tiny ? "tiny" : quick ? "quick" : "full";
  p.reps = p.Pick(7, 3, 1);
  p.total_target = p.Pick(absl::Minutes(9), absl::Seconds(105),
                          absl::InfiniteDuration());
  if (absl::GetFlag(FLAGS_repetitions) > 0) {
    p.reps = absl::GetFlag(FLAGS_repetitions);
  }
  const double scale = absl::GetFlag(FLAGS_window_scale);
  if (scale > 0) p.window_scale = scale;
  return p;
}

// The report header's notes: the mode's, each scenario's, the scale's.
std::vector<std::string> Notes(const Plan& plan) {
  std::vector<std::string> notes = plan.Pick<std::vector<std::string>>(
      {}, {"quick: 3 repetitions (full: 7), shorter runs"},
      {"tiny: smoke-test sizes, figures meaningless"});
  for (const Scenario* s : Scenarios()) {
    for (const std::string& n : s->Notes(plan)) notes.push_back(n);
  }
  if (plan.window_scale != 1) {
    notes.push_back(absl::StrFormat("windows scaled by %g", plan.window_scale));
  }
  return notes;
}

bool Wanted(int scenario) {
  const std::vector<std::string> only = absl::GetFlag(FLAGS_scenarios);
  if (only.empty()) return true;
  return std::find(only.begin(), only.end(), absl::StrCat(scenario)) !=
         only.end();
}

int Main(const char* argv0) {
  InitMachine();
  // Sleeps in critical sections mean what they say (default slack: 50us).
  prctl(PR_SET_TIMERSLACK, 1000, 0, 0, 0);
  const Plan plan = MakePlan();
  for (const std::string& s : absl::GetFlag(FLAGS_scenarios)) {
    int n;
    const std::vector<Scenario*> all = Scenarios();
    if (!absl::SimpleAtoi(s, &n) ||
        std::none_of(all.begin(), all.end(),
                     [n](const Scenario* x) { return x->number() == n; })) {
      absl::FPrintF(stderr, "suite: --scenarios takes numbers 1-8, not '%s'\n",
                    s);
      return 2;
    }
  }
  std::string out_dir = absl::GetFlag(FLAGS_out);
  // Under `bazel run` the working directory is the runfiles tree: a
  // relative --out means the caller's directory.
  const char* bwd = getenv("BUILD_WORKING_DIRECTORY");
  if (!out_dir.empty() && out_dir[0] != '/' && bwd != nullptr) {
    out_dir = absl::StrCat(bwd, "/", out_dir);
  }
  if (!out_dir.empty()) {
    mkdir(out_dir.c_str(), 0755);
    struct stat st;
    if (stat(out_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      absl::FPrintF(stderr, "suite: cannot create %s\n", out_dir);
      return 2;
    }
  }
  Report report;
  if (!report.Open(out_dir.empty() ? "" : out_dir + "/report.txt")) {
    absl::FPrintF(stderr, "suite: cannot write %s/report.txt\n", out_dir);
    return 2;
  }
  std::string shim = absl::GetFlag(FLAGS_shim);
  if (shim.empty()) shim = SelfDir() + "/../preload/libparklot_preload.so";
  // Absolute: programs run elsewhere get the shim in LD_PRELOAD.
  AbsolutePath(&shim);

  utsname u;
  uname(&u);
  const std::string date = absl::FormatTime("%Y-%m-%d %H:%M %Z", absl::Now(),
                                            absl::LocalTimeZone());
  const std::string load_start = LoadAverage();
  const std::string machine = absl::StrFormat(
      "%s, %d CPUs online (nproc), %d usable; %s %s", CpuModel(),
      sysconf(_SC_NPROCESSORS_ONLN), Cpus().size(), u.sysname, u.release);
  report.Print("parklot benchmark suite, %s mode, %s\n", plan.mode,
               date);
  report.Print("machine: %s\nload average at start: %s\n", machine,
               load_start);
  report.Print(
      "in-process scenarios: %d repetitions, implementations interleaved in "
      "each; unpinned and pinned (round-robin over %d CPUs)\n",
      plan.reps, Cpus().size());
  for (const std::string& n : Notes(plan)) report.Print("note: %s\n", n);
  if (!absl::GetFlag(FLAGS_scenarios).empty()) {
    report.Print("scenarios run: %s (the rest left out by --scenarios)\n",
                 absl::StrJoin(absl::GetFlag(FLAGS_scenarios), ","));
  }

  Results results;
  Context context{plan, results, report, shim, out_dir};
  const std::vector<Scenario*> scenarios = Scenarios();
  for (Scenario* s : scenarios) {
    if (Wanted(s->number())) s->Measure(context);
  }
  report.Print(
      "\nRatios divide each implementation's median by glibc's in the same "
      "cell (for times, lower is better; for rates, higher).\n");
  for (const Scenario* s : scenarios) {
    for (const Table& t : s->Tables(plan)) PrintTable(report, results, t);
  }
  for (Scenario* s : scenarios) {
    if (Wanted(s->number())) s->RunAfterTables(context);
  }

  std::vector<Verdict> targets;
  for (const Scenario* s : scenarios) s->Targets(results, &targets);
  const std::string load_end = LoadAverage();
  report.Print("\n== targets (on this machine; medians) ==\n");
  size_t w0 = 0, w1 = 0;
  for (const Verdict& v : targets) {
    w0 = std::max(w0, v.target.size());
    w1 = std::max(w1, v.figure.size());
  }
  for (const Verdict& v : targets) {
    report.Print("%-*s  %-*s  %s\n", w0, v.target, w1, v.figure, v.result);
  }
  const absl::Duration total =
      absl::Trunc(absl::Now() - SuiteStart(), absl::Seconds(1));
  report.Print("\nload average at end: %s; total time %s\n", load_end,
               absl::FormatDuration(total));

  int rc = 0;
  if (!out_dir.empty()) {
    std::map<std::string, std::string> json_context = {
        {"suite_mode", plan.mode},
        {"machine", machine},
        {"date", date},
        {"load_average_start", load_start},
        {"load_average_end", load_end},
        {"repetitions", absl::StrCat(plan.reps)},
        {"note",
         "one benchmark per scenario/cell/pinning/implementation; iterations "
         "= operations, real_time = wall ns per operation; counters are the "
         "figures of the tables; scenario 5 is in futex_hash*.json"}};
    if (!WriteJson(out_dir + "/suite.json", results, json_context, argv0)) {
      absl::FPrintF(stderr, "suite: cannot write %s/suite.json\n", out_dir);
      rc = 1;
    }
    std::string md = absl::StrFormat(
        "Machine: %s. Date: %s. Mode: %s (%d repetitions). Load average "
        "%s at start, %s at end.\n\n",
        machine, date, plan.mode, plan.reps, load_start, load_end);
    absl::StrAppend(&md, MarkdownTargets(targets));
    WriteFile(out_dir + "/summary.md", md);
    if (absl::GetFlag(FLAGS_plots)) {
      const std::string gnuplot = Which("gnuplot");
      if (gnuplot.empty()) {
        report.Print("plots: gnuplot not installed (tools/setup installs "
                     "gnuplot-nox); data in %s/plotdata\n",
                     out_dir);
      }
      const std::string data = out_dir + "/plotdata";
      mkdir(data.c_str(), 0755);
      std::vector<std::string> scripts;
      for (const Scenario* s : scenarios) {
        s->Plots(plan, results, out_dir, data, &scripts);
      }
      for (const std::string& script : scripts) {
        if (gnuplot.empty()) continue;
        ProgramSpec spec;
        spec.path = gnuplot;
        spec.argv = {gnuplot, script};
        spec.capture_stderr = true;
        spec.timeout = absl::Seconds(60);
        const ChildOutcome o = RunProgram(spec);
        if (!o.ok) {
          report.Print("plot %s: %s\n%s", script, o.error, o.stdout_text);
        }
      }
    }
    report.Print("\nresults in %s: report.txt, suite.json, futex_hash*.json, "
                 "summary.md, *.png (data and gnuplot scripts in plotdata/)\n",
                 out_dir);
  }
  // Any failed measurement makes the exit status non-zero.
  for (const Series* s : results.All()) {
    if (!s->failures.empty()) rc = 1;
  }
  return rc;
}

}  // namespace
}  // namespace bench
}  // namespace parklot

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "parklot's side-by-side benchmark suite.\n"
      "  suite [--quick | --tiny] [--out=DIR] [--scenarios=1,2,...]\n"
      "Usually run through `tools/parklot bench [--quick] [--out DIR]`.");
  const std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    absl::FPrintF(stderr, "suite: unexpected argument '%s'\n", rest[1]);
    return 2;
  }
  return parklot::bench::Main(argv[0]);
}