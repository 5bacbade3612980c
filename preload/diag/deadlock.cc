// PARKLOT_DEADLOCK: lock-order graph and wait-for checks (deadlock.h says
// what they find). Part of the diagnostics object (diag.h): the shim's state
// only through DiagHost.

#include <dlfcn.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <new>

#include "absl/base/const_init.h"
#include "absl/base/internal/spinlock.h"
#include "absl/debugging/stacktrace.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/internal/graphcycles.h"
#include "base/anon_mmap.h"
#include "hash/fibonacci_hash.h"
#include "preload/diag/diag.h"

namespace parklot::internal::preload {


namespace {

using absl::base_internal::SpinLock;
using absl::base_internal::SpinLockHolder;
using absl::synchronization_internal::GraphCycles;
using absl::synchronization_internal::GraphId;

const DiagHost* g_host = nullptr;
bool g_abort = false;
// The slot id of a free record (the shim's slot ids start at 1).
constexpr uint32_t kNoSlot = 0;

// --- Per-thread records, by registry index ---------------------------------

constexpr int kMaxHeld = 32;
constexpr int kEdgeCache = 32;

struct Held {
  std::atomic<uintptr_t> lock{0};
  std::atomic<const void*> site{nullptr};
  LockMode mode = LockMode::kExclusive;
  uint64_t generation = 0;  // the lock's, read when it was taken (Generation)
};

// Written by its thread; read (racily, relaxed) by threads checking for a
// deadlock. A record is reset when a new thread (another slot id) takes
// over a registry index.
struct ThreadRecord {
  std::atomic<uint32_t> slot{kNoSlot};
  std::atomic<pid_t> tid{0};
  std::atomic<int> depth{0};
  int overflow = 0;  // held locks beyond kMaxHeld (untracked)
  bool busy = false;  // inside DeadlockBeforeLock (a signal handler's lock
                      // must not re-enter the graph's spinlock)
  Held held[kMaxHeld];
  std::atomic<uintptr_t> waiting_on{0};
  std::atomic<const void*> waiting_site{nullptr};
  LockMode waiting_mode = LockMode::kExclusive;
  // Edges this thread has seen in the graph, between these generations of
  // their locks (GenerationsKey), valid while g_epoch is.
  struct {
    uintptr_t from, to;
    uint64_t generations, epoch;
  } cache[kEdgeCache];
};

constexpr uint32_t kRecords = 1 << 14;  // threads beyond are not tracked
ThreadRecord* g_records = nullptr;
std::atomic<uint32_t> g_records_used{0};  // highest index + 1 seen

// The calling thread's record, reset when a new thread (another slot id)
// has the registry index; nullptr for a thread past its exit hook (it gave
// its index back) or beyond kRecords. No thread-local of this object's own:
// a dlopen'ed object's TLS is allocated by malloc at each thread's first
// access.
ThreadRecord* Record() {
  uint32_t index, slot;
  if (!g_host->thread(&index, &slot) || index >= kRecords) return nullptr;
  ThreadRecord* r = &g_records[index];
  if (r->slot.load(std::memory_order_relaxed) != slot) {
    r->depth.store(0, std::memory_order_relaxed);
    r->overflow = 0;
    r->busy = false;
    r->waiting_on.store(0, std::memory_order_relaxed);
    for (auto& c : r->cache) c.epoch = ~uint64_t{0};
    r->tid.store(g_host->tid(), std::memory_order_relaxed);
    r->slot.store(slot, std::memory_order_release);
    uint32_t used = g_records_used.load(std::memory_order_relaxed);
    while (used <= index &&
           !g_records_used.compare_exchange_weak(used, index + 1,
                                                 std::memory_order_relaxed)) {
    }
  }
  return r;
}

int FindHeld(const ThreadRecord* r, uintptr_t lock) {
  for (int i = r->depth.load(std::memory_order_relaxed) - 1; i >= 0; --i) {
    if (r->held[i].lock.load(std::memory_order_relaxed) == lock) return i;
  }
  return -1;
}

// --- The order graph ---------------------------------------------------------

ABSL_CONST_INIT SpinLock g_graph_mu(absl::kConstInit,
                                    absl::base_internal::SCHEDULE_KERNEL_ONLY);
alignas(GraphCycles) unsigned char g_graph_storage[sizeof(GraphCycles)];
GraphCycles* g_graph = nullptr;  // guarded by g_graph_mu
// Bumped when a node goes: per-thread edge caches are stale.
std::atomic<uint64_t> g_epoch{0};
// A bit per address hash, set for every address given a node (never
// cleared): DeadlockForget skips the spinlock for locks never in the graph.
constexpr size_t kKnownBits = 1 << 16;
std::atomic<uint64_t> g_known[kKnownBits / 64];

size_t KnownBit(uintptr_t lock) { return FibonacciHash(lock, 16); }

constexpr int kStack = 8;
// What made an edge: where and by whom each end was taken, and the stack of
// the acquisition that added it. `rejected`: it would close a cycle and
// was left out of the graph (reported, or found harmless).
struct EdgeInfo {
  uint64_t from = 0, to = 0;  // GraphId handles (0: free)
  const void* from_site = nullptr;
  const void* to_site = nullptr;
  pid_t tid = 0;
  LockMode from_mode = LockMode::kExclusive, to_mode = LockMode::kExclusive;
  bool rejected = false;
  int depth = 0;
  void* stack[kStack];
};
constexpr size_t kEdges = 1 << 15;
constexpr size_t kEdgeProbes = 16;
EdgeInfo* g_edges = nullptr;  // guarded by g_graph_mu

size_t EdgeHash(uint64_t from, uint64_t to) {
  return (FibonacciMix(from) ^ (to * 0xC2B2AE3D27D4EB4Full)) >> (64 - 15);
}

// The edge's record, or nullptr.
EdgeInfo* FindEdge(GraphId from, GraphId to) {
  size_t i = EdgeHash(from.handle, to.handle);
  for (size_t p = 0; p < kEdgeProbes; ++p, i = (i + 1) & (kEdges - 1)) {
    EdgeInfo& e = g_edges[i];
    if (e.from == from.handle && e.to == to.handle) return &e;
  }
  return nullptr;
}

// A free record for a new edge: an unused one, or one whose node is gone.
// nullptr when every probed record is live (the edge then has no record).
EdgeInfo* NewEdge(GraphId from, GraphId to) {
  size_t i = EdgeHash(from.handle, to.handle);
  for (size_t p = 0; p < kEdgeProbes; ++p, i = (i + 1) & (kEdges - 1)) {
    EdgeInfo& e = g_edges[i];
    if (e.from == 0 || !g_graph->HasNode(GraphId{e.from}) ||
        !g_graph->HasNode(GraphId{e.to})) {
      e = EdgeInfo();
      e.from = from.handle;
      e.to = to.handle;
      return &e;
    }
  }
  return nullptr;
}

// Graph nodes. A mutex is one node, its address. An rwlock is four, at
// addresses inside the object (locks are 8-aligned, so no two locks' nodes
// meet): held for writing (+0), wanted for writing (+1), wanted for
// reading (+2), held for reading (+3), with the edges of the waits that
// block: a wanted write waits for held reads and writes, a wanted read for
// held writes. A wanted read that queues behind waiting writers
// (kReadQueued) waits as a write does.
constexpr uintptr_t kHeldWrite = 0, kWantWrite = 1, kWantRead = 2,
                    kHeldRead = 3;

bool IsRwlock(LockMode m) { return m != LockMode::kExclusive; }

// --- Generations: a new lock at an address the graph knows ---------------
//
// A lock's memory may be freed and a new lock made at its address with no
// call the shim sees: std::mutex and std::shared_mutex are made by their
// constructors and freed with their object, a static initializer may be
// assigned into recycled memory, a frame's mutex dies with the frame. So
// each lock the shim serves gets a generation, a number unique in the
// process, when it is first taken under the detector, kept in the lock
// itself: in bytes glibc leaves unused for the kinds the shim serves and
// that every way of making a lock writes as zero (a mutex's __list.__next,
// which glibc uses for robust mutexes only; an rwlock's __pad2). A zero
// there is a new lock. The graph records each lock address's generation
// (g_generations); met with a later one, the address holds another lock,
// whose nodes and edges go (docs/design.md §5.11).
//
// Only a lock being taken is read or written, when the program hands it to
// a lock call (its memory is live then). A held lock's generation is the
// one read when it was taken: a held list may name a lock that no longer
// exists (a normal mutex unlocked by another thread stays on its locker's
// list), and its memory may be anything by now.

std::atomic<uint64_t> g_last_generation{0};

// Where `lock`, taken in `mode`, keeps its generation; nullptr for kinds
// glibc keeps (robust, priority, process-shared mutexes; process-shared
// rwlocks), whose __list is glibc's or which other processes share: they
// are made only by pthread_*_init, which forgets the address anyway
// (DeadlockForget).
uint64_t* GenerationWord(const void* lock, LockMode mode) {
  if (IsRwlock(mode)) {
    auto* rw = static_cast<pthread_rwlock_t*>(const_cast<void*>(lock));
    if (__atomic_load_n(&rw->__data.__shared, __ATOMIC_RELAXED) != 0) {
      return nullptr;
    }
    return reinterpret_cast<uint64_t*>(&rw->__data.__pad2);
  }
  auto* m = static_cast<pthread_mutex_t*>(const_cast<void*>(lock));
  // PTHREAD_MUTEX_ROBUST_NORMAL_NP, _PRIO_INHERIT_NP, _PRIO_PROTECT_NP and
  // glibc's process-shared bit (the shim's kKindGlibcOwned).
  constexpr int kGlibcKeeps = 16 | 32 | 64 | 128;
  if (__atomic_load_n(&m->__data.__kind, __ATOMIC_RELAXED) & kGlibcKeeps) {
    return nullptr;
  }
  return reinterpret_cast<uint64_t*>(&m->__data.__list.__next);
}
static_assert(sizeof(__pthread_internal_list*) == sizeof(uint64_t) &&
                  offsetof(pthread_mutex_t, __data.__list.__next) % 8 == 0,
              "a mutex's __list.__next holds an aligned 64-bit word");
static_assert(sizeof(unsigned long) == sizeof(uint64_t) &&
                  offsetof(pthread_rwlock_t, __data.__pad2) % 8 == 0,
              "an rwlock's __pad2 is an aligned 64-bit word");

// The generation of `lock`, which the calling thread is taking in `mode`,
// given now if it has none; 0 for kinds glibc keeps.
uint64_t Generation(const void* lock, LockMode mode) {
  uint64_t* word = GenerationWord(lock, mode);
  if (word == nullptr) return 0;
  uint64_t g = __atomic_load_n(word, __ATOMIC_RELAXED);
  if (g != 0) return g;
  const uint64_t mine =
      g_last_generation.fetch_add(1, std::memory_order_relaxed) + 1;
  // Two threads taking a new lock at once: the first write stands.
  if (__atomic_compare_exchange_n(word, &g, mine, false, __ATOMIC_RELAXED,
                                  __ATOMIC_RELAXED)) {
    return mine;
  }
  return g;
}

// Each address's generation in the graph, open addressing with no
// deletion (an address keeps its entry while the graph may hold nodes for
// it). An address that finds no room goes unchecked (the old behaviour).
struct AddressGeneration {
  uintptr_t lock;  // 0: free
  uint64_t generation;
};
constexpr unsigned kGenerationBits = 18;
constexpr size_t kGenerations = size_t{1} << kGenerationBits;
constexpr size_t kGenerationProbes = 16;
AddressGeneration* g_generations = nullptr;  // guarded by g_graph_mu

void RemoveNodes(uintptr_t lock) {
  for (uintptr_t role : {kHeldWrite, kWantWrite, kWantRead, kHeldRead}) {
    g_graph->RemoveNode(reinterpret_cast<void*>(lock + role));
  }
}

// Under g_graph_mu, before `lock`'s nodes take part in an edge, with the
// generation the caller read from the lock: drops the nodes (and edges) of
// an earlier lock at the address. False if `generation` is itself earlier
// than the address's: a held list's entry for a lock that is gone, which
// makes no edge. Generations at one address only grow: a lock is given one
// when first taken, after every earlier lock there was taken and freed.
bool Revalidate(uintptr_t lock, uint64_t generation) {
  if (generation == 0) return true;
  const size_t start = FibonacciHash(lock, kGenerationBits);
  for (size_t p = 0; p < kGenerationProbes; ++p) {
    AddressGeneration& e = g_generations[(start + p) & (kGenerations - 1)];
    if (e.lock == lock) {
      if (generation < e.generation) return false;
      if (generation > e.generation) {
        RemoveNodes(lock);
        e.generation = generation;
      }
      return true;
    }
    if (e.lock == 0) {
      // First seen with a generation: nodes at the address (a lock of a
      // kind glibc keeps, destroyed and its memory reused) are another
      // lock's.
      RemoveNodes(lock);
      e.lock = lock;
      e.generation = generation;
      return true;
    }
  }
  return true;
}

GraphId Node(uintptr_t lock, uintptr_t role, bool rwlock) {
  g_known[KnownBit(lock) / 64].fetch_or(uint64_t{1} << (KnownBit(lock) % 64),
                                        std::memory_order_relaxed);
  const GraphId id = g_graph->GetId(reinterpret_cast<void*>(lock + role));
  if (rwlock) {
    // An rwlock: its own edges, added with its nodes (they close no cycle:
    // edges from other locks lead into wanted nodes only, and out of held
    // ones only).
    const GraphId hw = g_graph->GetId(reinterpret_cast<void*>(lock));
    const GraphId ww = g_graph->GetId(reinterpret_cast<void*>(lock + 1));
    const GraphId wr = g_graph->GetId(reinterpret_cast<void*>(lock + 2));
    const GraphId hr = g_graph->GetId(reinterpret_cast<void*>(lock + 3));
    if (!g_graph->HasEdge(ww, hw)) {
      g_graph->InsertEdge(ww, hw);
      g_graph->InsertEdge(ww, hr);
      g_graph->InsertEdge(wr, hw);
    }
  }
  return id;
}

// The node a lock held in `mode` has edges from.
GraphId HeldNode(uintptr_t lock, LockMode mode) {
  if (!IsRwlock(mode)) return Node(lock, kHeldWrite, false);
  return Node(lock, mode == LockMode::kWrite ? kHeldWrite : kHeldRead, true);
}

// The node a lock wanted in `mode` has edges to.
GraphId WantedNode(uintptr_t lock, LockMode mode) {
  if (!IsRwlock(mode)) return Node(lock, kHeldWrite, false);
  return Node(lock, mode == LockMode::kRead ? kWantRead : kWantWrite, true);
}

// --- Reports -----------------------------------------------------------------

// Reports are rare and formatted into one static buffer (threads' stacks may
// be small), under this lock, outside g_graph_mu.
ABSL_CONST_INIT SpinLock g_report_mu(absl::kConstInit,
                                     absl::base_internal::SCHEDULE_KERNEL_ONLY);
char g_text[64 * 1024];
size_t g_len = 0;

void Add(const absl::FormatSpec<>& f) {
  const int n = absl::SNPrintF(g_text + g_len, sizeof(g_text) - g_len, f);
  if (n > 0) g_len = std::min(sizeof(g_text) - 1, g_len + n);
}
template <typename... Args>
void Add(const absl::FormatSpec<Args...>& f, const Args&... args) {
  const int n =
      absl::SNPrintF(g_text + g_len, sizeof(g_text) - g_len, f, args...);
  if (n > 0) g_len = std::min(sizeof(g_text) - 1, g_len + n);
}

struct Site {
  char text[768];
  explicit Site(const void* pc) {
    g_host->describe_call_site(pc, text, sizeof(text));
  }
};

// names.cc's, kept by InstallDeadlockHooks.
bool (*g_name_lock)(uintptr_t, char*, size_t) = nullptr;

// A lock as the reports name it: its symbol in static storage, else its
// address.
struct Lock {
  char text[256];
  explicit Lock(uintptr_t lock) {
    if (g_name_lock == nullptr || !g_name_lock(lock, text, sizeof(text))) {
      snprintf(text, sizeof(text), "%#lx", static_cast<unsigned long>(lock));
    }
  }
};

const char* ModeName(LockMode m) {
  switch (m) {
    case LockMode::kExclusive:
      return "";
    case LockMode::kWrite:
      return " (rwlock, write)";
    default:
      return " (rwlock, read)";
  }
}

// A frame of the shim or of this object: not the program's.
bool InShim(const void* pc) {
  Dl_info self, info;
  if (dladdr(pc, &info) == 0) return false;
  return info.dli_fbase == g_host->shim_base ||
         (dladdr(reinterpret_cast<void*>(&InShim), &self) != 0 &&
          info.dli_fbase == self.dli_fbase);
}

// A lock-order cycle, copied out of the graph for the report.
constexpr int kMaxCycle = 16;
struct Cycle {
  int n = 0;              // edges
  uintptr_t lock[kMaxCycle];   // edge i goes lock[i] -> lock[(i+1) % n]
  EdgeInfo edge[kMaxCycle];
};

void ReportCycle(const Cycle& c) {
  SpinLockHolder h(&g_report_mu);
  g_len = 0;
  Add("parklot: lock-order cycle (a potential deadlock) among %d locks, pid "
      "%d:\n",
      c.n, getpid());
  for (int i = 0; i < c.n; ++i) {
    const EdgeInfo& e = c.edge[i];
    const uintptr_t to = c.lock[(i + 1) % c.n];
    if (e.tid == 0) {
      Add("  lock %s then lock %s (where: not recorded)\n", Lock(c.lock[i]).text,
          Lock(to).text);
      continue;
    }
    Add("  thread %d holds lock %s%s, taken at %s\n", e.tid, Lock(c.lock[i]).text,
        ModeName(e.from_mode), Site(e.from_site).text);
    Add("      and takes lock %s%s at %s%s\n", Lock(to).text, ModeName(e.to_mode),
        Site(e.to_site).text,
        i == c.n - 1 ? "   <- closes the cycle" : "");
  }
  Add("stacks of the acquisitions that made each edge:\n");
  for (int i = 0; i < c.n; ++i) {
    const EdgeInfo& e = c.edge[i];
    Add("  lock %s -> %s (thread %d):\n", Lock(c.lock[i]).text,
        Lock(c.lock[(i + 1) % c.n]).text, e.tid);
    // The shim's own frames first: not the program's.
    int f = 0;
    while (f < e.depth && InShim(e.stack[f])) ++f;
    for (int k = 0; f < e.depth; ++f, ++k) {
      Add("    #%d %s\n", k, Site(e.stack[f]).text);
    }
  }
  g_host->report(g_text, g_len);
}

// Adds the edge `held` -> `lock` (of `generation`), or fills `*cycle` with
// the cycle it would close (the edge is then left out). Returns whether it
// found a cycle. Under g_graph_mu.
bool AddEdge(const ThreadRecord* r, const Held& held, uintptr_t lock,
             LockMode mode, uint64_t generation, const void* site,
             Cycle* cycle) {
  const uintptr_t held_lock = held.lock.load(std::memory_order_relaxed);
  if (!Revalidate(held_lock, held.generation) ||
      !Revalidate(lock, generation)) {
    return false;
  }
  const GraphId from = HeldNode(held_lock, held.mode);
  const GraphId to = WantedNode(lock, mode);
  if (FindEdge(from, to) != nullptr || g_graph->HasEdge(from, to)) {
    return false;
  }
  EdgeInfo here;
  here.from = from.handle;
  here.to = to.handle;
  here.from_site = held.site.load(std::memory_order_relaxed);
  here.to_site = site;
  here.tid = r->tid.load(std::memory_order_relaxed);
  here.from_mode = held.mode;
  here.to_mode = mode;
  here.depth = absl::GetStackTrace(here.stack, kStack, 0);
  const bool inserted = g_graph->InsertEdge(from, to);
  here.rejected = !inserted;
  if (EdgeInfo* e = NewEdge(from, to)) *e = here;
  if (inserted) return false;
  // The path to -> ... -> from, then the new edge back to `to`; an
  // rwlock's own edges (between nodes of one lock) are not listed.
  GraphId path[2 * kMaxCycle];
  const int len = g_graph->FindPath(to, from, 2 * kMaxCycle, path);
  cycle->n = 0;
  if (len < 1 || len > 2 * kMaxCycle) return false;
  const auto base = [](GraphId id) {
    return reinterpret_cast<uintptr_t>(g_graph->Ptr(id)) & ~uintptr_t{7};
  };
  for (int i = 0; i + 1 < len && cycle->n < kMaxCycle - 1; ++i) {
    if (base(path[i]) == base(path[i + 1])) continue;
    const EdgeInfo* e = FindEdge(path[i], path[i + 1]);
    cycle->lock[cycle->n] = base(path[i]);
    cycle->edge[cycle->n++] = e != nullptr ? *e : EdgeInfo();
  }
  cycle->lock[cycle->n] = base(from);
  cycle->edge[cycle->n++] = here;
  return true;
}

// Edges known to be in the graph (or rejected), for lookups without the
// graph's spinlock: a per-thread cache, then a process-wide set of 64-bit
// fingerprints of (from, to, their generations, epoch). A fingerprint
// collision would hide one edge (odds 2^-64 a lookup); a full probe window
// overwrites its first entry (the set is a cache: a miss only costs the
// spinlock). With the generations in the key, an edge between new locks at
// old addresses is a miss, and takes the path that revalidates them.
constexpr size_t kKnownEdges = 1 << 16;
constexpr size_t kKnownProbes = 4;
std::atomic<uint64_t>* g_known_edges = nullptr;

// An edge as the caches know it: the two locks' addresses with their modes
// in the low bits (locks are 8-aligned; the graph's nodes depend on the
// modes), and a mix of their generations.
struct EdgeKey {
  uintptr_t from, to;
  uint64_t generations;
};

uint64_t GenerationsKey(uint64_t from, uint64_t to) {
  return FibonacciMix(from) ^ to;
}

uint64_t Fingerprint(const EdgeKey& k, uint64_t epoch) {
  uint64_t h = FibonacciMix(k.from);
  h = (h ^ (h >> 29) ^ k.to) * 0xBF58476D1CE4E5B9ull;
  h = (h ^ (h >> 31) ^ k.generations) * 0x94D049BB133111EBull;
  h = (h ^ (h >> 29) ^ epoch) * 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return h | 1;  // 0 marks a free entry
}

auto& CacheEntry(ThreadRecord* r, const EdgeKey& k) {
  return r->cache[(k.from ^ (k.to >> 4) ^ k.generations) % kEdgeCache];
}

void Remember(ThreadRecord* r, const EdgeKey& k, uint64_t epoch) {
  auto& c = CacheEntry(r, k);
  c.from = k.from;
  c.to = k.to;
  c.generations = k.generations;
  c.epoch = epoch;
}

bool CacheHit(ThreadRecord* r, const EdgeKey& k, uint64_t epoch) {
  const auto& c = CacheEntry(r, k);
  if (c.epoch == epoch && c.from == k.from && c.to == k.to &&
      c.generations == k.generations) {
    return true;
  }
  const uint64_t f = Fingerprint(k, epoch);
  const size_t i = f % (kKnownEdges - kKnownProbes);
  for (size_t p = 0; p < kKnownProbes; ++p) {
    if (g_known_edges[i + p].load(std::memory_order_relaxed) == f) {
      Remember(r, k, epoch);
      return true;
    }
  }
  return false;
}

// Under g_graph_mu, for an edge now in the graph (or rejected, or left out
// as a gone lock's).
void CacheAdd(ThreadRecord* r, const EdgeKey& k, uint64_t epoch) {
  Remember(r, k, epoch);
  const uint64_t f = Fingerprint(k, epoch);
  const size_t i = f % (kKnownEdges - kKnownProbes);
  size_t slot = i;
  for (size_t p = 0; p < kKnownProbes; ++p) {
    const uint64_t cur = g_known_edges[i + p].load(std::memory_order_relaxed);
    if (cur == f) return;
    if (cur == 0) {
      slot = i + p;
      break;
    }
  }
  g_known_edges[slot].store(f, std::memory_order_relaxed);
}

// --- Wait-for cycles ---------------------------------------------------------

// Which threads hold `lock`: the record that lists it, preferring one that
// is itself waiting (a read lock may have many holders).
ThreadRecord* HolderOf(uintptr_t lock, int* held_index) {
  ThreadRecord* found = nullptr;
  const uint32_t used = g_records_used.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < used; ++i) {
    ThreadRecord* r = &g_records[i];
    if (r->slot.load(std::memory_order_acquire) == kNoSlot) continue;
    const int k = FindHeld(r, lock);
    if (k < 0) continue;
    found = r;
    *held_index = k;
    if (r->waiting_on.load(std::memory_order_relaxed) != 0) break;
  }
  return found;
}

// Wait-for cycles already reported, by a hash of their locks.
constexpr int kReportedWaits = 64;
uint64_t g_reported_waits[kReportedWaits];
int g_reported_wait_count = 0;  // guarded by g_report_mu

// Records `key`; false if it was there already. Under g_report_mu.
bool FirstReport(uint64_t key) {
  for (int i = 0; i < g_reported_wait_count; ++i) {
    if (g_reported_waits[i] == key) return false;
  }
  if (g_reported_wait_count < kReportedWaits) {
    g_reported_waits[g_reported_wait_count++] = key;
  }
  return true;
}

bool ForkPrepare() {
  g_report_mu.Lock();
  g_graph_mu.Lock();
  return true;
}
void ForkParent() {
  g_graph_mu.Unlock();
  g_report_mu.Unlock();
}
// Only the forking thread lives on: the others' records would name locks
// no thread of the child holds.
void ForkChild() {
  g_graph_mu.Unlock();
  g_report_mu.Unlock();
  uint32_t index, self;
  if (!g_host->thread(&index, &self)) self = kNoSlot;
  const uint32_t used = g_records_used.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < used; ++i) {
    ThreadRecord& r = g_records[i];
    if (r.slot.load(std::memory_order_relaxed) == self) {
      r.tid.store(g_host->tid(), std::memory_order_relaxed);
      continue;
    }
    r.slot.store(kNoSlot, std::memory_order_relaxed);
    r.depth.store(0, std::memory_order_relaxed);
    r.waiting_on.store(0, std::memory_order_relaxed);
  }
}

bool Enable(bool abort_on_deadlock) {
  // Mostly untouched: no commit charge for the whole size.
  constexpr bool kReserve = false;
  void* records = MapAnonymous(sizeof(ThreadRecord) * kRecords, kReserve);
  void* edges = MapAnonymous(sizeof(EdgeInfo) * kEdges, kReserve);
  void* known =
      MapAnonymous(sizeof(std::atomic<uint64_t>) * kKnownEdges, kReserve);
  void* generations =
      MapAnonymous(sizeof(AddressGeneration) * kGenerations, kReserve);
  if (records == nullptr || edges == nullptr || known == nullptr ||
      generations == nullptr) {
    static const char kMsg[] =
        "parklot: no memory for PARKLOT_DEADLOCK's tables; detection off\n";
    g_host->report(kMsg, sizeof(kMsg) - 1);
    return false;
  }
  // Zero-filled memory is what the default constructors would write.
  g_records = static_cast<ThreadRecord*>(records);
  g_edges = static_cast<EdgeInfo*>(edges);
  g_known_edges = static_cast<std::atomic<uint64_t>*>(known);
  g_generations = static_cast<AddressGeneration*>(generations);
  g_graph = new (g_graph_storage) GraphCycles();
  g_abort = abort_on_deadlock;
  g_host->fork_step(ForkPrepare, ForkParent, ForkChild);
  return true;
}

void BeforeLock(const void* lock_ptr, LockMode mode, const void* site) {
  ThreadRecord* r = Record();
  if (r == nullptr || r->busy) return;
  const auto lock = reinterpret_cast<uintptr_t>(lock_ptr);
  const int depth = r->depth.load(std::memory_order_relaxed);
  // Nothing held, or a lock the thread holds already (a recursive mutex,
  // a recursive read lock; a normal mutex re-locked is a wait on itself,
  // which the wait-for check reports): no edge.
  if (depth == 0 || FindHeld(r, lock) >= 0) return;
  const uint64_t epoch = g_epoch.load(std::memory_order_acquire);
  const uint64_t generation = Generation(lock_ptr, mode);
  const auto key = [r, lock, mode, generation](int i) {
    const Held& h = r->held[i];
    return EdgeKey{h.lock.load(std::memory_order_relaxed) |
                       static_cast<uintptr_t>(h.mode),
                   lock | static_cast<uintptr_t>(mode),
                   GenerationsKey(h.generation, generation)};
  };
  bool all_known = true;
  for (int i = 0; i < depth && all_known; ++i) {
    all_known = CacheHit(r, key(i), epoch);
  }
  if (all_known) return;
  r->busy = true;
  Cycle cycle;
  bool report = false;
  {
    SpinLockHolder h(&g_graph_mu);
    for (int i = 0; i < depth && !report; ++i) {
      const Held& held = r->held[i];
      report = AddEdge(r, held, lock, mode, generation, site, &cycle);
      CacheAdd(r, key(i), epoch);
    }
  }
  if (report) ReportCycle(cycle);
  r->busy = false;
}

void Acquired(const void* lock, LockMode mode, const void* site) {
  ThreadRecord* r = Record();
  if (r == nullptr) return;
  const int depth = r->depth.load(std::memory_order_relaxed);
  if (depth == kMaxHeld) {
    ++r->overflow;
    return;
  }
  Held& h = r->held[depth];
  h.lock.store(reinterpret_cast<uintptr_t>(lock), std::memory_order_relaxed);
  h.site.store(site, std::memory_order_relaxed);
  h.mode = mode;
  h.generation = Generation(lock, mode);
  r->depth.store(depth + 1, std::memory_order_release);
}

const void* Released(const void* lock) {
  ThreadRecord* r = Record();
  if (r == nullptr) return nullptr;
  const int k = FindHeld(r, reinterpret_cast<uintptr_t>(lock));
  if (k < 0) {
    // Taken beyond kMaxHeld, or by another thread (a normal mutex may be
    // unlocked by any thread, as in glibc).
    if (r->overflow > 0) --r->overflow;
    return nullptr;
  }
  const void* site = r->held[k].site.load(std::memory_order_relaxed);
  const int depth = r->depth.load(std::memory_order_relaxed);
  for (int i = k; i + 1 < depth; ++i) {
    r->held[i].lock.store(r->held[i + 1].lock.load(std::memory_order_relaxed),
                          std::memory_order_relaxed);
    r->held[i].site.store(r->held[i + 1].site.load(std::memory_order_relaxed),
                          std::memory_order_relaxed);
    r->held[i].mode = r->held[i + 1].mode;
    r->held[i].generation = r->held[i + 1].generation;
  }
  r->depth.store(depth - 1, std::memory_order_release);
  return site;
}

void Forget(const void* lock_ptr) {
  const auto lock = reinterpret_cast<uintptr_t>(lock_ptr);
  const size_t bit = KnownBit(lock);
  if ((g_known[bit / 64].load(std::memory_order_relaxed) &
       (uint64_t{1} << (bit % 64))) == 0) {
    return;
  }
  ThreadRecord* r = Record();
  if (r != nullptr && r->busy) return;
  SpinLockHolder h(&g_graph_mu);
  RemoveNodes(lock);
  g_epoch.fetch_add(1, std::memory_order_release);
}

void Waiting(const void* lock, LockMode mode, const void* site) {
  ThreadRecord* r = Record();
  if (r == nullptr) return;
  r->waiting_site.store(site, std::memory_order_relaxed);
  r->waiting_mode = mode;
  r->waiting_on.store(reinterpret_cast<uintptr_t>(lock),
                      std::memory_order_release);
}

void CheckWait() {
  ThreadRecord* self = Record();
  if (self == nullptr) return;
  // Follow "waits for a lock held by": at most kMaxCycle threads.
  ThreadRecord* chain[kMaxCycle];
  int held_at[kMaxCycle];
  int n = 0;
  ThreadRecord* r = self;
  for (;;) {
    const uintptr_t want = r->waiting_on.load(std::memory_order_acquire);
    if (want == 0 || n == kMaxCycle) return;
    chain[n] = r;
    // A thread re-locking a normal mutex it holds waits for itself.
    int k = r == self ? FindHeld(r, want) : -1;
    ThreadRecord* holder = k >= 0 ? r : HolderOf(want, &k);
    if (holder == nullptr || k < 0) return;
    held_at[n++] = k;
    if (holder == self) break;
    for (int i = 0; i < n; ++i) {
      if (chain[i] == holder) return;  // a cycle not through this thread
    }
    r = holder;
  }
  uint64_t key = 0;
  for (int i = 0; i < n; ++i) {
    key += FibonacciMix(chain[i]->waiting_on.load(std::memory_order_relaxed));
  }
  {
    SpinLockHolder h(&g_report_mu);
    if (!FirstReport(key)) return;
    g_len = 0;
    if (n == 1) {
      Add("parklot: deadlock: a thread waits for a lock it holds, pid %d:\n",
          getpid());
    } else {
      Add("parklot: deadlock: %d threads wait for each other, pid %d:\n", n,
          getpid());
    }
    for (int i = 0; i < n; ++i) {
      ThreadRecord* t = chain[i];
      ThreadRecord* holder = chain[(i + 1) % n];
      const uintptr_t want = t->waiting_on.load(std::memory_order_relaxed);
      const Held& h = holder->held[held_at[i]];
      Add("  thread %d waits for lock %s%s at %s\n",
          t->tid.load(std::memory_order_relaxed), Lock(want).text,
          ModeName(t->waiting_mode),
          Site(t->waiting_site.load(std::memory_order_relaxed)).text);
      Add("      held by thread %d, taken at %s\n",
          holder->tid.load(std::memory_order_relaxed),
          Site(h.site.load(std::memory_order_relaxed)).text);
    }
    if (g_abort) Add("parklot: PARKLOT_DEADLOCK=abort: aborting\n");
    g_host->report(g_text, g_len);
  }
  if (g_abort) abort();
}

}  // namespace

void InstallDeadlockHooks(const DiagHost* host, DiagHooks* hooks) {
  g_host = host;
  g_name_lock = hooks->name_lock;
  hooks->deadlock_enable = Enable;
  hooks->before_lock = BeforeLock;
  hooks->acquired = Acquired;
  hooks->released = Released;
  hooks->forget = Forget;
  hooks->waiting = Waiting;
  hooks->check_wait = CheckWait;
}

}  // namespace parklot::internal::preload
