// Config parsing from PARKLOT_* environment variables (in-process setenv),
// malformed and out-of-range values falling back to the defaults with one
// line on stderr each, SanitizeConfig/SetConfig doing the same for the API,
// and DescribeConfig. Never calls GetConfig in this process (SetConfig's
// test runs in a child): parsing is a pure function of the environment.
#include "runtime/config.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "hash/bucket_table.h"
#include "runtime/global_table.h"
#include "runtime/thread_data.h"

namespace parklot::internal {
namespace {

const char* const kVars[] = {"PARKLOT_POLICY",      "PARKLOT_BUCKETS",
                             "PARKLOT_MAX_BUCKETS", "PARKLOT_LOAD_FACTOR",
                             "PARKLOT_SPIN",        "PARKLOT_FAIR_NS",
                             "PARKLOT_STATS",       "PARKLOT_SYSCALL_FUTEX",
                             "PARKLOT_REPORT",      "PARKLOT_DEADLOCK",
                             "PARKLOT_PROFILE",     "PARKLOT_PROFILE_RATE"};

// Runs `fn` with stderr (fd 2) sent to a temporary file; returns what was
// written to it.
std::string CaptureStderr(const std::function<void()>& fn) {
  fflush(stderr);
  FILE* tmp = tmpfile();
  EXPECT_NE(tmp, nullptr);
  if (tmp == nullptr) return "";
  const int saved = dup(STDERR_FILENO);
  dup2(fileno(tmp), STDERR_FILENO);
  fn();
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  std::string out;
  rewind(tmp);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), tmp)) > 0) out.append(buf, n);
  fclose(tmp);
  return out;
}

// The lines of `text` (each ended by a newline).
std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

// Clears every PARKLOT_* variable for the test and restores them after.
class ConfigEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kVars) {
      if (const char* old = getenv(v)) saved_[v] = old;
      unsetenv(v);
    }
  }
  void TearDown() override {
    for (const char* v : kVars) unsetenv(v);
    for (const auto& [k, v] : saved_) setenv(k.c_str(), v.c_str(), 1);
  }
  static Config With(const char* var, const char* value) {
    setenv(var, value, 1);
    Config c = ConfigFromEnvironment();
    unsetenv(var);
    return c;
  }
  std::map<std::string, std::string> saved_;
};

void ExpectDefaults(const Config& c) {
  EXPECT_EQ(c.table.policy, GrowthPolicy::kAdaptive);
  EXPECT_EQ(c.table.buckets, 16u);
  EXPECT_EQ(c.table.max_buckets, size_t{1} << 19);
  EXPECT_EQ(c.table.load_factor, 4.0);
  EXPECT_EQ(c.spin, SpinMode::kAdaptive);
  EXPECT_EQ(c.spin_budget, 0);
  EXPECT_EQ(c.fair_mean_ns, 500000);
  EXPECT_FALSE(c.stats);
}

TEST_F(ConfigEnv, NothingSetGivesTheDefaults) {
  ExpectDefaults(ConfigFromEnvironment());
}

TEST_F(ConfigEnv, Policy) {
  EXPECT_EQ(With("PARKLOT_POLICY", "threads").table.policy,
            GrowthPolicy::kThreads);
  EXPECT_EQ(With("PARKLOT_POLICY", "cpus").table.policy, GrowthPolicy::kCpus);
  const Config f = With("PARKLOT_POLICY", "fixed:8");
  EXPECT_EQ(f.table.policy, GrowthPolicy::kFixed);
  EXPECT_EQ(f.table.buckets, 8u);
  const Config one = With("PARKLOT_POLICY", "fixed:1");
  EXPECT_EQ(one.table.policy, GrowthPolicy::kFixed);
  EXPECT_EQ(one.table.buckets, 1u);
  for (const char* bad : {"bogus", "fixed:0", "fixed:x", "", "THREADS"}) {
    SCOPED_TRACE(bad);
    ExpectDefaults(With("PARKLOT_POLICY", bad));
  }
}

TEST_F(ConfigEnv, FixedSizeWinsOverBuckets) {
  // PARKLOT_BUCKETS is the initial size of a growing table; for fixed:N the
  // size is N.
  setenv("PARKLOT_BUCKETS", "64", 1);
  EXPECT_EQ(With("PARKLOT_POLICY", "fixed:4").table.buckets, 4u);
  EXPECT_EQ(With("PARKLOT_POLICY", "threads").table.buckets, 64u);
}

TEST_F(ConfigEnv, Buckets) {
  EXPECT_EQ(With("PARKLOT_BUCKETS", "64").table.buckets, 64u);
  EXPECT_EQ(With("PARKLOT_BUCKETS", "1000").table.buckets, 1000u);
  for (const char* bad : {"abc", "-3", "12abc", ""}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(With("PARKLOT_BUCKETS", bad).table.buckets, 16u);
  }
}

TEST_F(ConfigEnv, MaxBuckets) {
  EXPECT_EQ(With("PARKLOT_MAX_BUCKETS", "1024").table.max_buckets, 1024u);
  EXPECT_EQ(With("PARKLOT_MAX_BUCKETS", "-1").table.max_buckets,
            size_t{1} << 19);
  EXPECT_EQ(With("PARKLOT_MAX_BUCKETS", "lots").table.max_buckets,
            size_t{1} << 19);
}

TEST_F(ConfigEnv, LoadFactor) {
  EXPECT_EQ(With("PARKLOT_LOAD_FACTOR", "2.5").table.load_factor, 2.5);
  EXPECT_EQ(With("PARKLOT_LOAD_FACTOR", "1").table.load_factor, 1.0);
  EXPECT_EQ(With("PARKLOT_LOAD_FACTOR", "1024").table.load_factor, 1024.0);
  // Zero, negative, absurd and non-numeric factors are refused.
  for (const char* bad : {"0", "-1", "2000", "x", "nan", ""}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(With("PARKLOT_LOAD_FACTOR", bad).table.load_factor, 4.0);
  }
}

TEST_F(ConfigEnv, Spin) {
  EXPECT_EQ(With("PARKLOT_SPIN", "adaptive").spin, SpinMode::kAdaptive);
  EXPECT_EQ(With("PARKLOT_SPIN", "off").spin, SpinMode::kOff);
  const Config zero = With("PARKLOT_SPIN", "0");
  EXPECT_EQ(zero.spin, SpinMode::kOff);
  EXPECT_EQ(zero.spin_budget, 0);
  const Config ten = With("PARKLOT_SPIN", "10");
  EXPECT_EQ(ten.spin, SpinMode::kFixed);
  EXPECT_EQ(ten.spin_budget, 10);
  EXPECT_EQ(With("PARKLOT_SPIN", "64").spin_budget, 64);
  for (const char* bad : {"65", "-1", "fast", "ON", ""}) {
    SCOPED_TRACE(bad);
    const Config c = With("PARKLOT_SPIN", bad);
    EXPECT_EQ(c.spin, SpinMode::kAdaptive);
    EXPECT_EQ(c.spin_budget, 0);
  }
}

TEST_F(ConfigEnv, FairNs) {
  EXPECT_EQ(With("PARKLOT_FAIR_NS", "0").fair_mean_ns, 0);
  EXPECT_EQ(With("PARKLOT_FAIR_NS", "1000").fair_mean_ns, 1000);
  EXPECT_EQ(With("PARKLOT_FAIR_NS", "-5").fair_mean_ns, 500000);
  EXPECT_EQ(With("PARKLOT_FAIR_NS", "soon").fair_mean_ns, 500000);
}

TEST_F(ConfigEnv, Stats) {
  EXPECT_TRUE(With("PARKLOT_STATS", "1").stats);
  EXPECT_TRUE(With("PARKLOT_STATS", "yes").stats);
  EXPECT_FALSE(With("PARKLOT_STATS", "0").stats);
  EXPECT_FALSE(With("PARKLOT_STATS", "").stats);
}

TEST_F(ConfigEnv, AllTogether) {
  setenv("PARKLOT_POLICY", "cpus", 1);
  setenv("PARKLOT_BUCKETS", "32", 1);
  setenv("PARKLOT_MAX_BUCKETS", "4096", 1);
  setenv("PARKLOT_LOAD_FACTOR", "8", 1);
  setenv("PARKLOT_SPIN", "off", 1);
  setenv("PARKLOT_FAIR_NS", "250000", 1);
  setenv("PARKLOT_STATS", "1", 1);
  const Config c = ConfigFromEnvironment();
  EXPECT_EQ(c.table.policy, GrowthPolicy::kCpus);
  EXPECT_EQ(c.table.buckets, 32u);
  EXPECT_EQ(c.table.max_buckets, 4096u);
  EXPECT_EQ(c.table.load_factor, 8.0);
  EXPECT_EQ(c.spin, SpinMode::kOff);
  EXPECT_EQ(c.fair_mean_ns, 250000);
  EXPECT_TRUE(c.stats);
  // One bad variable does not disturb the others.
  setenv("PARKLOT_BUCKETS", "many", 1);
  const Config d = ConfigFromEnvironment();
  EXPECT_EQ(d.table.buckets, 16u);
  EXPECT_EQ(d.table.policy, GrowthPolicy::kCpus);
  EXPECT_EQ(d.table.max_buckets, 4096u);
}

// A rejected value: the knob keeps its default, and stderr gets exactly
// one line naming the variable, the value as given and the default used.
void ExpectRejected(const char* var, const std::string& value,
                    const std::string& shown, const char* default_text,
                    const std::function<void(const Config&)>& check_default) {
  SCOPED_TRACE(std::string(var) + "=" + value);
  setenv(var, value.c_str(), 1);
  Config c;
  const std::string err = CaptureStderr([&] { c = ConfigFromEnvironment(); });
  unsetenv(var);
  check_default(c);
  const std::vector<std::string> lines = Lines(err);
  ASSERT_EQ(lines.size(), 1u) << err;
  EXPECT_NE(lines[0].find(std::string(var) + "=" + shown + " "),
            std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find(std::string("using the default ") + default_text),
            std::string::npos)
      << lines[0];
}

void ExpectRejected(const char* var, const std::string& value,
                    const char* default_text,
                    const std::function<void(const Config&)>& check_default) {
  ExpectRejected(var, value, value, default_text, check_default);
}

// Out of range in every way a number can be: past 2^64, 2^64 - 1 (which
// once hung the program before main), negative, zero, garbage, empty.
const char* const kBadCounts[] = {"18446744073709551615",
                                  "18446744073709551616",
                                  "99999999999999999999999",
                                  "9223372036854775808",
                                  "1073741825",
                                  "4294967296",
                                  "-1",
                                  "-18446744073709551615",
                                  "0",
                                  "abc",
                                  "12abc",
                                  "0x10",
                                  "1e3",
                                  ""};

TEST_F(ConfigEnv, BadBucketCountsAreReportedAndIgnored) {
  for (const char* bad : kBadCounts) {
    ExpectRejected("PARKLOT_BUCKETS", bad, "16",
                   [](const Config& c) { EXPECT_EQ(c.table.buckets, 16u); });
    ExpectRejected("PARKLOT_MAX_BUCKETS", bad, "524288", [](const Config& c) {
      EXPECT_EQ(c.table.max_buckets, size_t{1} << 19);
    });
  }
  // The largest accepted.
  EXPECT_EQ(With("PARKLOT_MAX_BUCKETS", "1073741824").table.max_buckets,
            kMaxTableBuckets);
  EXPECT_EQ(With("PARKLOT_BUCKETS", "1").table.buckets, 1u);
}

TEST_F(ConfigEnv, BadBucketsIsReportedUnderAFixedPolicyToo) {
  setenv("PARKLOT_POLICY", "fixed:8", 1);
  ExpectRejected("PARKLOT_BUCKETS", "-1", "16", [](const Config& c) {
    EXPECT_EQ(c.table.policy, GrowthPolicy::kFixed);
    EXPECT_EQ(c.table.buckets, 8u);
  });
}

TEST_F(ConfigEnv, BadPoliciesAreReportedAndIgnored) {
  for (const char* bad :
       {"fixed:0", "fixed:1073741825", "fixed:18446744073709551615",
        "fixed:18446744073709551616", "fixed:-1", "fixed:", "fixed:1e3",
        "bogus", "THREADS", ""}) {
    ExpectRejected("PARKLOT_POLICY", bad, "adaptive", [](const Config& c) {
      EXPECT_EQ(c.table.policy, GrowthPolicy::kAdaptive);
      EXPECT_EQ(c.table.buckets, 16u);
    });
  }
  const Config c = With("PARKLOT_POLICY", "fixed:1073741824");
  EXPECT_EQ(c.table.policy, GrowthPolicy::kFixed);
  EXPECT_EQ(c.table.buckets, kMaxTableBuckets);
}

TEST_F(ConfigEnv, BadLoadFactorsAreReportedAndIgnored) {
  for (const char* bad : {"nan", "NaN", "-nan", "inf", "-inf", "infinity", "0",
                          "-0", "-1", "1024.5", "1e308", "1e999", "x", ""}) {
    ExpectRejected("PARKLOT_LOAD_FACTOR", bad, "4", [](const Config& c) {
      EXPECT_EQ(c.table.load_factor, 4.0);
    });
  }
  EXPECT_EQ(With("PARKLOT_LOAD_FACTOR", "0.001").table.load_factor, 0.001);
}

TEST_F(ConfigEnv, BadSpinAndFairnessAreReportedAndIgnored) {
  for (const char* bad :
       {"65", "-1", "4294967296", "18446744073709551616", "fast", ""}) {
    ExpectRejected("PARKLOT_SPIN", bad, "adaptive", [](const Config& c) {
      EXPECT_EQ(c.spin, SpinMode::kAdaptive);
      EXPECT_EQ(c.spin_budget, 0);
    });
  }
  for (const char* bad :
       {"-5", "60000000001", "9223372036854775807", "9223372036854775808",
        "18446744073709551615", "soon", "1e9", ""}) {
    ExpectRejected("PARKLOT_FAIR_NS", bad, "500000",
                   [](const Config& c) { EXPECT_EQ(c.fair_mean_ns, 500000); });
  }
  EXPECT_EQ(With("PARKLOT_FAIR_NS", "60000000000").fair_mean_ns, kMaxFairNs);
}

TEST_F(ConfigEnv, BadSwitchesAreReportedAndIgnored) {
  for (const char* bad : {"banana", "2", "-1", "on"}) {
    ExpectRejected("PARKLOT_STATS", bad, "0",
                   [](const Config& c) { EXPECT_FALSE(c.stats); });
    ExpectRejected("PARKLOT_SYSCALL_FUTEX", bad, "0",
                   [](const Config& c) { EXPECT_FALSE(c.syscall_futex); });
  }
  EXPECT_TRUE(With("PARKLOT_SYSCALL_FUTEX", "true").syscall_futex);
  EXPECT_FALSE(With("PARKLOT_SYSCALL_FUTEX", "no").syscall_futex);
}

// PARKLOT_STATS takes a path (with a '/') as well as a switch;
// PARKLOT_REPORT only a path; PARKLOT_DEADLOCK off, report or abort.
TEST_F(ConfigEnv, ReportPathsAndDeadlockMode) {
  Config c = With("PARKLOT_STATS", "/tmp/stats.%p");
  EXPECT_TRUE(c.stats);
  ASSERT_NE(c.stats_path, nullptr);
  EXPECT_STREQ(c.stats_path, "/tmp/stats.%p");
  EXPECT_EQ(With("PARKLOT_STATS", "1").stats_path, nullptr);
  c = With("PARKLOT_REPORT", "./report");
  ASSERT_NE(c.report_path, nullptr);
  EXPECT_STREQ(c.report_path, "./report");
  EXPECT_FALSE(c.stats);
  ExpectRejected("PARKLOT_REPORT", "report.txt", "stderr",
                 [](const Config& c) { EXPECT_EQ(c.report_path, nullptr); });
  EXPECT_EQ(With("PARKLOT_DEADLOCK", "report").deadlock, DeadlockMode::kReport);
  EXPECT_EQ(With("PARKLOT_DEADLOCK", "abort").deadlock, DeadlockMode::kAbort);
  EXPECT_EQ(With("PARKLOT_DEADLOCK", "off").deadlock, DeadlockMode::kOff);
  EXPECT_EQ(ConfigFromEnvironment().deadlock, DeadlockMode::kOff);
  for (const char* bad : {"1", "on", "Report"}) {
    ExpectRejected("PARKLOT_DEADLOCK", bad, "off", [](const Config& c) {
      EXPECT_EQ(c.deadlock, DeadlockMode::kOff);
    });
  }
}

// PARKLOT_PROFILE takes a path only (a profile on stderr cannot be read
// back); PARKLOT_PROFILE_RATE 1..1000000000 ns of wait per sample.
TEST_F(ConfigEnv, ProfilePathAndRate) {
  EXPECT_EQ(ConfigFromEnvironment().profile_path, nullptr);
  EXPECT_EQ(ConfigFromEnvironment().profile_rate, 1000000);
  Config c = With("PARKLOT_PROFILE", "./prof.%p");
  ASSERT_NE(c.profile_path, nullptr);
  EXPECT_STREQ(c.profile_path, "./prof.%p");
  EXPECT_FALSE(c.stats);
  for (const char* bad : {"1", "prof.out", "yes"}) {
    ExpectRejected("PARKLOT_PROFILE", bad, "off", [](const Config& c) {
      EXPECT_EQ(c.profile_path, nullptr);
    });
  }
  EXPECT_EQ(With("PARKLOT_PROFILE_RATE", "1").profile_rate, 1);
  EXPECT_EQ(With("PARKLOT_PROFILE_RATE", "1000000000").profile_rate,
            kMaxProfileRate);
  for (const char* bad :
       {"0", "-1", "1000000001", "4294967297", "often", ""}) {
    ExpectRejected("PARKLOT_PROFILE_RATE", bad, "1000000", [](const Config& c) {
      EXPECT_EQ(c.profile_rate, 1000000);
    });
  }
}

// The warning stays one line whatever the value holds.
TEST_F(ConfigEnv, TheReportIsOneLineForAnyValue) {
  ExpectRejected("PARKLOT_BUCKETS", "12\n34\r\x1b[2J", "12?34??[2J", "16",
                 [](const Config& c) { EXPECT_EQ(c.table.buckets, 16u); });
  const std::string long_value(5000, '7');
  ExpectRejected(
      "PARKLOT_MAX_BUCKETS", long_value, std::string(48, '7') + "...", "524288",
      [](const Config& c) { EXPECT_EQ(c.table.max_buckets, size_t{1} << 19); });
}

TEST_F(ConfigEnv, GoodValuesPrintNothing) {
  for (const auto& [var, value] :
       std::vector<std::pair<const char*, const char*>>{
           {"PARKLOT_POLICY", "fixed:1"},
           {"PARKLOT_BUCKETS", "1073741824"},
           {"PARKLOT_MAX_BUCKETS", "1"},
           {"PARKLOT_LOAD_FACTOR", "1024"},
           {"PARKLOT_SPIN", "64"},
           {"PARKLOT_FAIR_NS", "0"},
           {"PARKLOT_STATS", "yes"},
           {"PARKLOT_SYSCALL_FUTEX", "0"}}) {
    setenv(var, value, 1);
  }
  const std::string err = CaptureStderr([] { ConfigFromEnvironment(); });
  EXPECT_EQ(err, "");
}

// Several bad variables: one line each, and the good ones still apply.
TEST_F(ConfigEnv, EachBadVariableGetsItsOwnLine) {
  setenv("PARKLOT_BUCKETS", "18446744073709551615", 1);
  setenv("PARKLOT_MAX_BUCKETS", "0", 1);
  setenv("PARKLOT_LOAD_FACTOR", "inf", 1);
  setenv("PARKLOT_SPIN", "off", 1);
  Config c;
  const std::string err = CaptureStderr([&] { c = ConfigFromEnvironment(); });
  const std::vector<std::string> lines = Lines(err);
  ASSERT_EQ(lines.size(), 3u) << err;
  EXPECT_NE(lines[0].find("PARKLOT_BUCKETS="), std::string::npos);
  EXPECT_NE(lines[1].find("PARKLOT_MAX_BUCKETS="), std::string::npos);
  EXPECT_NE(lines[2].find("PARKLOT_LOAD_FACTOR="), std::string::npos);
  EXPECT_EQ(c.spin, SpinMode::kOff);
  EXPECT_EQ(c.table.buckets, 16u);
}

// --- The API: SanitizeConfig, SetConfig ---------------------------------

TEST(SanitizeConfig, ValidConfigsAreLeftAlone) {
  Config c;
  std::string err = CaptureStderr([&] { EXPECT_EQ(SanitizeConfig(&c), 0); });
  EXPECT_EQ(err, "");
  c.table.policy = GrowthPolicy::kFixed;
  c.table.buckets = kMaxTableBuckets;
  c.table.max_buckets = 1;
  c.table.load_factor = kMaxLoadFactor;
  c.spin = SpinMode::kFixed;
  c.spin_budget = kMaxSpinBudget;
  c.fair_mean_ns = kMaxFairNs;
  const Config before = c;
  err = CaptureStderr([&] { EXPECT_EQ(SanitizeConfig(&c), 0); });
  EXPECT_EQ(err, "");
  EXPECT_EQ(DescribeConfig(c), DescribeConfig(before));
}

// Each bad field: replaced by its default, one line naming it.
TEST(SanitizeConfig, EachBadFieldGetsItsDefault) {
  const Config d;
  struct Case {
    const char* field;
    std::function<void(Config*)> spoil;
    std::function<bool(const Config&)> is_default;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<Case> cases;
  for (size_t n : {size_t{0}, kMaxTableBuckets + 1, SIZE_MAX}) {
    cases.push_back(
        {"table.buckets=", [n](Config* c) { c->table.buckets = n; },
         [&](const Config& c) { return c.table.buckets == d.table.buckets; }});
    cases.push_back(
        {"table.max_buckets=", [n](Config* c) { c->table.max_buckets = n; },
         [&](const Config& c) {
           return c.table.max_buckets == d.table.max_buckets;
         }});
  }
  for (double lf : {nan, inf, -inf, 0.0, -1.0, 1024.5}) {
    cases.push_back(
        {"table.load_factor=", [lf](Config* c) { c->table.load_factor = lf; },
         [&](const Config& c) {
           return c.table.load_factor == d.table.load_factor;
         }});
  }
  cases.push_back(
      {"table.policy=",
       [](Config* c) { c->table.policy = static_cast<GrowthPolicy>(9); },
       [&](const Config& c) { return c.table.policy == d.table.policy; }});
  for (int r : {0, -1, kMaxProfileRate + 1}) {
    cases.push_back(
        {"profile_rate=", [r](Config* c) { c->profile_rate = r; },
         [&](const Config& c) { return c.profile_rate == d.profile_rate; }});
  }
  cases.push_back(
      {"spin=", [](Config* c) { c->spin = static_cast<SpinMode>(7); },
       [&](const Config& c) { return c.spin == d.spin; }});
  for (int b : {-1, kMaxSpinBudget + 1, std::numeric_limits<int>::min()}) {
    cases.push_back({"spin_budget=", [b](Config* c) { c->spin_budget = b; },
                     [&](const Config& c) { return c.spin_budget == 0; }});
  }
  for (int64_t ns :
       {int64_t{-1}, kMaxFairNs + 1, std::numeric_limits<int64_t>::max()}) {
    cases.push_back(
        {"fair_mean_ns=", [ns](Config* c) { c->fair_mean_ns = ns; },
         [&](const Config& c) { return c.fair_mean_ns == d.fair_mean_ns; }});
  }
  for (const Case& k : cases) {
    Config c;
    c.stats = true;  // an unrelated knob: must survive
    k.spoil(&c);
    int replaced = -1;
    const std::string err =
        CaptureStderr([&] { replaced = SanitizeConfig(&c); });
    SCOPED_TRACE(err);
    EXPECT_EQ(replaced, 1);
    EXPECT_TRUE(k.is_default(c)) << k.field;
    EXPECT_TRUE(c.stats);
    const std::vector<std::string> lines = Lines(err);
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_NE(lines[0].find(std::string("SetConfig ") + k.field),
              std::string::npos);
    EXPECT_NE(lines[0].find("using the default "), std::string::npos);
  }
}

// SetConfig with bad fields fixes the configuration with their defaults
// (the good ones kept) and the lot runs on it. In a child: SetConfig
// succeeds once per process, and this process must not fix its own.
TEST(SetConfig, BadFieldsAreReplacedAndTheLotRuns) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(30);
    Config c;
    c.table.buckets = SIZE_MAX;
    c.table.max_buckets = SIZE_MAX;
    c.table.load_factor = std::numeric_limits<double>::quiet_NaN();
    c.fair_mean_ns = -1;
    c.spin = SpinMode::kOff;
    if (!SetConfig(c)) _exit(10);
    const Config& got = GetConfig();
    if (got.table.buckets != 16 || got.table.max_buckets != (size_t{1} << 19))
      _exit(11);
    if (got.table.load_factor != 4.0 || got.fair_mean_ns != 500000) _exit(12);
    if (got.spin != SpinMode::kOff) _exit(13);
    BucketTable& t = GlobalTable();
    if (t.bucket_count() != 16 || t.MaybeGrow(100) != true ||
        t.bucket_count() != 512) {
      _exit(14);
    }
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status))
      << "child killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(DescribeConfig, NamesEveryKnob) {
  Config c;
  EXPECT_EQ(DescribeConfig(c),
            "policy=adaptive buckets=16 max_buckets=524288 load_factor=4 "
            "spin=adaptive fair_ns=500000 stats=0");
  c.table.policy = GrowthPolicy::kFixed;
  c.table.buckets = 8;
  c.spin = SpinMode::kFixed;
  c.spin_budget = 10;
  c.stats = true;
  const std::string d = DescribeConfig(c);
  EXPECT_NE(d.find("policy=fixed:8"), std::string::npos) << d;
  EXPECT_NE(d.find("spin=fixed:10"), std::string::npos) << d;
  EXPECT_NE(d.find("stats=1"), std::string::npos) << d;
  c.spin = SpinMode::kOff;
  EXPECT_NE(DescribeConfig(c).find("spin=off"), std::string::npos);
  EXPECT_EQ(DescribeConfig(c).find("profile"), std::string::npos);
  c.profile_path = "./prof";
  c.profile_rate = 7;
  EXPECT_NE(DescribeConfig(c).find(" profile_rate=7"), std::string::npos);
}

}  // namespace
}  // namespace parklot::internal
