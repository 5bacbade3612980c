// PARKLOT_STATS=1: per-lock contention figures and the report at exit (the
// table's figures, growth failures included: runtime/stats.h).
//
// Only enabled runs pay for this: every hook is behind `g_stats`. The table
// is mmap'ed open addressing (no malloc: the hooks run inside
// pthread_mutex_lock), keyed by lock address; a full table drops new locks
// and says how many it dropped. Counts every thread bumps (operations,
// drops) are striped by registry index: one shared counter bounced its
// cache line between every locking thread.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <new>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "preload/futex_ops.h"
#include "preload/report.h"
#include "preload/shim.h"
#include "runtime/config.h"
#include "runtime/stats.h"
#include "runtime/thread_data.h"

namespace parklot::preload {

bool g_stats = false;

namespace {

struct LockStat {
  std::atomic<uintptr_t> lock{0};
  std::atomic<uint64_t> acquisitions{0};
  std::atomic<uint64_t> contended{0};
  std::atomic<uint64_t> wait_ns{0};
  std::atomic<uintptr_t> caller{0};  // first contended acquirer's caller
};

constexpr size_t kSlots = 1 << 14;
// Probes per lookup: short, so that a full table (a program with more
// distinct locks than slots) costs each untracked acquisition a few cache
// lines, not a scan.
constexpr size_t kProbes = 8;
LockStat* g_table = nullptr;

// Per-thread-ish counters: stripe = registry index modulo kStripes, each
// stripe on its own cache line.
constexpr size_t kStripes = 64;
constexpr int kDropped = static_cast<int>(Op::kCount);
struct alignas(64) Stripe {
  std::atomic<uint64_t> counts[kDropped + 1];
};
Stripe g_stripes[kStripes];

void Bump(int counter) {
  g_stripes[CurrentThreadData()->index % kStripes].counts[counter].fetch_add(
      1, std::memory_order_relaxed);
}

uint64_t Sum(int counter) {
  uint64_t n = 0;
  for (const Stripe& s : g_stripes) {
    n += s.counts[counter].load(std::memory_order_relaxed);
  }
  return n;
}

LockStat* Find(uintptr_t lock) {
  size_t i = (lock * 0x9E3779B97F4A7C15ull) >> 50;  // 14 bits
  for (size_t probe = 0; probe < kProbes;
       ++probe, i = (i + 1) & (kSlots - 1)) {
    LockStat& s = g_table[i];
    uintptr_t cur = s.lock.load(std::memory_order_acquire);
    if (cur == lock) return &s;
    if (cur == 0) {
      if (s.lock.compare_exchange_strong(cur, lock,
                                         std::memory_order_acq_rel) ||
          cur == lock) {
        return &s;
      }
    }
  }
  return nullptr;
}

}  // namespace

void EnableLockStats() {
  void* p = mmap(nullptr, kSlots * sizeof(LockStat), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return;
  g_table = static_cast<LockStat*>(p);
  g_stats = true;
}

void RecordAcquire(const void* lock, bool contended, int64_t wait_ns,
                   const void* caller) {
  CountOp(Op::kMutexLock);
  LockStat* s = Find(reinterpret_cast<uintptr_t>(lock));
  if (s == nullptr) {
    Bump(kDropped);
    return;
  }
  s->acquisitions.fetch_add(1, std::memory_order_relaxed);
  if (!contended) return;
  s->contended.fetch_add(1, std::memory_order_relaxed);
  s->wait_ns.fetch_add(static_cast<uint64_t>(wait_ns),
                       std::memory_order_relaxed);
  uintptr_t none = 0;
  s->caller.compare_exchange_strong(none, reinterpret_cast<uintptr_t>(caller),
                                    std::memory_order_relaxed);
}

void CountOp(Op op) { Bump(static_cast<int>(op)); }

std::string StatsReport() {
  std::string out = "parklot statistics (pid " + std::to_string(getpid()) +
                    ")\nconfig: " + DescribeConfig(GetConfig()) + "\n";
  out += FormatStats(GetStats());
  absl::StrAppendFormat(
      &out,
      "served by parklot: %u mutex acquisitions, %u cond waits, %u signals, "
      "%u broadcasts\n",
      Sum(0), Sum(1), Sum(2), Sum(3));
  out += futex::FormatCounts();  // empty unless PARKLOT_SYSCALL_FUTEX=1
  if (g_table == nullptr) return out;
  // The ten locks with the most total wait time.
  LockStat* top[10] = {};
  for (size_t i = 0; i < kSlots; ++i) {
    LockStat* s = &g_table[i];
    if (s->lock.load() == 0 || s->contended.load() == 0) continue;
    for (int k = 0; k < 10; ++k) {
      if (top[k] == nullptr || s->wait_ns.load() > top[k]->wait_ns.load()) {
        std::copy_backward(top + k, top + 9, top + 10);
        top[k] = s;
        break;
      }
    }
  }
  if (top[0] == nullptr) {
    out += "most contended locks: none (no acquisition had to wait)\n";
    return out;
  }
  out += "most contended locks:\n";
  absl::StrAppendFormat(&out, "  %-18s %12s %12s %14s  %s\n", "lock",
                        "acquired", "contended", "wait ms", "first caller");
  for (LockStat* s : top) {
    if (s == nullptr) break;
    char sym[768];
    DescribeCallSite(reinterpret_cast<const void*>(s->caller.load()), sym,
                     sizeof(sym));
    absl::StrAppendFormat(&out, "  %#-18x %12u %12u %14.3f  %s\n",
                          s->lock.load(), s->acquisitions.load(),
                          s->contended.load(), s->wait_ns.load() / 1e6, sym);
  }
  if (const uint64_t dropped = Sum(kDropped); dropped != 0) {
    absl::StrAppendFormat(&out, "  (%u acquisitions of untracked locks)\n",
                          dropped);
  }
  return out;
}

void PrintStatsReport() {
  try {
    WriteReport(Sink::kStats, StatsReport());
  } catch (const std::bad_alloc&) {
    // Memory ran out (the report is the one thing here that allocates):
    // the table's figures still fit on the stack.
    const Stats st = GetStats();
    char line[256];
    const int n = absl::SNPrintF(
        line, sizeof(line),
        "parklot statistics (pid %d): no memory for the full report\n"
        "table: %u buckets, %u growths, %u growth failures\n",
        getpid(), st.buckets, st.growths, st.growth_failures);
    if (n > 0) {
      WriteReport(Sink::kStats, absl::string_view(
                                    line, std::min<size_t>(n, sizeof(line) - 1)));
    }
  }
}

}  // namespace parklot::preload
