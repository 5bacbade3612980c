#include "bench/suite_report.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "benchmark/benchmark.h"

namespace parklot {
namespace bench {

// ---------------------------------------------------------------------------
// Histogram.

Histogram::Histogram() : buckets_(kBuckets, 0) {}

int Histogram::Index(uint64_t v) {
  if (v < static_cast<uint64_t>(kLinear)) return static_cast<int>(v);
  const int e = 63 - __builtin_clzll(v);  // >= 6
  const int sub = static_cast<int>((v >> (e - kSubBits)) & ((1 << kSubBits) - 1));
  return kLinear + (e - 6) * (1 << kSubBits) + sub;
}

int64_t Histogram::Midpoint(int index) {
  if (index < kLinear) return index;
  const int e = (index - kLinear) / (1 << kSubBits) + 6;
  const int sub = (index - kLinear) % (1 << kSubBits);
  const uint64_t low = (uint64_t{1} << kSubBits | static_cast<uint64_t>(sub))
                       << (e - kSubBits);
  const uint64_t width = uint64_t{1} << (e - kSubBits);
  return static_cast<int64_t>(low + width / 2);
}

void Histogram::Add(int64_t ns) {
  if (ns < 0) ns = 0;
  ++buckets_[static_cast<size_t>(Index(static_cast<uint64_t>(ns)))];
  ++count_;
  max_ = std::max(max_, ns);
}

void Histogram::Merge(const Histogram& other) {
  for (size_t i = 0; i < buckets_.size(); ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  max_ = std::max(max_, other.max_);
}

int64_t Histogram::Percentile(double q) const {
  if (count_ == 0) return 0;
  if (q >= 1) return max_;
  uint64_t rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_)));
  rank = std::max<uint64_t>(rank, 1);
  uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += buckets_[static_cast<size_t>(i)];
    if (seen >= rank) return std::min(Midpoint(i), max_);
  }
  return max_;
}

// ---------------------------------------------------------------------------
// Series and results.

namespace {

std::vector<double> Values(const Series& s, const std::string& metric) {
  std::vector<double> v;
  for (const Sample& x : s.samples) {
    auto it = x.metrics.find(metric);
    if (it != x.metrics.end() && std::isfinite(it->second)) v.push_back(it->second);
  }
  return v;
}

double MedianOf(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string Key(const std::string& scenario, const std::string& cell,
                const std::string& pin, const std::string& impl) {
  return absl::StrCat(scenario, "\x1f", cell, "\x1f", pin, "\x1f", impl);
}

void AddUnique(std::vector<std::string>* v, const std::string& s) {
  if (std::find(v->begin(), v->end(), s) == v->end()) v->push_back(s);
}

}  // namespace

bool Series::has(const std::string& metric) const {
  return !Values(*this, metric).empty();
}

double Series::Median(const std::string& metric) const {
  return MedianOf(Values(*this, metric));
}

double Series::Min(const std::string& metric) const {
  const std::vector<double> v = Values(*this, metric);
  return v.empty() ? NAN : *std::min_element(v.begin(), v.end());
}

double Series::Max(const std::string& metric) const {
  const std::vector<double> v = Values(*this, metric);
  return v.empty() ? NAN : *std::max_element(v.begin(), v.end());
}

Series& Results::Get(const std::string& scenario, const std::string& cell,
                     const std::string& pin, const std::string& impl) {
  const std::string key = Key(scenario, cell, pin, impl);
  auto it = index_.find(key);
  if (it != index_.end()) return *it->second;
  all_.push_back(std::make_unique<Series>());
  Series* s = all_.back().get();
  s->scenario = scenario;
  s->cell = cell;
  s->pin = pin;
  s->impl = impl;
  index_[key] = s;
  return *s;
}

const Series* Results::Find(const std::string& scenario,
                            const std::string& cell, const std::string& pin,
                            const std::string& impl) const {
  auto it = index_.find(Key(scenario, cell, pin, impl));
  return it == index_.end() ? nullptr : it->second;
}

std::vector<const Series*> Results::Of(const std::string& scenario) const {
  std::vector<const Series*> v;
  for (const auto& s : all_) {
    if (s->scenario == scenario) v.push_back(s.get());
  }
  return v;
}

std::vector<const Series*> Results::All() const {
  std::vector<const Series*> v;
  for (const auto& s : all_) v.push_back(s.get());
  return v;
}

std::vector<std::string> Results::Cells(const std::string& scenario) const {
  std::vector<std::string> v;
  for (const Series* s : Of(scenario)) AddUnique(&v, s->cell);
  return v;
}

std::vector<std::string> Results::Pins(const std::string& scenario) const {
  std::vector<std::string> v;
  for (const Series* s : Of(scenario)) AddUnique(&v, s->pin);
  return v;
}

std::vector<std::string> Results::Impls(const std::string& scenario) const {
  std::vector<std::string> v;
  for (const Series* s : Of(scenario)) AddUnique(&v, s->impl);
  return v;
}

// ---------------------------------------------------------------------------
// Report.

bool Report::Open(const std::string& path) {
  if (path.empty()) return true;
  file_ = fopen(path.c_str(), "w");
  return file_ != nullptr;
}

Report::~Report() {
  if (file_ != nullptr) fclose(file_);
}

void Report::Write(const std::string& text) {
  fputs(text.c_str(), stdout);
  fflush(stdout);
  if (file_ != nullptr) {
    fputs(text.c_str(), file_);
    fflush(file_);
  }
}

// ---------------------------------------------------------------------------
// Formatting.

std::string Si(double v) {
  if (!std::isfinite(v)) return "-";
  const double a = std::fabs(v);
  if (a >= 1e9) return absl::StrFormat("%.2fG", v / 1e9);
  if (a >= 1e6) return absl::StrFormat("%.2fM", v / 1e6);
  if (a >= 1e4) return absl::StrFormat("%.1fk", v / 1e3);
  if (a >= 100) return absl::StrFormat("%.0f", v);
  if (a >= 10) return absl::StrFormat("%.1f", v);
  return absl::StrFormat("%.2f", v);
}

std::string HumanNs(double ns) {
  if (!std::isfinite(ns)) return "-";
  if (ns >= 1e9) return absl::StrFormat("%.2fs", ns / 1e9);
  if (ns >= 1e6) return absl::StrFormat("%.2fms", ns / 1e6);
  if (ns >= 1e4) return absl::StrFormat("%.1fus", ns / 1e3);
  if (ns >= 1e3) return absl::StrFormat("%.2fus", ns / 1e3);
  if (ns >= 100) return absl::StrFormat("%.0fns", ns);
  return absl::StrFormat("%.1fns", ns);
}

std::string FormatValue(double v, Column::Format format) {
  if (!std::isfinite(v)) return "-";
  switch (format) {
    case Column::kRate:
      return Si(v);
    case Column::kTime:
      return HumanNs(v);
    case Column::kCount:
      if (std::fabs(v) >= 1e4) return Si(v);
      return absl::StrFormat(std::fabs(v) >= 100 ? "%.0f" : "%.3g", v);
    case Column::kFixed:
      return absl::StrFormat("%.2f", v);
  }
  return "?";
}

void PrintTable(Report& report, const Results& results,
                const std::string& scenario, const std::string& title,
                const std::vector<Column>& columns,
                const std::string& baseline) {
  const std::vector<const Series*> all = results.Of(scenario);
  if (all.empty()) {
    report.Print("\n== %s ==\n(no runs)\n", title);
    return;
  }
  size_t cell_w = 4, impl_w = 4;
  for (const Series* s : all) {
    cell_w = std::max(cell_w, s->cell.size());
    impl_w = std::max(impl_w, s->impl.size());
  }
  // Text of every row first, to size the columns.
  struct Row {
    std::string cell, impl;
    std::vector<std::string> fields;
    std::string note;
  };
  for (const std::string& pin : results.Pins(scenario)) {
    std::vector<std::string> header;
    for (const Column& c : columns) {
      header.push_back(c.range ? absl::StrCat(c.header, " [min - max]")
                               : c.header);
      if (c.ratio) header.push_back(absl::StrCat("x ", baseline));
    }
    std::vector<Row> rows;
    for (const std::string& cell : results.Cells(scenario)) {
      const Series* base = results.Find(scenario, cell, pin, baseline);
      for (const std::string& impl : results.Impls(scenario)) {
        const Series* s = results.Find(scenario, cell, pin, impl);
        if (s == nullptr) continue;
        Row row{cell, impl, {}, ""};
        if (s->samples.empty()) {
          row.note = !s->skipped.empty()
                         ? absl::StrCat("skipped: ", s->skipped)
                         : absl::StrCat("FAILED: ", s->failures.empty()
                                                        ? "no result"
                                                        : s->failures.front());
          rows.push_back(row);
          continue;
        }
        for (const Column& c : columns) {
          if (!s->has(c.metric)) {
            row.fields.push_back("-");
            if (c.ratio) row.fields.push_back("-");
            continue;
          }
          const double med = s->Median(c.metric);
          std::string f = FormatValue(med, c.format);
          if (c.range) {
            absl::StrAppend(&f, " [", FormatValue(s->Min(c.metric), c.format),
                            " - ", FormatValue(s->Max(c.metric), c.format),
                            "]");
          }
          row.fields.push_back(f);
          if (c.ratio) {
            const double b = base != nullptr && !base->samples.empty()
                                 ? base->Median(c.metric)
                                 : NAN;
            row.fields.push_back(std::isfinite(b) && b != 0 &&
                                         std::isfinite(med)
                                     ? absl::StrFormat("%.2fx", med / b)
                                     : "-");
          }
        }
        if (!s->failures.empty()) {
          row.note = absl::StrFormat("(%d runs failed: %s)",
                                     s->failures.size(), s->failures.front());
        }
        rows.push_back(row);
      }
    }
    std::vector<size_t> w(header.size());
    for (size_t i = 0; i < header.size(); ++i) w[i] = header[i].size();
    for (const Row& r : rows) {
      for (size_t i = 0; i < r.fields.size() && i < w.size(); ++i) {
        w[i] = std::max(w[i], r.fields[i].size());
      }
    }
    report.Print("\n== %s%s ==\n", title,
                 pin.empty() ? "" : absl::StrCat(" (", pin, ")"));
    std::string line = absl::StrFormat("%-*s  %-*s", cell_w, "cell", impl_w,
                                       "impl");
    for (size_t i = 0; i < header.size(); ++i) {
      absl::StrAppend(&line, "  ", absl::StrFormat("%*s", w[i], header[i]));
    }
    report.Print("%s\n", line);
    std::string last_cell;
    for (const Row& r : rows) {
      std::string l = absl::StrFormat("%-*s  %-*s", cell_w, r.cell, impl_w,
                                      r.impl);
      for (size_t i = 0; i < r.fields.size(); ++i) {
        absl::StrAppend(&l, "  ", absl::StrFormat("%*s", w[i], r.fields[i]));
      }
      if (!r.note.empty()) absl::StrAppend(&l, "  ", r.note);
      report.Print("%s\n", l);
    }
  }
}

void PrintTable(Report& report, const Results& results, const Table& table) {
  PrintTable(report, results, table.scenario, table.title, table.columns,
             table.baseline);
  if (results.Of(table.scenario).empty()) return;
  for (const std::string& n : table.notes) report.Print("note: %s\n", n);
}

// ---------------------------------------------------------------------------
// Targets.

void Tally::Add(double r, bool ok) {
  if (!std::isfinite(r)) return;
  ++total;
  met += ok;
  all.push_back(r);
}

std::string Tally::Range(const char* unit) const {
  if (total == 0) return "no data";
  const double med = MedianOf(all);
  const auto [lo, hi] = std::minmax_element(all.begin(), all.end());
  return absl::StrFormat("%d/%d cells; median %.2f%s, %.2f%s - %.2f%s", met,
                         total, med, unit, *lo, unit, *hi, unit);
}

std::string Tally::Result() const {
  if (total == 0) return "n/a";
  return met == total ? "met" : met == 0 ? "MISSED" : "partly";
}

double Ratio(const Results& r, const std::string& scenario,
             const std::string& cell, const std::string& pin,
             const std::string& impl, const std::string& metric,
             const std::string& base) {
  const Series* a = r.Find(scenario, cell, pin, impl);
  const Series* b = r.Find(scenario, cell, pin, base);
  if (a == nullptr || b == nullptr || a->samples.empty() ||
      b->samples.empty()) {
    return NAN;
  }
  const double bm = b->Median(metric);
  return bm != 0 ? a->Median(metric) / bm : NAN;
}

std::string MarkdownTargets(const std::vector<Verdict>& v) {
  std::string t = "| target | this run | result |\n|---|---|---|\n";
  for (const Verdict& x : v) {
    absl::StrAppend(&t, "| ", x.target, " | ", x.figure, " | ", x.result,
                    " |\n");
  }
  return t;
}

// ---------------------------------------------------------------------------
// Plots: gnuplot data files, scripts, PNGs.

std::string GnuplotPreamble(const std::string& png, int w, int h) {
  return absl::StrFormat(
      "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
      "  set terminal pngcairo size %d,%d font ',10' noenhanced\n"
      "} else {\n"
      "  set terminal png size %d,%d noenhanced\n"
      "}\n"
      "set output '%s'\n"
      "set grid\n"
      "set key outside right top vertical\n",
      w, h, w, h, png);
}

// A fixed colour (and dash) per implementation, the same in every plot:
// glibc black, parklot red, kernel configurations dashed.
std::string LineStyle(const std::string& impl, int column) {
  static const std::map<std::string, std::string> colors = {
      {"glibc", "#000000"},  {"glibc_adaptive", "#7f7f7f"},
      {"std", "#1f77b4"},    {"absl", "#2ca02c"},
      {"futex", "#9467bd"},  {"parklot", "#d62728"},
      {"park", "#ff7f0e"},
  };
  // futex_hash's configurations: kernel sizes dashed, parklot solid with
  // the growing tables red.
  static const std::map<std::string, std::string> hash = {
      {"kernel/default", "#000000"},   {"kernel/global", "#7f7f7f"},
      {"kernel/16", "#8c564b"},        {"kernel/128", "#bcbd22"},
      {"kernel/1024", "#17becf"},      {"kernel/8192", "#e377c2"},
      {"kernel/65536", "#9467bd"},     {"parklot/threads", "#d62728"},
      {"parklot/cpus", "#ff7f0e"},     {"parklot/fixed:2", "#2ca02c"},
      {"parklot/fixed:16", "#1f77b4"}, {"parklot/fixed:1024", "#0b3d91"},
      {"parklot/adaptive", "#e41a1c"},
  };
  static const char* palette[] = {"#1f77b4", "#2ca02c", "#9467bd", "#8c564b",
                                  "#17becf", "#bcbd22", "#e377c2", "#ff7f0e"};
  auto it = colors.find(impl);
  auto ht = hash.find(impl);
  const std::string color =
      it != colors.end()   ? it->second
      : ht != hash.end()   ? ht->second
                           : palette[static_cast<size_t>(column) % 8];
  return absl::StrFormat("lc rgb '%s' dt %d", color,
                         absl::StartsWith(impl, "kernel/") ? 2 : 1);
}

// A table: first column `x`, one column per implementation (medians of
// `metric`), '?' where missing (gnuplot skips it).
std::string DataTable(const Results& r, const std::string& scenario,
                      const std::string& pin,
                      const std::vector<std::pair<double, std::string>>& rows,
                      const std::string& metric, double scale, bool spread) {
  std::string t = "x";
  const std::vector<std::string> impls = r.Impls(scenario);
  for (const std::string& i : impls) {
    absl::StrAppend(&t, " ", i);
    if (spread) absl::StrAppend(&t, " ", i, ":min ", i, ":max");
  }
  absl::StrAppend(&t, "\n");
  const auto show = [scale](double v) {
    return std::isfinite(v) ? absl::StrFormat("%.6g", v * scale)
                            : std::string("?");
  };
  for (const auto& [x, cell] : rows) {
    absl::StrAppend(&t, x);
    for (const std::string& i : impls) {
      const Series* s = r.Find(scenario, cell, pin, i);
      const bool any = s != nullptr && !s->samples.empty();
      absl::StrAppend(&t, " ", show(any ? s->Median(metric) : NAN));
      if (spread) {
        absl::StrAppend(&t, " ", show(any ? s->Min(metric) : NAN), " ",
                        show(any ? s->Max(metric) : NAN));
      }
    }
    absl::StrAppend(&t, "\n");
  }
  return t;
}

std::string PlotLines(const std::string& file,
                      const std::vector<std::string>& impls, bool spread) {
  std::string cmd = "plot ";
  for (size_t i = 0; i < impls.size(); ++i) {
    const std::string columns =
        spread ? absl::StrFormat("1:%d:%d:%d with yerrorlines", 3 * i + 2,
                                 3 * i + 3, 3 * i + 4)
               : absl::StrFormat("1:%d with linespoints", i + 2);
    absl::StrAppend(&cmd, i == 0 ? "" : ", \\\n     ",
                    absl::StrFormat("'%s' using %s lw 2 pt "
                                    "7 ps 0.8 %s title '%s'",
                                    i == 0 ? file : "", columns,
                                    LineStyle(impls[i], static_cast<int>(i)),
                                    impls[i]));
  }
  return cmd + "\n";
}

// ---------------------------------------------------------------------------
// JSON, through Google Benchmark's own reporter.

bool WriteJson(const std::string& path, const Results& results,
               const std::map<std::string, std::string>& context,
               const char* argv0) {
  std::ofstream file(path);
  if (!file) return false;
  for (const auto& [k, v] : context) benchmark::AddCustomContext(k, v);
  benchmark::BenchmarkReporter::Context::executable_name = argv0;
  benchmark::JSONReporter reporter;
  reporter.SetOutputStream(&file);
  reporter.SetErrorStream(&std::cerr);
  benchmark::BenchmarkReporter::Context ctx;
  reporter.ReportContext(ctx);

  // One family per scenario, one instance per series within it.
  std::map<std::string, int64_t> family;
  std::map<std::string, int64_t> instances;
  for (const Series* s : results.All()) {
    if (!s->in_json) continue;
    if (!family.count(s->scenario)) {
      const int64_t f = static_cast<int64_t>(family.size());
      family[s->scenario] = f;
    }
    const int64_t instance = instances[s->scenario]++;
    // "contended/T:16/cs:10/out:100/locks:1/unpinned/parklot"
    std::string name = absl::StrCat(
        s->scenario, "/",
        absl::StrReplaceAll(s->cell, {{" ", "/"}, {"=", ":"}}),
        s->pin.empty() ? "" : absl::StrCat("/", s->pin), "/", s->impl);
    auto make_run = [&] {
      benchmark::BenchmarkReporter::Run run;
      run.run_name.function_name = name;
      run.family_index = family[s->scenario];
      run.per_family_instance_index = instance;
      run.repetitions = static_cast<int64_t>(s->samples.size());
      run.repetition_index = 0;
      run.threads = 1;
      run.time_unit = benchmark::kNanosecond;
      run.statistics = nullptr;
      return run;
    };
    std::vector<benchmark::BenchmarkReporter::Run> runs;
    if (s->samples.empty()) {
      auto run = make_run();
      run.error_occurred = true;
      run.error_message =
          !s->skipped.empty()
              ? absl::StrCat("skipped: ", s->skipped)
              : (s->failures.empty() ? std::string("no result")
                                     : s->failures.front());
      runs.push_back(run);
      reporter.ReportRuns(runs);
      continue;
    }
    std::vector<std::string> metrics;
    for (const Sample& x : s->samples) {
      auto run = make_run();
      run.repetition_index = x.repetition;
      run.iterations = static_cast<benchmark::IterationCount>(
          std::max(1.0, std::round(x.iterations)));
      run.real_accumulated_time = x.real_s;
      run.cpu_accumulated_time = x.cpu_s;
      for (const auto& [k, v] : x.metrics) {
        run.counters[k] = v;
        AddUnique(&metrics, k);
      }
      runs.push_back(run);
    }
    // Aggregates as Google Benchmark writes them: one "iteration" whose
    // times are the statistic of the per-iteration times.
    auto per_iter = [&](bool cpu) {
      std::vector<double> v;
      for (const Sample& x : s->samples) {
        v.push_back((cpu ? x.cpu_s : x.real_s) / std::max(1.0, x.iterations));
      }
      return v;
    };
    auto stat_run = [&](const char* which) {
      auto run = make_run();
      run.run_type = benchmark::BenchmarkReporter::Run::RT_Aggregate;
      run.aggregate_name = which;
      run.aggregate_unit = benchmark::kTime;
      run.iterations = 1;
      auto pick = [&](std::vector<double> v) {
        if (v.empty()) return 0.0;
        if (which == std::string("median")) return MedianOf(v);
        if (which == std::string("min")) return *std::min_element(v.begin(), v.end());
        return *std::max_element(v.begin(), v.end());
      };
      run.real_accumulated_time = pick(per_iter(false));
      run.cpu_accumulated_time = pick(per_iter(true));
      for (const std::string& m : metrics) run.counters[m] = pick(Values(*s, m));
      return run;
    };
    runs.push_back(stat_run("median"));
    runs.push_back(stat_run("min"));
    runs.push_back(stat_run("max"));
    reporter.ReportRuns(runs);
  }
  reporter.Finalize();
  file.flush();
  return static_cast<bool>(file);
}

}  // namespace bench
}  // namespace parklot
