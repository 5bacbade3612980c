// The bookkeeping of //bench:suite: latency histograms, the store of
// measured samples (one series per scenario x cell x pinning x
// implementation), and their reports: terminal tables with medians, ranges
// and ratios to glibc, Google Benchmark JSON, gnuplot data.
#ifndef PARKLOT_BENCH_SUITE_REPORT_H_
#define PARKLOT_BENCH_SUITE_REPORT_H_

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"

namespace parklot {
namespace bench {

// Nanosecond values in log-linear buckets: exact below 64, then 32 buckets
// per power of two (about 3% resolution). Not thread-safe: one per thread,
// merged afterwards.
class Histogram {
 public:
  Histogram();
  void Add(int64_t ns);
  void Merge(const Histogram& other);
  uint64_t count() const { return count_; }
  int64_t max() const { return max_; }
  // The value at quantile q in [0, 1] (the bucket's midpoint; the exact
  // maximum for q = 1). 0 when empty.
  int64_t Percentile(double q) const;

 private:
  static constexpr int kLinear = 64;
  static constexpr int kSubBits = 5;
  static constexpr int kBuckets = kLinear + (63 - 6 + 1) * (1 << kSubBits);
  static int Index(uint64_t v);
  static int64_t Midpoint(int index);
  std::vector<uint64_t> buckets_;
  uint64_t count_ = 0;
  int64_t max_ = 0;
};

// One measurement: its figures by name, and what Google Benchmark's JSON
// wants (iterations, wall and CPU seconds).
struct Sample {
  int repetition = 0;
  double iterations = 0;
  double real_s = 0;
  double cpu_s = 0;
  std::map<std::string, double> metrics;
};

// Every repetition of one implementation in one configuration.
struct Series {
  std::string scenario;  // "contended", ...
  std::string cell;      // "T=16 cs=10 out=100 locks=1"
  std::string pin;       // "unpinned", "pinned" or ""
  std::string impl;      // "glibc", "parklot", ...
  std::vector<Sample> samples;
  std::vector<std::string> failures;
  std::string skipped;  // why it never ran (not installed, time budget)
  bool in_json = true;  // false: figures kept by another tool's JSON

  bool has(const std::string& metric) const;
  double Median(const std::string& metric) const;
  double Min(const std::string& metric) const;
  double Max(const std::string& metric) const;
};

class Results {
 public:
  // The series for this key, created (in order of first use) if new.
  Series& Get(const std::string& scenario, const std::string& cell,
              const std::string& pin, const std::string& impl);
  const Series* Find(const std::string& scenario, const std::string& cell,
                     const std::string& pin, const std::string& impl) const;
  // All series of a scenario, in order of creation.
  std::vector<const Series*> Of(const std::string& scenario) const;
  // Every series, in order of creation.
  std::vector<const Series*> All() const;
  // Distinct values, in order of first appearance, within a scenario.
  std::vector<std::string> Cells(const std::string& scenario) const;
  std::vector<std::string> Pins(const std::string& scenario) const;
  std::vector<std::string> Impls(const std::string& scenario) const;

 private:
  std::vector<std::unique_ptr<Series>> all_;
  std::map<std::string, Series*> index_;
};

// Everything printed goes to standard output and to the report file.
class Report {
 public:
  // Also copy to `path` ("" = standard output only).
  bool Open(const std::string& path);
  ~Report();
  template <typename... Args>
  void Print(const absl::FormatSpec<Args...>& format, const Args&... args) {
    Write(absl::StrFormat(format, args...));
  }
  void Write(const std::string& text);

 private:
  FILE* file_ = nullptr;
};

// How a table column shows a metric.
struct Column {
  enum Format { kRate, kTime, kCount, kFixed };
  std::string metric;
  std::string header;
  Format format = kFixed;
  bool range = false;  // show [min - max] after the median
  bool ratio = false;  // add the ratio of the median to the baseline's
};

// "12.3M", "456k", "7.89"
std::string Si(double v);
// 1234 ns as "1.23us"; "512ns", "3.40ms", "1.20s"
std::string HumanNs(double ns);
std::string FormatValue(double v, Column::Format format);

// One table per pinning: a row per (cell, implementation) with the median
// [min - max] and the ratio to `baseline` of the columns that ask for it.
// Series that failed or were skipped say so in their row.
void PrintTable(Report& report, const Results& results,
                const std::string& scenario, const std::string& title,
                const std::vector<Column>& columns,
                const std::string& baseline = "glibc");

// A scenario's table: PrintTable's arguments, and notes printed under it
// ("note: ...") when the scenario has runs.
struct Table {
  std::string scenario;
  std::string title;
  std::vector<Column> columns;
  std::vector<std::string> notes;
  std::string baseline = "glibc";  // what the ratios divide by
};
void PrintTable(Report& report, const Results& results, const Table& table);

// Writes every series (each repetition, then median/min/max aggregates) in
// Google Benchmark's JSON format, with `context` as custom context.
bool WriteJson(const std::string& path, const Results& results,
               const std::map<std::string, std::string>& context,
               const char* argv0);

// ---------------------------------------------------------------------------
// Targets, judged on the medians.

struct Verdict {
  std::string target, figure, result;
};

// Counts cells meeting a target and the range of their ratios.
struct Tally {
  int met = 0, total = 0;
  std::vector<double> all;
  // Counts `r` (if finite), as met if `ok`.
  void Add(double r, bool ok);
  // "m/n cells; median Ax, Bx - Cx" ("no data" if none), `unit` after
  // each figure.
  std::string Range(const char* unit = "x") const;
  // "met", "partly", "MISSED", or "n/a" if none.
  std::string Result() const;
};

// The median of `metric` of `impl` over that of `base` in the same
// scenario, cell and pinning; NaN if either has no samples.
double Ratio(const Results& r, const std::string& scenario,
             const std::string& cell, const std::string& pin,
             const std::string& impl, const std::string& metric,
             const std::string& base = "glibc");

// The targets as a Markdown table (summary.md).
std::string MarkdownTargets(const std::vector<Verdict>& v);

// ---------------------------------------------------------------------------
// Plots: gnuplot scripts writing PNGs.

// The start of a script writing a `w` x `h` PNG to `png`.
std::string GnuplotPreamble(const std::string& png, int w, int h);

// A fixed colour (and dash) per implementation, the same in every plot:
// glibc black, parklot red, kernel configurations dashed; others by
// `column` from a palette.
std::string LineStyle(const std::string& impl, int column);

// A table: first column `x`, one column per implementation of `scenario`
// (medians of `metric` times `scale` in the cell of each row), '?' where
// missing (gnuplot skips it); with `spread`, three columns per
// implementation: median, min and max (for PlotLines(..., true)).
std::string DataTable(const Results& r, const std::string& scenario,
                      const std::string& pin,
                      const std::vector<std::pair<double, std::string>>& rows,
                      const std::string& metric, double scale = 1,
                      bool spread = false);

// A `plot` command: one line per implementation, column i + 2 of `file`;
// with `spread`, columns 3i + 2 (median), 3i + 3 and 3i + 4 (min, max)
// drawn as error bars.
std::string PlotLines(const std::string& file,
                      const std::vector<std::string>& impls,
                      bool spread = false);

}  // namespace bench
}  // namespace parklot

#endif  // PARKLOT_BENCH_SUITE_REPORT_H_
