#include "runtime/config.h"

#include <cstdlib>

#include "absl/base/internal/raw_logging.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace parklot {
namespace {

// getenv without allocation; malformed values are reported, not fatal: a
// shim must not take down the program it was injected into.
template <typename T>
void ReadNumber(const char* name, T* out) {
  const char* v = getenv(name);
  if (v == nullptr) return;
  T parsed;
  if (absl::SimpleAtoi(v, &parsed) && parsed >= 0) {
    *out = parsed;
  } else {
    ABSL_RAW_LOG(WARNING, "parklot: ignoring %s=%s", name, v);
  }
}

// 0 unread, 1 being fixed, 2 fixed.
std::atomic<int> g_state{0};
Config g_config;

}  // namespace

Config ConfigFromEnvironment() {
  Config c;
  if (const char* v = getenv("PARKLOT_POLICY")) {
    size_t fixed = c.table.buckets;
    if (ParseGrowthPolicy(v, &c.table.policy, &fixed)) {
      if (c.table.policy == GrowthPolicy::kFixed) c.table.buckets = fixed;
    } else {
      ABSL_RAW_LOG(WARNING, "parklot: ignoring PARKLOT_POLICY=%s", v);
    }
  }
  if (c.table.policy != GrowthPolicy::kFixed) {
    ReadNumber("PARKLOT_BUCKETS", &c.table.buckets);
  }
  ReadNumber("PARKLOT_MAX_BUCKETS", &c.table.max_buckets);
  if (const char* v = getenv("PARKLOT_LOAD_FACTOR")) {
    double lf;
    if (absl::SimpleAtod(v, &lf) && lf > 0 && lf <= 1024) {
      c.table.load_factor = lf;
    } else {
      ABSL_RAW_LOG(WARNING, "parklot: ignoring PARKLOT_LOAD_FACTOR=%s", v);
    }
  }
  if (const char* v = getenv("PARKLOT_SPIN")) {
    absl::string_view s(v);
    int n;
    if (s == "adaptive") {
      c.spin = SpinMode::kAdaptive;
    } else if (s == "off") {
      c.spin = SpinMode::kOff;
    } else if (absl::SimpleAtoi(s, &n) && n >= 0 && n <= 64) {
      c.spin = n == 0 ? SpinMode::kOff : SpinMode::kFixed;
      c.spin_budget = n;
    } else {
      ABSL_RAW_LOG(WARNING, "parklot: ignoring PARKLOT_SPIN=%s", v);
    }
  }
  ReadNumber("PARKLOT_FAIR_NS", &c.fair_mean_ns);
  if (const char* v = getenv("PARKLOT_STATS")) {
    c.stats = v[0] != '\0' && v[0] != '0';
  }
  if (const char* v = getenv("PARKLOT_SYSCALL_FUTEX")) {
    c.syscall_futex = v[0] != '\0' && v[0] != '0';
  }
  return c;
}

const Config& GetConfig() {
  int s = g_state.load(std::memory_order_acquire);
  if (s == 2) return g_config;
  int expected = 0;
  if (g_state.compare_exchange_strong(expected, 1, std::memory_order_acquire)) {
    g_config = ConfigFromEnvironment();
    g_state.store(2, std::memory_order_release);
  } else {
    // Parsing takes microseconds; no lock (it would be ours) is needed.
    while (g_state.load(std::memory_order_acquire) != 2) {
      __builtin_ia32_pause();
    }
  }
  return g_config;
}

bool SetConfig(const Config& config) {
  int expected = 0;
  if (!g_state.compare_exchange_strong(expected, 1,
                                       std::memory_order_acquire)) {
    return false;
  }
  g_config = config;
  g_state.store(2, std::memory_order_release);
  return true;
}

std::string DescribeConfig(const Config& c) {
  std::string policy = GrowthPolicyName(c.table.policy);
  if (c.table.policy == GrowthPolicy::kFixed) {
    absl::StrAppend(&policy, ":", c.table.buckets);
  }
  const char* spin = c.spin == SpinMode::kAdaptive ? "adaptive"
                     : c.spin == SpinMode::kOff    ? "off"
                                                   : "fixed";
  return absl::StrCat("policy=", policy, " buckets=", c.table.buckets,
                      " max_buckets=", c.table.max_buckets,
                      " load_factor=", c.table.load_factor, " spin=", spin,
                      c.spin == SpinMode::kFixed
                          ? absl::StrCat(":", c.spin_budget)
                          : std::string(),
                      " fair_ns=", c.fair_mean_ns,
                      " stats=", c.stats ? 1 : 0,
                      c.syscall_futex ? " syscall_futex=1" : "");
}

}  // namespace parklot
