#include "runtime/config.h"

#include <errno.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "base/text.h"
#include "hash/lock_section.h"

// Set by the first copy of the lot in the process to read the environment
// (the preload shim defines and exports it, preload/init.cc): a program
// that links libparklot.so and runs under the shim holds two copies, and
// each would warn of the same bad knob. A weak reference: where the shim
// is not loaded, the library's copy finds none and always warns.
extern "C" int parklot_config_reported __attribute__((weak));

namespace parklot::internal {
namespace {
// This parse stays quiet: another copy of the lot already warned of the
// same environment (parklot_config_reported).
bool g_quiet_parse = false;

// Reports one rejected knob on one line of stderr: its name, the value
// given, what is accepted and the default used instead. `value` may be any
// text from the environment: it is shortened and control characters are
// replaced, so the report stays one line. No allocation (the first lock,
// inside malloc, may parse the environment): formatted on the stack.
void Reject(const char* prefix, const char* name, std::string_view value,
            const char* accepted, const char* default_value) {
  constexpr size_t kShown = 48;
  char shown[kShown + 4];
  size_t n = 0;
  for (; n < value.size() && n < kShown; ++n) {
    const unsigned char c = static_cast<unsigned char>(value[n]);
    shown[n] = c < 0x20 || c == 0x7f ? '?' : value[n];
  }
  if (value.size() > kShown) {
    for (int i = 0; i < 3; ++i) shown[n++] = '.';
  }
  shown[n] = '\0';
  if (g_quiet_parse) return;
  // One write(2) of one line: no stdio, and no source location prefix,
  // which says nothing to a user.
  SayLine("parklot: ignoring %s%s=%s (accepted: %s); using the default %s",
          prefix, name, shown, accepted, default_value);
}

// A number as Reject shows a default or a rejected field.
struct Shown {
  char text[32];
  explicit Shown(uint64_t n) { snprintf(text, sizeof(text), "%lu", n); }
  explicit Shown(int64_t n) { snprintf(text, sizeof(text), "%ld", n); }
  explicit Shown(int n) { snprintf(text, sizeof(text), "%d", n); }
  explicit Shown(double d) { snprintf(text, sizeof(text), "%g", d); }
};

// The accepted ranges, as Reject words them. One place for each range:
// the environment parser and SetConfig both go through the checks below.
static_assert(kMaxTableBuckets == 1073741824 && kMaxLoadFactor == 1024 &&
                  kMaxSpinBudget == 64 && kMaxFairNs == 60000000000,
              "the texts below state the ranges");
constexpr char kBucketsRange[] = "a whole number from 1 to 1073741824";
constexpr char kPolicyRange[] =
    "threads, cpus, adaptive or fixed:N, N from 1 to 1073741824";
constexpr char kLoadFactorRange[] = "a number above 0, at most 1024";
constexpr char kSpinRange[] = "adaptive, off or a whole number from 0 to 64";
constexpr char kFairRange[] = "a whole number of ns from 0 to 60000000000";
constexpr char kBoolRange[] = "1/0, true/false, yes/no";
constexpr char kStatsRange[] =
    "1/0, true/false, yes/no, or a file path with a '/'";
constexpr char kPathRange[] = "a file path with a '/'";
constexpr char kDeadlockRange[] = "off, report or abort";
static_assert(kMaxProfileRate == 1000000000, "the text below states the range");
constexpr char kProfileRateRange[] = "a whole number of ns from 1 to 1000000000";

bool ValidBuckets(size_t n) { return n >= 1 && n <= kMaxTableBuckets; }
// Written so that NaN fails.
bool ValidLoadFactor(double f) { return f > 0 && f <= kMaxLoadFactor; }
bool ValidSpinBudget(int n) { return n >= 0 && n <= kMaxSpinBudget; }
bool ValidFairNs(int64_t ns) { return ns >= 0 && ns <= kMaxFairNs; }
bool ValidProfileRate(int n) { return n >= 1 && n <= kMaxProfileRate; }

const char* SpinName(SpinMode m) {
  switch (m) {
    case SpinMode::kAdaptive:
      return "adaptive";
    case SpinMode::kOff:
      return "off";
    case SpinMode::kFixed:
      return "fixed";
  }
  return "?";
}

// PARKLOT_BUCKETS, PARKLOT_MAX_BUCKETS: a bucket count in range, or the
// default (reported).
void ReadBuckets(const char* name, size_t* out) {
  const char* v = getenv(name);
  if (v == nullptr) return;
  uint64_t n;
  if (ParseUnsigned(v, UINT64_MAX, &n) && ValidBuckets(n)) {
    *out = n;
  } else {
    Reject("", name, v, kBucketsRange, Shown(uint64_t{*out}).text);
  }
}

void ReadBool(const char* name, bool* out) {
  const char* v = getenv(name);
  if (v == nullptr || v[0] == '\0') return;
  bool b;
  if (ParseBool(v, &b)) {
    *out = b;
  } else {
    Reject("", name, v, kBoolRange, *out ? "1" : "0");
  }
}

// PARKLOT_STATS: a switch, or a path (it has a '/', so a mistyped switch is
// not taken for a file name) that switches the statistics on.
void ReadStats(Config* c) {
  const char* v = getenv("PARKLOT_STATS");
  if (v == nullptr || v[0] == '\0') return;
  bool b;
  if (ParseBool(v, &b)) {
    c->stats = b;
  } else if (strchr(v, '/') != nullptr) {
    c->stats = true;
    c->stats_path = v;
  } else {
    Reject("", "PARKLOT_STATS", v, kStatsRange, c->stats ? "1" : "0");
  }
}

const char* DeadlockName(DeadlockMode m) {
  switch (m) {
    case DeadlockMode::kOff:
      return "off";
    case DeadlockMode::kReport:
      return "report";
    case DeadlockMode::kAbort:
      return "abort";
  }
  return "?";
}

// 0 unread, 1 being fixed, 2 fixed.
std::atomic<int> g_state{0};
Config g_config;

}  // namespace

bool SecureMode() { return getauxval(AT_SECURE) != 0; }

Config ConfigFromEnvironment() {
  const Config defaults;
  Config c;
  // The environment of a setuid program is its caller's: not one variable
  // of it is read, and no knob is reported (a report is a write).
  if (SecureMode()) return c;
  int* const reported = &parklot_config_reported;
  g_quiet_parse = reported != nullptr &&
                  __atomic_exchange_n(reported, 1, __ATOMIC_RELAXED) != 0;
  if (const char* v = getenv("PARKLOT_POLICY")) {
    size_t fixed = 0;
    if (ParseGrowthPolicy(v, &c.table.policy, &fixed)) {
      if (c.table.policy == GrowthPolicy::kFixed) c.table.buckets = fixed;
    } else {
      Reject("", "PARKLOT_POLICY", v, kPolicyRange,
             GrowthPolicyName(defaults.table.policy));
    }
  }
  // Checked under every policy; fixed:N alone sizes a fixed table.
  size_t buckets = defaults.table.buckets;
  ReadBuckets("PARKLOT_BUCKETS", &buckets);
  if (c.table.policy != GrowthPolicy::kFixed) c.table.buckets = buckets;
  ReadBuckets("PARKLOT_MAX_BUCKETS", &c.table.max_buckets);
  if (const char* v = getenv("PARKLOT_LOAD_FACTOR")) {
    double lf;
    if (ParseDouble(v, &lf) && ValidLoadFactor(lf)) {
      c.table.load_factor = lf;
    } else {
      Reject("", "PARKLOT_LOAD_FACTOR", v, kLoadFactorRange,
             Shown(defaults.table.load_factor).text);
    }
  }
  if (const char* v = getenv("PARKLOT_SPIN")) {
    std::string_view s(v);
    int64_t n;
    if (s == "adaptive") {
      c.spin = SpinMode::kAdaptive;
    } else if (s == "off") {
      c.spin = SpinMode::kOff;
    } else if (ParseSigned(s, INT32_MIN, INT32_MAX, &n) &&
               ValidSpinBudget(static_cast<int>(n))) {
      c.spin = n == 0 ? SpinMode::kOff : SpinMode::kFixed;
      c.spin_budget = static_cast<int>(n);
    } else {
      Reject("", "PARKLOT_SPIN", v, kSpinRange, SpinName(defaults.spin));
    }
  }
  if (const char* v = getenv("PARKLOT_FAIR_NS")) {
    int64_t ns;
    if (ParseSigned(v, INT64_MIN, INT64_MAX, &ns) && ValidFairNs(ns)) {
      c.fair_mean_ns = ns;
    } else {
      Reject("", "PARKLOT_FAIR_NS", v, kFairRange,
             Shown(defaults.fair_mean_ns).text);
    }
  }
  ReadStats(&c);
  if (const char* v = getenv("PARKLOT_REPORT"); v != nullptr && v[0] != '\0') {
    if (strchr(v, '/') != nullptr) {
      c.report_path = v;
    } else {
      Reject("", "PARKLOT_REPORT", v, kPathRange, "stderr");
    }
  }
  if (const char* v = getenv("PARKLOT_DEADLOCK"); v != nullptr && v[0] != '\0') {
    std::string_view s(v);
    if (s == "off") {
      c.deadlock = DeadlockMode::kOff;
    } else if (s == "report") {
      c.deadlock = DeadlockMode::kReport;
    } else if (s == "abort") {
      c.deadlock = DeadlockMode::kAbort;
    } else {
      Reject("", "PARKLOT_DEADLOCK", v, kDeadlockRange,
             DeadlockName(defaults.deadlock));
    }
  }
  ReadBool("PARKLOT_SYSCALL_FUTEX", &c.syscall_futex);
  // A path only: a profile on stderr, mixed with the program's own output,
  // is not something pprof can read.
  if (const char* v = getenv("PARKLOT_PROFILE"); v != nullptr && v[0] != '\0') {
    if (strchr(v, '/') != nullptr) {
      c.profile_path = v;
    } else {
      Reject("", "PARKLOT_PROFILE", v, kPathRange, "off");
    }
  }
  if (const char* v = getenv("PARKLOT_PROFILE_RATE")) {
    int64_t n;
    if (ParseSigned(v, 1, kMaxProfileRate, &n)) {
      c.profile_rate = static_cast<int>(n);
    } else {
      Reject("", "PARKLOT_PROFILE_RATE", v, kProfileRateRange,
             Shown(defaults.profile_rate).text);
    }
  }
  return c;
}

int SanitizeConfig(Config* c) {
  const Config defaults;
  int replaced = 0;
  auto text = [](const auto& v) {
    if constexpr (std::is_same_v<std::decay_t<decltype(v)>, Shown>) {
      return static_cast<const char*>(v.text);
    } else {
      return static_cast<const char*>(v);
    }
  };
  auto reject = [&](const char* field, const Shown& value,
                    const char* accepted, const auto& def) {
    Reject("SetConfig ", field, value.text, accepted, text(def));
    ++replaced;
  };
  TableOptions& t = c->table;
  const auto policy = static_cast<int>(t.policy);
  if (t.policy != GrowthPolicy::kThreads && t.policy != GrowthPolicy::kCpus &&
      t.policy != GrowthPolicy::kFixed &&
      t.policy != GrowthPolicy::kAdaptive) {
    reject("table.policy", Shown(policy),
           "kThreads, kCpus, kFixed or kAdaptive",
           GrowthPolicyName(defaults.table.policy));
    t.policy = defaults.table.policy;
  }
  if (!ValidBuckets(t.buckets)) {
    reject("table.buckets", Shown(t.buckets), kBucketsRange,
           Shown(defaults.table.buckets));
    t.buckets = defaults.table.buckets;
  }
  if (!ValidBuckets(t.max_buckets)) {
    reject("table.max_buckets", Shown(t.max_buckets),
           kBucketsRange, Shown(defaults.table.max_buckets));
    t.max_buckets = defaults.table.max_buckets;
  }
  if (!ValidLoadFactor(t.load_factor)) {
    reject("table.load_factor", Shown(t.load_factor),
           kLoadFactorRange,
           Shown(defaults.table.load_factor));
    t.load_factor = defaults.table.load_factor;
  }
  if (c->spin != SpinMode::kAdaptive && c->spin != SpinMode::kOff &&
      c->spin != SpinMode::kFixed) {
    reject("spin", Shown(static_cast<int>(c->spin)),
           "kAdaptive, kOff or kFixed", SpinName(defaults.spin));
    c->spin = defaults.spin;
  }
  if (!ValidSpinBudget(c->spin_budget)) {
    reject("spin_budget", Shown(c->spin_budget),
           "a whole number from 0 to 64",
           Shown(defaults.spin_budget));
    c->spin_budget = defaults.spin_budget;
  }
  if (!ValidFairNs(c->fair_mean_ns)) {
    reject("fair_mean_ns", Shown(c->fair_mean_ns), kFairRange,
           Shown(defaults.fair_mean_ns));
    c->fair_mean_ns = defaults.fair_mean_ns;
  }
  if (c->deadlock != DeadlockMode::kOff &&
      c->deadlock != DeadlockMode::kReport &&
      c->deadlock != DeadlockMode::kAbort) {
    reject("deadlock", Shown(static_cast<int>(c->deadlock)),
           "kOff, kReport or kAbort", DeadlockName(defaults.deadlock));
    c->deadlock = defaults.deadlock;
  }
  if (!ValidProfileRate(c->profile_rate)) {
    reject("profile_rate", Shown(c->profile_rate), kProfileRateRange,
           Shown(defaults.profile_rate).text);
    c->profile_rate = defaults.profile_rate;
  }
  return replaced;
}

const Config& GetConfig() {
  int s = g_state.load(std::memory_order_acquire);
  if (s == 2) return g_config;
  // From before the claim: a handler of this thread would wait for this
  // parse (the loop below), or leave it claimed by jumping out; the shim
  // delivers it at the section's end.
  SectionScope section;
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
  SanitizeConfig(&g_config);
  g_state.store(2, std::memory_order_release);
  return true;
}

void DescribeConfig(const Config& c, TextBuffer* out) {
  out->Add("policy=%s", GrowthPolicyName(c.table.policy));
  if (c.table.policy == GrowthPolicy::kFixed) out->Add(":%zu", c.table.buckets);
  out->Add(" buckets=%zu max_buckets=%zu load_factor=%g spin=%s",
           c.table.buckets, c.table.max_buckets, c.table.load_factor,
           SpinName(c.spin));
  if (c.spin == SpinMode::kFixed) out->Add(":%d", c.spin_budget);
  out->Add(" fair_ns=%ld stats=%d", c.fair_mean_ns, c.stats ? 1 : 0);
  if (c.syscall_futex) out->Add(" syscall_futex=1");
  if (c.deadlock != DeadlockMode::kOff) {
    out->Add(" deadlock=%s", DeadlockName(c.deadlock));
  }
  if (c.profile_path != nullptr) out->Add(" profile_rate=%d", c.profile_rate);
}

}  // namespace parklot::internal
