// PARKLOT_PROFILE: the contention profiles (profile.h says what they
// hold and how the two views meet).
//
// Lock paths here allocate nothing and take no lock: the tables are
// mapped once by EnableProfile, entries are claimed by compare-and-swap,
// figures are atomic adds. Stacks come from libgcc's unwinder
// (_Unwind_Backtrace), which reads the DWARF call frame information every
// Debian object carries: most of Debian's programs and libraries are built
// without frame pointers, and a frame-pointer walk through them stops at
// the first such frame or follows garbage. Against glibc 2.35 and later
// (Debian 12's libgcc_s) the unwinder finds each object's unwind table
// through _dl_find_object, which takes no lock and is async-signal-safe;
// it takes a mutex of its own only in programs that register frames by
// hand (__register_frame_info, JIT compilers), and that mutex's lock path
// here is not profiled (t_walking).
#include "preload/diag/profile.h"

#include <dlfcn.h>
#include <link.h>
#include <string.h>
#include <unistd.h>
#include <unwind.h>

#include "base/anon_mmap.h"
#include "base/text.h"
#include "hash/fibonacci_hash.h"
#include "preload/diag/report.h"
#include "runtime/deadline.h"

extern "C" int ParklotResolveUnwinder();  // own_unwinder.c

namespace parklot::internal::preload {

std::atomic<uint32_t> g_profile_waits{0};

namespace {

// --- The stack table -------------------------------------------------------

// Frames kept per stack, the innermost first; deeper stacks lose their
// outermost frames.
constexpr int kMaxDepth = 32;
constexpr unsigned kStackBits = 12;
constexpr uint32_t kStacks = 1u << kStackBits;
// An insertion probes this many entries past its hash's before it drops
// the stack: a full table costs a bounded walk, not a scan.
constexpr uint32_t kStackProbes = 32;
constexpr uint64_t kStackFree = 0;
constexpr uint64_t kStackBeingWritten = 1;

// One distinct stack and what the two views charge to it. `hash` is
// kStackFree, kStackBeingWritten, or the stack's hash (never 0 or 1) once
// `depth` and `pc` are written: readers compare them only after seeing it.
struct alignas(64) StackEntry {
  std::atomic<uint64_t> hash;
  uint32_t depth;
  uintptr_t pc[kMaxDepth];  // return addresses
  // Counts in 1/kCountOne units: a sample shorter than the rate stands for
  // rate / d waits (profile.h).
  std::atomic<uint64_t> waits, wait_ns;  // as a waiter's stack
  std::atomic<uint64_t> woke, woke_ns;   // as the stack of a release
};

constexpr int kCountBits = 16;
constexpr uint64_t kCountOne = uint64_t{1} << kCountBits;

// --- The slot table --------------------------------------------------------

// One claim per lock address with contended waiters in progress: `key` is
// the address and, in its top 16 bits, how many such waiters wait for it
// (0: a free slot). User addresses fit in 48 bits (x86-64's 4-level
// paging; a lock above, possible only with 5-level paging and an explicit
// hint, is sampled without its holder).
constexpr int kCountShift = 48;
constexpr uint64_t kAddressMask = (uint64_t{1} << kCountShift) - 1;
constexpr uint64_t kOneWaiter = uint64_t{1} << kCountShift;
static_assert(kStacks < 0xffff, "a stack index + 1 fits 16 bits");
struct Slot {
  std::atomic<uint64_t> key;
};
// A lookup reads one group, one cache line; at most this many locks with
// contended waiters at once hash to a group before a claim is dropped.
constexpr unsigned kSlotGroupBits = 8;
constexpr uint32_t kSlotsPerGroup = 8;
constexpr uint32_t kSlots = (1u << kSlotGroupBits) * kSlotsPerGroup;
static_assert(sizeof(Slot) * kSlotsPerGroup == 64, "a group is a cache line");

// Each slot's releases, one cache line, written by the releases of the
// slot's lock while it has a claim (so never by two locks at once), read
// by its waiters once they hold the lock.
// - `lock`: whose release sites these are (a slot may serve another lock
//   later: its sites are then forgotten).
// - `holder`: the last release, as the address and, in its top 16 bits,
//   1 + the stack table index of its stack (0: not stored).
// - `releases`: how many releases recorded (when to refresh a site).
// - `walked_ns`: when a release of the slot last walked its stack.
// - `site`: the stacks of the last kSites release sites (the program's
//   call of unlock, sem_post, ...), as the site in the low 48 bits and
//   1 + the stack's index in the top 16.
constexpr uint32_t kSites = 4;
struct alignas(64) Releases {
  std::atomic<uintptr_t> lock;
  std::atomic<uint64_t> holder;
  std::atomic<uint64_t> releases;
  std::atomic<int64_t> walked_ns;
  std::atomic<uint64_t> site[kSites];
};
static_assert(sizeof(Releases) == 64, "a slot's releases are a cache line");

// Walking a stack costs 1-2 us inside the releaser's critical section, so
// a release reuses the stack last walked at its site, and walks only for a
// site its slot does not know (at most once per kWalkEveryNs per slot:
// hot locks released from more than kSites places would otherwise walk at
// every release) or to refresh a known one (once per kRefreshEvery
// releases, at most once per kRefreshEveryNs: the same call of unlock
// reached from other callers has other outer frames).
constexpr int64_t kWalkEveryNs = 50000;
constexpr uint64_t kRefreshEvery = 64;
constexpr int64_t kRefreshEveryNs = 1000000;

// The locks sampled waits were for, each with its first sampled waiter's
// call site, for the files' header; locks beyond the table are not listed.
constexpr uint32_t kLocks = 1024;
struct LockEntry {
  std::atomic<uintptr_t> lock;
  std::atomic<uintptr_t> site;
};

// What did not make it into the files, and how many sampled waits did.
// `waits` and `wait_ns`: contended waits until the first one sampled, for
// the line that says none was (counted no further: every contended wait
// would otherwise write this line).
struct alignas(64) Counts {
  std::atomic<uint64_t> waits;
  std::atomic<uint64_t> wait_ns;
  std::atomic<uint64_t> locks_full;     // locks not listed
  std::atomic<uint64_t> sampled;        // sampled waits that acquired
  std::atomic<uint64_t> no_stack;       // ... whose waiter stack was lost
  std::atomic<uint64_t> no_holder;      // ... whose holder stack was lost
  std::atomic<uint64_t> stacks_full;    // stacks not stored: no room
  std::atomic<uint64_t> slots_full;     // sampled waits without a slot
  std::atomic<uint64_t> release_walks;  // stacks walked by releases
};

StackEntry* g_stacks = nullptr;  // kStacks
Slot* g_slots = nullptr;         // kSlots, in groups of kSlotsPerGroup
Releases* g_releases = nullptr;  // kSlots, one per slot
LockEntry* g_locks = nullptr;    // kLocks
Counts* g_counts = nullptr;
uint32_t g_rate = 1;
// The shim's own code: frames there are left out of the stacks, so that a
// stack starts at the program's call of pthread_mutex_lock (or unlock).
uintptr_t g_shim_begin = 0;
uintptr_t g_shim_end = 0;

// --- This thread -------------------------------------------------------------

// This thread's profiled wait in progress, if any. One at a time: a wait
// in a signal handler that interrupted a profiled wait is not profiled. A
// wait left by siglongjmp from a handler never finishes; `frame` (an
// address in the frame that began it) tells the next profiled wait that it
// is gone (it was deeper in the stack), and that one releases its claim.
struct ThreadClaim {
  uint64_t number;  // 0: none
  uintptr_t lock;
  int32_t slot;     // -1: no slot (the holder is not tracked)
  uintptr_t frame;
};
constinit __attribute__((tls_model("initial-exec"))) thread_local ThreadClaim
    t_claim;
constinit __attribute__((tls_model("initial-exec"))) thread_local uint64_t
    t_claims;
constinit __attribute__((tls_model("initial-exec"))) thread_local uint64_t
    t_rng;
// Inside this file's stack walk or claim bookkeeping: a lock taken there
// (the unwinder's own mutex) or by a signal handler meanwhile is not
// profiled, which also keeps the walk from re-entering itself.
constinit __attribute__((tls_model("initial-exec"))) thread_local bool
    t_walking;

// xorshift64*: a few cycles, per thread, no shared state.
uint64_t NextRandom() {
  uint64_t x = t_rng;
  if (x == 0) {
    x = FibonacciMix(reinterpret_cast<uintptr_t>(&t_rng) ^
                     static_cast<uint64_t>(MonotonicNanos())) |
        1;
  }
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  t_rng = x;
  return x * 0x2545F4914F6CDD1Dull;
}

// This wait's threshold, uniform in [1, g_rate]: the wait is sampled if
// it lasts at least that long, i.e. with probability min(1, d / g_rate).
int64_t DrawThreshold() {
  return 1 + static_cast<int64_t>(NextRandom() % uint64_t{g_rate});
}

// --- Stacks ----------------------------------------------------------------

// pc[0] is the lock's pseudo-frame; the walk fills the rest.
struct Walk {
  uintptr_t pc[kMaxDepth];
  int depth = 1;
  bool in_shim = true;  // still in the shim's frames on top
};

_Unwind_Reason_Code CollectFrame(struct _Unwind_Context* context, void* arg) {
  Walk* w = static_cast<Walk*>(arg);
  int before_insn = 0;
  uintptr_t pc = _Unwind_GetIPInfo(context, &before_insn);
  if (pc == 0) return _URC_END_OF_STACK;
  // The shim's frames on top (this walk, the entry point) are not the
  // program's: the stack starts below them.
  if (w->in_shim && pc >= g_shim_begin && pc < g_shim_end) {
    return _URC_NO_REASON;
  }
  w->in_shim = false;
  // A signal frame's pc is the interrupted instruction, not a return
  // address: stored as one past it, so that every entry reads as a return
  // address (the file gives the first less one, pprof the others).
  if (before_insn) ++pc;
  w->pc[w->depth++] = pc;
  return w->depth == kMaxDepth ? _URC_END_OF_STACK : _URC_NO_REASON;
}

uint64_t HashOf(const Walk& w) {
  uint64_t h = static_cast<uint64_t>(w.depth);
  for (int i = 0; i < w.depth; ++i) h = FibonacciMix(h ^ w.pc[i]) ^ (h >> 29);
  return h > kStackBeingWritten ? h : h + 2;
}

// The index of `w` in the stack table, inserted if new; -1 if the table
// has no room near its hash (counted).
int32_t Intern(const Walk& w) {
  const uint64_t h = HashOf(w);
  const uint32_t start = static_cast<uint32_t>(h >> (64 - kStackBits));
  for (uint32_t probe = 0; probe < kStackProbes; ++probe) {
    const uint32_t i = (start + probe) & (kStacks - 1);
    StackEntry& e = g_stacks[i];
    uint64_t cur = e.hash.load(std::memory_order_acquire);
    if (cur == kStackFree &&
        e.hash.compare_exchange_strong(cur, kStackBeingWritten,
                                       std::memory_order_acquire)) {
      e.depth = static_cast<uint32_t>(w.depth);
      memcpy(e.pc, w.pc, sizeof(uintptr_t) * static_cast<size_t>(w.depth));
      e.hash.store(h, std::memory_order_release);
      return static_cast<int32_t>(i);
    }
    // An entry being written is passed by: the same stack may then get a
    // second entry, which pprof adds up with the first.
    if (cur == h && e.depth == static_cast<uint32_t>(w.depth) &&
        memcmp(e.pc, w.pc, sizeof(uintptr_t) * static_cast<size_t>(w.depth)) ==
            0) {
      return static_cast<int32_t>(i);
    }
  }
  g_counts->stacks_full.fetch_add(1, std::memory_order_relaxed);
  return -1;
}

// The calling thread's stack below the shim under `lock`'s pseudo-frame,
// interned; -1 if none (an unwinder that found no frame, a full table).
// `*site`: the program's call (0 if none). Called with t_walking set.
__attribute__((noinline)) int32_t CurrentStack(uintptr_t lock,
                                               uintptr_t* site = nullptr) {
  Walk w;
  w.pc[0] = lock;
  _Unwind_Backtrace(CollectFrame, &w);
  if (site != nullptr) *site = w.depth > 1 ? w.pc[1] : 0;
  return w.depth <= 1 ? -1 : Intern(w);
}

// Lists `lock` with `site` for the header, if not listed yet.
void NoteLock(uintptr_t lock, uintptr_t site) {
  uint32_t i = FibonacciHash(lock, 10);
  for (uint32_t probe = 0; probe < 16; ++probe, i = (i + 1) & (kLocks - 1)) {
    uintptr_t cur = g_locks[i].lock.load(std::memory_order_acquire);
    if (cur == lock) return;
    if (cur == 0 && g_locks[i].lock.compare_exchange_strong(
                        cur, lock, std::memory_order_acq_rel)) {
      g_locks[i].site.store(site, std::memory_order_release);
      return;
    }
    if (cur == lock) return;
  }
  g_counts->locks_full.fetch_add(1, std::memory_order_relaxed);
}

// --- Slots -----------------------------------------------------------------

Slot* GroupOf(uintptr_t lock) {
  return &g_slots[FibonacciHash(lock, kSlotGroupBits) * kSlotsPerGroup];
}

// Claims `lock`'s slot for one more contended waiter; the slot's index, or
// -1 if its group is full (counted).
int32_t Claim(uintptr_t lock) {
  if (lock > kAddressMask) return -1;
  Slot* group = GroupOf(lock);
  for (uint32_t i = 0; i < kSlotsPerGroup; ++i) {
    uint64_t k = group[i].key.load(std::memory_order_relaxed);
    for (;;) {
      const bool mine = (k & kAddressMask) == lock && k != 0;
      if (k != 0 && !mine) break;  // another lock's: the next slot
      if (mine && (k >> kCountShift) == 0xffff) break;
      const uint64_t want = k == 0 ? lock | kOneWaiter : k + kOneWaiter;
      if (group[i].key.compare_exchange_weak(k, want,
                                             std::memory_order_acq_rel)) {
        return static_cast<int32_t>(&group[i] - g_slots);
      }
    }
  }
  g_counts->slots_full.fetch_add(1, std::memory_order_relaxed);
  return -1;
}

// Gives back one claim on `slot` for `lock`. A slot that no longer holds
// the claim (a fork child's reset) is left alone.
void Unclaim(int32_t slot, uintptr_t lock) {
  std::atomic<uint64_t>& key = g_slots[slot].key;
  uint64_t k = key.load(std::memory_order_relaxed);
  for (;;) {
    if ((k & kAddressMask) != lock || (k >> kCountShift) == 0) return;
    const uint64_t rest = (k >> kCountShift) == 1 ? 0 : k - kOneWaiter;
    if (key.compare_exchange_weak(k, rest, std::memory_order_acq_rel)) return;
  }
}

// Ends this thread's claim, whoever's frame it was (the caller's copy of
// it is then stale). First marks it ended, so that a signal handler's wait
// meanwhile sees none.
void ReleaseClaim() {
  const ThreadClaim c = t_claim;
  t_claim.number = 0;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (c.slot >= 0) Unclaim(c.slot, c.lock);
  uint32_t n = g_profile_waits.load(std::memory_order_relaxed);
  while (n != 0 && !g_profile_waits.compare_exchange_weak(
                       n, n - 1, std::memory_order_relaxed)) {
  }
}

// --- Writing -----------------------------------------------------------------

void WriteView(bool holders) {
  ReportFile f(Sink::kProfile, holders ? ".holders" : "");
  if (!f.ok()) return;
  const Counts& c = *g_counts;
  const uint64_t sampled = c.sampled.load(std::memory_order_relaxed);
  const uint64_t lost = (holders ? c.no_holder : c.no_stack)
                            .load(std::memory_order_relaxed);
  // The header google-pprof's ReadSynchProfile and Go's parseContention
  // both accept: delays in ns (1e9 "cycles" a second), each row to be
  // multiplied by the sampling period; no attribute but these (Go's
  // parser refuses others). Comments start with '#'.
  // Rows are scaled already (profile.h): a period of 1.
  f.Append("--- contention:\ncycles/second=1000000000\nsampling period=1");
  f.Append("\ndiscarded samples=");
  f.AppendDecimal(lost);
  f.Append("\n# parklot contention profile, pid ");
  f.AppendDecimal(static_cast<unsigned long long>(getpid()));
  f.Append(holders
               ? ": who made threads wait (the stack of the release that "
                 "ended a sampled wait; delay: that wait, ns)\n"
               : ": where threads waited (the waiter's stack at a contended "
                 "acquisition; delay: its wait, ns)\n");
  f.Append("# program: ");
  f.Append(ExecutablePath());
  f.Append("\n# ");
  f.AppendDecimal(sampled);
  f.Append(" sampled waits, by wait time: a wait of d ns kept with probability "
           "min(1, d / ");
  f.AppendDecimal(g_rate);
  f.Append("), counted as max(1, ");
  f.AppendDecimal(g_rate);
  f.Append(" / d) waits; discarded: ");
  f.AppendDecimal(lost);
  f.Append(holders ? " whose release left no stack" : " without a stack");
  f.Append(" (stack table full: ");
  f.AppendDecimal(c.stacks_full.load(std::memory_order_relaxed));
  f.Append(" stacks; slot table full: ");
  f.AppendDecimal(c.slots_full.load(std::memory_order_relaxed));
  f.Append(" waits); ");
  f.AppendDecimal(c.release_walks.load(std::memory_order_relaxed));
  f.Append(" release stacks walked\n");
  // The locks, as the statistics report names them: each row's innermost
  // frame is one of these addresses.
  for (uint32_t i = 0; i < kLocks; ++i) {
    const uintptr_t lock = g_locks[i].lock.load(std::memory_order_acquire);
    if (lock == 0) continue;
    char site[512];
    const uintptr_t pc = g_locks[i].site.load(std::memory_order_acquire);
    if (pc != 0) {
      DescribeCallSite(reinterpret_cast<const void*>(pc), site, sizeof(site));
    } else {
      strcpy(site, "?");
    }
    char name[256];
    const bool named = DescribeLock(lock, name, sizeof(name));
    f.Append("# lock ");
    f.AppendHex(lock);
    // Its symbol, where it has one (the address is what the rows show).
    if (named) {
      f.Append(" (");
      f.Append(name);
      f.Append(")");
    }
    f.Append(": first sampled wait at ");
    f.Append(site);
    f.Append("\n");
  }
  for (uint32_t i = 0; i < kStacks; ++i) {
    const StackEntry& e = g_stacks[i];
    if (e.hash.load(std::memory_order_acquire) <= kStackBeingWritten) continue;
    const uint64_t scaled = (holders ? e.woke : e.waits).load();
    if (scaled == 0) continue;
    // Rounded; a stack with samples shows at least one wait.
    const uint64_t count =
        scaled < kCountOne ? 1 : (scaled + kCountOne / 2) >> kCountBits;
    f.AppendDecimal((holders ? e.woke_ns : e.wait_ns).load());
    f.Append(" ");
    f.AppendDecimal(count);
    f.Append(" @");
    for (uint32_t d = 0; d < e.depth; ++d) {
      f.Append(" ");
      // The first is the lock's pseudo-frame, which pprof takes as it is;
      // the others are return addresses, which it takes less one.
      f.AppendHex(e.pc[d]);
    }
    f.Append("\n");
  }
  // The address space as it is now, which places every pc in its object;
  // the sentinel line ends the rows for Go's parser and is a line
  // google-pprof ignores.
  f.Append("--- Memory map: ---\n");
  f.AppendFileContents("/proc/self/maps");
}

// Finds the range of the object whose code holds the probe address.
struct ShimRange {
  uintptr_t probe, begin, end;
};
int FindShim(struct dl_phdr_info* info, size_t, void* arg) {
  auto* r = static_cast<ShimRange*>(arg);
  uintptr_t begin = UINTPTR_MAX, end = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    const uintptr_t b = info->dlpi_addr + ph.p_vaddr;
    if (b < begin) begin = b;
    if (b + ph.p_memsz > end) end = b + ph.p_memsz;
  }
  if (r->probe < begin || r->probe >= end) return 0;
  r->begin = begin;
  r->end = end;
  return 1;
}

}  // namespace

void EnableProfile(const Config& config) {
  constexpr size_t stacks = kStacks * sizeof(StackEntry);
  constexpr size_t slots = kSlots * sizeof(Slot);
  constexpr size_t releases = kSlots * sizeof(Releases);
  constexpr size_t locks = kLocks * sizeof(LockEntry);
  constexpr size_t bytes = stacks + slots + releases + locks + sizeof(Counts);
  // The walk's libgcc_s, found (or loaded) now rather than by a first walk
  // inside a lock path (own_unwinder.c).
  if (!ParklotResolveUnwinder()) {
    SayLine("parklot: libgcc_s.so.1 (the unwinder) not found; "
            "PARKLOT_PROFILE is off");
    return;
  }
  // No reserve: most of the stack table stays untouched.
  void* p = MapAnonymous(bytes, /*reserve=*/false);
  if (p == nullptr) {
    SayLine("parklot: no memory for the contention profile tables; "
            "PARKLOT_PROFILE is off");
    return;
  }
  char* base = static_cast<char*>(p);
  g_stacks = reinterpret_cast<StackEntry*>(base);
  g_slots = reinterpret_cast<Slot*>(base + stacks);
  g_releases = reinterpret_cast<Releases*>(base + stacks + slots);
  g_locks = reinterpret_cast<LockEntry*>(base + stacks + slots + releases);
  g_counts =
      reinterpret_cast<Counts*>(base + stacks + slots + releases + locks);
  g_rate = static_cast<uint32_t>(config.profile_rate);
  ShimRange r{reinterpret_cast<uintptr_t>(&EnableProfile), 0, 0};
  dl_iterate_phdr(FindShim, &r);
  g_shim_begin = r.begin;
  g_shim_end = r.end;
  SetLockHooks(kHookProfile);
}

void ProfileWait::Begin(const void* lock) {
  if (t_walking) return;
  const auto key = reinterpret_cast<uintptr_t>(lock);
  const auto frame = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  if (t_claim.number != 0) {
    // A profiled wait of this thread has not finished. Its frame above
    // this one: this wait is in a signal handler that interrupted it, and
    // is not profiled. Below: it was left by siglongjmp, and is over.
    if (t_claim.frame > frame) return;
    ReleaseClaim();
  }
  // Every contended wait pays these: two clock reads, a claim and the
  // count of waits in progress (docs/diagnostics.md measures them); only a
  // sampled one walks a stack.
  const int64_t start = MonotonicNanos();
  t_walking = true;
  const int32_t slot = Claim(key);
  t_walking = false;
  lock_ = key;
  claim_ = ++t_claims;
  t_claim.lock = key;
  t_claim.slot = slot;
  t_claim.frame = frame;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_claim.number = claim_;
  // Before the wait begins: a release that sees this count looks for the
  // claim, which is already in its slot.
  g_profile_waits.fetch_add(1, std::memory_order_acq_rel);
  start_ns_ = start;
}

void ProfileWait::Finish(bool acquired) {
  const uint64_t claim = claim_;
  claim_ = 0;
  // Released already (taken for a wait left by siglongjmp): not this
  // thread's wait in progress any more.
  if (t_claim.number != claim) return;
  const int64_t delay = MonotonicNanos() - start_ns_;
  Counts& c = *g_counts;
  if (acquired && delay > 0 && c.sampled.load(std::memory_order_relaxed) == 0) {
    // For the line that says none was sampled, until one is.
    c.waits.fetch_add(1, std::memory_order_relaxed);
    c.wait_ns.fetch_add(static_cast<uint64_t>(delay),
                        std::memory_order_relaxed);
  }
  if (acquired && delay >= DrawThreshold()) {
    const auto ns = static_cast<uint64_t>(delay);
    const uint64_t rate = g_rate;
    // Kept with probability min(1, d / rate): a shorter wait stands for
    // rate / d waits of rate ns each, a longer one for itself (Go's
    // block profile).
    const uint64_t weight = ns >= rate ? kCountOne : (rate << kCountBits) / ns;
    const uint64_t charged = ns >= rate ? ns : rate;
    c.sampled.fetch_add(1, std::memory_order_relaxed);
    // The waiter's stack, walked now that the wait is known to be sampled
    // (inside the caller's critical section: 1-2 us, per sampled wait).
    t_walking = true;
    uintptr_t site = 0;
    const int32_t stack = CurrentStack(lock_, &site);
    NoteLock(lock_, site);
    t_walking = false;
    if (stack >= 0) {
      g_stacks[stack].waits.fetch_add(weight, std::memory_order_relaxed);
      g_stacks[stack].wait_ns.fetch_add(charged, std::memory_order_relaxed);
    } else {
      c.no_stack.fetch_add(1, std::memory_order_relaxed);
    }
    // The last release that recorded for this lock: the one that let this
    // thread in (its store preceded the release this acquisition read),
    // unless that one released in the moment between this thread's first
    // attempt and its claim, when it did not know of this wait; the lock's
    // release before it stands in then.
    const int32_t slot = t_claim.slot;
    const uint64_t h =
        slot >= 0 ? g_releases[slot].holder.load(std::memory_order_acquire)
                  : 0;
    if ((h & kAddressMask) == lock_ && (h >> kCountShift) != 0) {
      StackEntry& e = g_stacks[(h >> kCountShift) - 1];
      e.woke.fetch_add(weight, std::memory_order_relaxed);
      e.woke_ns.fetch_add(charged, std::memory_order_relaxed);
    } else {
      c.no_holder.fetch_add(1, std::memory_order_relaxed);
    }
  }
  ReleaseClaim();
}

// Records the calling release of `lock`, called from `site`, as the
// holder in `r`: the stack last walked at `site` if the slot knows it,
// else (or to refresh it) a walk, if the slot's walks allow one now.
void RecordRelease(Releases& r, uintptr_t lock, uintptr_t site) {
  if (r.lock.load(std::memory_order_relaxed) != lock) {
    for (auto& e : r.site) e.store(0, std::memory_order_relaxed);
    r.lock.store(lock, std::memory_order_relaxed);
  }
  // Releases of one lock are serialized, but for a read lock's: two
  // readers may count one release, which only shifts a refresh.
  const uint64_t n = r.releases.load(std::memory_order_relaxed) + 1;
  uint64_t known = 0;  // site | (stack + 1) << 48, or 0
  uint32_t at = static_cast<uint32_t>(n % kSites);  // where a new site goes
  for (uint32_t i = 0; i < kSites; ++i) {
    const uint64_t e = r.site[i].load(std::memory_order_relaxed);
    if (e != 0 && (e & kAddressMask) == site) {
      known = e;
      at = i;
      break;
    }
  }
  const uint64_t known_stack = known & ~kAddressMask;
  uint64_t holder = lock | known_stack;  // without a stack if none known
  if (known == 0 || n % kRefreshEvery == 0) {
    const int64_t now = MonotonicNanos();
    int64_t last = r.walked_ns.load(std::memory_order_relaxed);
    const int64_t every = known != 0 ? kRefreshEveryNs : kWalkEveryNs;
    if ((last == 0 || now - last >= every) &&
        r.walked_ns.compare_exchange_strong(last, now,
                                            std::memory_order_relaxed)) {
      t_walking = true;
      const int32_t stack = CurrentStack(lock);
      t_walking = false;
      g_counts->release_walks.fetch_add(1, std::memory_order_relaxed);
      // A stack that found no room is recorded as lost.
      const uint64_t tag = static_cast<uint64_t>(stack + 1) << kCountShift;
      if (stack >= 0) r.site[at].store(site | tag, std::memory_order_relaxed);
      holder = lock | tag;
    }
  }
  r.releases.store(n, std::memory_order_relaxed);
  // Before the release itself: the waiter it lets in reads this after its
  // acquisition.
  r.holder.store(holder, std::memory_order_release);
}

void ProfileReleaseSlow(const void* lock, const void* site) {
  const auto key = reinterpret_cast<uintptr_t>(lock);
  if (t_walking || key > kAddressMask) return;
  Slot* group = GroupOf(key);
  for (uint32_t i = 0; i < kSlotsPerGroup; ++i) {
    const uint64_t k = group[i].key.load(std::memory_order_acquire);
    if ((k & kAddressMask) != key || (k >> kCountShift) == 0) continue;
    RecordRelease(g_releases[&group[i] - g_slots], key,
                  reinterpret_cast<uintptr_t>(site) & kAddressMask);
    return;
  }
}

void WriteProfiles() {
  // A process that sampled no wait writes nothing: an empty profile says
  // nothing, and a process that only runs another (timeout, a shell, a
  // launcher), given the same path without %p, would replace that
  // program's profile with its own empty one when it exits after it.
  if (g_counts == nullptr) return;
  if (g_counts->sampled.load(std::memory_order_relaxed) == 0) {
    // But a process that waited and has nothing to show says so, on the
    // report sink, so that a missing file is not a mystery.
    const uint64_t waits = g_counts->waits.load(std::memory_order_relaxed);
    if (waits == 0) return;
    char line[256];
    TextBuffer text(line, sizeof(line));
    text.Add("parklot: PARKLOT_PROFILE: pid %d sampled none of its %llu "
             "contended waits (%llu us in all; one sample per %d ns of "
             "wait, PARKLOT_PROFILE_RATE): no profile written\n",
             static_cast<int>(getpid()),
             static_cast<unsigned long long>(waits),
             static_cast<unsigned long long>(
                 g_counts->wait_ns.load(std::memory_order_relaxed) / 1000),
             static_cast<int>(g_rate));
    WriteReport(Sink::kReport, text.view());
    return;
  }
  WriteView(false);
  WriteView(true);
}

void ProfileResetInChild() {
  if (g_counts == nullptr) return;
  for (uint32_t i = 0; i < kSlots; ++i) {
    g_slots[i].key.store(0, std::memory_order_relaxed);
    Releases& r = g_releases[i];
    if (r.lock.load(std::memory_order_relaxed) == 0) continue;
    r.lock.store(0, std::memory_order_relaxed);
    r.holder.store(0, std::memory_order_relaxed);
    r.releases.store(0, std::memory_order_relaxed);
    r.walked_ns.store(0, std::memory_order_relaxed);
    for (auto& e : r.site) e.store(0, std::memory_order_relaxed);
  }
  g_profile_waits.store(0, std::memory_order_relaxed);
  // Only the entries that hold figures are written: the rest of the table
  // stays shared with the parent, untouched.
  for (uint32_t i = 0; i < kStacks; ++i) {
    StackEntry& e = g_stacks[i];
    if (e.waits.load(std::memory_order_relaxed) != 0 ||
        e.woke.load(std::memory_order_relaxed) != 0) {
      e.waits.store(0, std::memory_order_relaxed);
      e.wait_ns.store(0, std::memory_order_relaxed);
      e.woke.store(0, std::memory_order_relaxed);
      e.woke_ns.store(0, std::memory_order_relaxed);
    }
  }
  for (uint32_t i = 0; i < kLocks; ++i) {
    if (g_locks[i].lock.load(std::memory_order_relaxed) != 0) {
      g_locks[i].lock.store(0, std::memory_order_relaxed);
      g_locks[i].site.store(0, std::memory_order_relaxed);
    }
  }
  Counts& c = *g_counts;
  c.waits.store(0);
  c.wait_ns.store(0);
  c.locks_full.store(0);
  c.sampled.store(0);
  c.no_stack.store(0);
  c.no_holder.store(0);
  c.stacks_full.store(0);
  c.slots_full.store(0);
  c.release_walks.store(0);
}

}  // namespace parklot::internal::preload
