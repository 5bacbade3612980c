// Config parsing from PARKLOT_* environment variables (in-process setenv),
// malformed values falling back to the defaults, and DescribeConfig.
// Never calls GetConfig: parsing is a pure function of the environment.
#include "runtime/config.h"

#include <stdlib.h>

#include <map>
#include <optional>
#include <string>

#include "gtest/gtest.h"
#include "hash/bucket_table.h"

namespace parklot {
namespace {

const char* const kVars[] = {"PARKLOT_POLICY",      "PARKLOT_BUCKETS",
                             "PARKLOT_MAX_BUCKETS", "PARKLOT_LOAD_FACTOR",
                             "PARKLOT_SPIN",        "PARKLOT_FAIR_NS",
                             "PARKLOT_STATS"};

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
  EXPECT_EQ(c.table.policy, GrowthPolicy::kThreads);
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

TEST(DescribeConfig, NamesEveryKnob) {
  Config c;
  EXPECT_EQ(DescribeConfig(c),
            "policy=threads buckets=16 max_buckets=524288 load_factor=4 "
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
}

}  // namespace
}  // namespace parklot
