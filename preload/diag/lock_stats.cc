// PARKLOT_STATS=1: per-lock contention figures and the report at exit (the
// table's figures, growth failures included: runtime/stats.h).
//
// Only enabled runs pay for this: every hook is behind StatsOn(). The table
// is mmap'ed open addressing (no malloc: the hooks run inside
// pthread_mutex_lock), keyed by lock address, of the locks that have had a
// contended acquisition; a full table drops new locks and says how many
// contended acquisitions it dropped. Counts every thread bumps (operations,
// drops) are striped by registry index: one shared counter bounced its
// cache line between every locking thread.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "base/anon_mmap.h"
#include "base/text.h"
#include "hash/fibonacci_hash.h"
#include "preload/diag/deadlock.h"
#include "preload/diag/report.h"
#include "preload/futex_ops.h"
#include "preload/shim.h"
#include "runtime/config.h"
#include "runtime/fork.h"
#include "runtime/stats.h"
#include "runtime/thread_data.h"

namespace parklot::internal::preload {


namespace {

// A lock's figures; its address is the key of the same index.
struct LockStat {
  std::atomic<uint64_t> acquisitions{0};
  std::atomic<uint64_t> contended{0};
  std::atomic<uint64_t> wait_ns{0};
  std::atomic<uintptr_t> caller{0};  // first contended acquirer's caller
};

constexpr size_t kSlots = 1 << 14;
// A lookup probes one group of kProbes keys, one cache line of a compact
// key array: a full table (a program with more distinct locks than slots)
// costs an untracked acquisition that one line, not a walk over the
// statistics.
constexpr size_t kProbes = 8;
struct alignas(64) KeyGroup {
  std::atomic<uintptr_t> key[kProbes];
};
KeyGroup* g_keys = nullptr;  // kSlots / kProbes groups; key i -> g_table[i]
LockStat* g_table = nullptr;

// The lock whose figures are g_table[i] (0: a free slot).
uintptr_t KeyOf(size_t i) {
  return g_keys[i / kProbes].key[i % kProbes].load(std::memory_order_acquire);
}

// Per-thread-ish counters: stripe = registry index modulo kStripes, each
// stripe on its own cache line.
constexpr size_t kStripes = 256;
constexpr int kDropped = static_cast<int>(Op::kCount);
struct alignas(64) Stripe {
  std::atomic<uint64_t> counts[kDropped + 1];
};
Stripe* g_stripes = nullptr;  // kStripes

// A load and a store, not a locked read-modify-write (a full barrier on
// x86, on every acquisition): threads with registry indexes below
// kStripes have stripes of their own; beyond, two threads sharing a stripe
// may lose a count to each other. Never registers the thread (sem_post
// counts here, and may run in a signal handler): unregistered threads
// share stripe 0.
void Bump(int counter) {
  const uint32_t index = internal::t_registered ? internal::t_data.index : 0;
  std::atomic<uint64_t>& c = g_stripes[index % kStripes].counts[counter];
  c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

// A bit per lock-address hash, set when a lock enters the table: an
// uncontended acquisition looks the lock up only if its bit is set. 4 KiB,
// so it stays in cache where the table's cache lines would not.
constexpr size_t kFilterBits = 1 << 15;
std::atomic<uint64_t>* g_filter = nullptr;  // kFilterBits / 64 words

size_t FilterBit(uintptr_t lock) {
  return (lock * 0xC2B2AE3D27D4EB4Full) >> (64 - 15);
}

uint64_t Sum(int counter) {
  uint64_t n = 0;
  for (size_t i = 0; g_stripes != nullptr && i < kStripes; ++i) {
    n += g_stripes[i].counts[counter].load(std::memory_order_relaxed);
  }
  return n;
}

// The lock's statistics; a new entry if `insert` and there is room.
LockStat* Find(uintptr_t lock, bool insert) {
  static_assert(kSlots / kProbes == 1 << 11, "Find takes 11 bits");
  const size_t g = FibonacciHash(lock, 11);
  std::atomic<uintptr_t>* keys = g_keys[g].key;
  for (size_t i = 0; i < kProbes; ++i) {
    uintptr_t cur = keys[i].load(std::memory_order_acquire);
    if (cur == lock) return &g_table[g * kProbes + i];
    if (cur == 0 && insert) {
      if (keys[i].compare_exchange_strong(cur, lock,
                                          std::memory_order_acq_rel) ||
          cur == lock) {
        return &g_table[g * kProbes + i];
      }
    }
  }
  return nullptr;
}

// What the report is about, in this process image: the operations the
// shim served (the counters), and under PARKLOT_SYSCALL_FUTEX=1 the raw
// futex calls its syscall() took, served or passed to the kernel (those
// say what --futex could not serve); and how much of it a fork child
// inherited from its parent (0 in the process the shim started in).
uint64_t Handled() {
  uint64_t n = 0;
  for (int i = 0; i < static_cast<int>(Op::kCount); ++i) n += Sum(i);
  const futex::Counts futex = futex::GetCounts();
  for (const uint64_t c : futex.served) n += c;
  for (const uint64_t c : futex.served2) n += c;
  for (const uint64_t c : futex.kernel) n += c;
  for (const uint64_t c : futex.kernel2) n += c;
  return n;
}
uint64_t g_handled_before_fork = 0;

void NoteHandledAtFork() { g_handled_before_fork = Handled(); }
constexpr ForkHandlers kStatsForkStep{nullptr, nullptr, NoteHandledAtFork};

}  // namespace

void EnableLockStats() {
  // Keys, statistics and counters in one 2 MiB-aligned region the kernel
  // may back with one huge page: a program that walks more lock memory
  // than the TLB covers (millions of mutexes) otherwise pays a page walk
  // for each of these pages on every acquisition, on top of its own.
  constexpr size_t kHuge = size_t{2} << 20;
  constexpr size_t keys = kSlots / kProbes * sizeof(KeyGroup);
  constexpr size_t stripes = kStripes * sizeof(Stripe);
  constexpr size_t filter = kFilterBits / 8;
  constexpr size_t bytes = keys + stripes + filter + kSlots * sizeof(LockStat);
  static_assert(bytes <= kHuge, "one huge page");
  void* p = MapAnonymous(bytes + kHuge, /*reserve=*/false);
  if (p == nullptr) {
    // The report at exit still gives the lot's own figures; without this
    // line its missing served counts and locks would go unexplained.
    SayLine("parklot: no memory for PARKLOT_STATS's lock tables; served "
            "counts and contended locks off");
    return;
  }
  char* base = reinterpret_cast<char*>(
      (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1));
  madvise(base, kHuge, MADV_HUGEPAGE);  // advice: fine if refused
  g_keys = reinterpret_cast<KeyGroup*>(base);
  g_stripes = reinterpret_cast<Stripe*>(base + keys);
  g_filter = reinterpret_cast<std::atomic<uint64_t>*>(base + keys + stripes);
  g_table = reinterpret_cast<LockStat*>(base + keys + stripes + filter);
  RegisterForkStep(ForkStep::kShimStats, &kStatsForkStep);
  SetLockHooks(kHookStats);
}

void RecordAcquire(const void* lock, bool contended, int64_t wait_ns,
                   const void* caller) {
  CountOp(Op::kMutexLock);
  const auto key = reinterpret_cast<uintptr_t>(lock);
  const size_t bit = FilterBit(key);
  std::atomic<uint64_t>& word = g_filter[bit / 64];
  const uint64_t mask = uint64_t{1} << (bit % 64);
  // The table holds locks that have been contended: an uncontended
  // acquisition of any other lock costs no table line (a program with
  // millions of locks would miss the cache on each).
  if (!contended && (word.load(std::memory_order_relaxed) & mask) == 0) return;
  LockStat* s = Find(key, contended);
  if (s == nullptr) {
    if (contended) Bump(kDropped);
    return;
  }
  if (contended && (word.load(std::memory_order_relaxed) & mask) == 0) {
    word.fetch_or(mask, std::memory_order_relaxed);
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

namespace {

// The report, formatted into static storage (threads' stacks may be small;
// no malloc, which may be what ran out), one report at a time: a second
// thread reporting at once (an _exit racing exit) writes the short form.
PARKLOT_LARGE_BSS char g_report[32 * 1024];
std::atomic<bool> g_report_busy{false};

void StatsReport(TextBuffer* out) {
  out->Add("parklot statistics (pid %d)\nconfig: ", getpid());
  DescribeConfig(GetConfig(), out);
  out->Add("\n");
  FormatStats(GetStats(), out);
  out->Add(
      "served by parklot: %lu mutex acquisitions, %lu cond waits, %lu "
      "signals, %lu broadcasts, %lu rwlock acquisitions, %lu sem waits, %lu "
      "sem posts, %lu barrier waits, %lu once calls\n",
      Sum(0), Sum(1), Sum(2), Sum(3), Sum(4), Sum(5), Sum(6), Sum(7), Sum(8));
  futex::FormatCounts(out);  // nothing unless PARKLOT_SYSCALL_FUTEX=1
  if (const char* why = DiagnosticsUnavailable()) {
    out->Add("call sites: module+offset only (no symbolizer: %s)\n", why);
  }
  if (g_table == nullptr) return;
  // The ten locks with the most total wait time.
  LockStat* top[10] = {};
  for (size_t i = 0; i < kSlots; ++i) {
    LockStat* s = &g_table[i];
    if (KeyOf(i) == 0 || s->contended.load() == 0) continue;
    for (int k = 0; k < 10; ++k) {
      if (top[k] == nullptr || s->wait_ns.load() > top[k]->wait_ns.load()) {
        std::copy_backward(top + k, top + 9, top + 10);
        top[k] = s;
        break;
      }
    }
  }
  if (top[0] == nullptr) {
    out->Add("most contended locks: none (no acquisition had to wait)\n");
    return;
  }
  out->Add("most contended locks:\n");
  out->Add("  %-18s %12s %12s %14s  %s\n", "lock", "acquired", "contended",
           "wait ms", "first caller");
  for (LockStat* s : top) {
    if (s == nullptr) break;
    char sym[768];
    DescribeCallSite(reinterpret_cast<const void*>(s->caller.load()), sym,
                     sizeof(sym));
    char lock[256];
    DescribeLock(KeyOf(s - g_table), lock, sizeof(lock));
    out->Add("  %-18s %12lu %12lu %14.3f  %s\n", lock,
             s->acquisitions.load(), s->contended.load(),
             static_cast<double>(s->wait_ns.load()) / 1e6, sym);
  }
  out->Add("  (acquired: counted from the lock's first contended acquisition)\n");

  if (const uint64_t dropped = Sum(kDropped); dropped != 0) {
    out->Add(
        "  (%lu contended acquisitions of locks the table had no room for)\n",
        dropped);
  }
}

}  // namespace

void PrintStatsReport() {
  // A process the shim served nothing in and saw no futex call in (a
  // shell, /bin/true, a fork child that only exits) prints nothing: no
  // served operation also means no contended one, no park and no growth.
  // Without the counters' mapping that is unknown, and the report (its
  // table figures) is printed.
  if (g_stripes != nullptr && Handled() == g_handled_before_fork) return;
  if (!g_report_busy.exchange(true, std::memory_order_acquire)) {
    TextBuffer out(g_report, sizeof(g_report));
    StatsReport(&out);
    WriteReport(Sink::kStats, out.view());
    g_report_busy.store(false, std::memory_order_release);
    return;
  }
  // The table's figures fit on the stack.
  const Stats st = GetStats();
  char line[256];
  TextBuffer out(line, sizeof(line));
  out.Add("parklot statistics (pid %d): another thread is reporting\n"
          "table: %zu buckets, %lu growths, %lu growth failures\n",
          getpid(), st.buckets, st.growths, st.growth_failures);
  WriteReport(Sink::kStats, out.view());
}

}  // namespace parklot::internal::preload
