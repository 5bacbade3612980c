#include "hash/bucket_table.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <new>

#include "base/anon_mmap.h"
#include "base/futex.h"
#include "base/shared_tls.h"
#include "base/text.h"
#include "hash/fibonacci_hash.h"

namespace parklot::internal {

void Bucket::EnqueueByPriority(Waiter* w) {
  const uintptr_t key = w->current_key();
  Waiter* prev = nullptr;
  for (Waiter* x = head; x != nullptr; prev = x, x = x->next) {
    if (x->priority < w->priority && x->current_key() == key) {
      w->next = x;
      if (prev == nullptr) {
        head = w;
      } else {
        prev->next = w;
      }
      return;
    }
  }
  if (tail == nullptr) {
    head = w;
  } else {
    tail->next = w;
  }
  tail = w;
}

void Bucket::Remove(Waiter* w, Waiter* prev) {
  if (prev == nullptr) {
    head = w->next;
  } else {
    prev->next = w->next;
  }
  if (tail == w) tail = prev;
  w->next = nullptr;
}

bool Bucket::RemoveIfQueued(Waiter* w) {
  Waiter* prev = nullptr;
  for (Waiter* x = head; x != nullptr; prev = x, x = x->next) {
    if (x == w) {
      Remove(w, prev);
      return true;
    }
  }
  return false;
}

void Bucket::RepairAfterDeadHolder() {
  Waiter* last = nullptr;
  for (Waiter* w = head; w != nullptr; w = w->next) last = w;
  tail = last;
}

bool Bucket::HasKey(uintptr_t key, const Waiter* from) const {
  for (const Waiter* w = from; w != nullptr; w = w->next) {
    if (w->current_key() == key) return true;
  }
  return false;
}

namespace {
// xorshift64 (Marsaglia): the fairness timer and the collision sampling
// need spread, not quality. `state` must not be 0.
uint64_t NextRandom(uint64_t* state) {
  uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *state = x;
  return x;
}
}  // namespace

bool Bucket::FairTimeoutExpired(int64_t now_ns, int64_t mean_ns) {
  if (fair_deadline_ns != 0 && now_ns < fair_deadline_ns) return false;
  if (rng == 0) rng = reinterpret_cast<uintptr_t>(this) | 1;
  NextRandom(&rng);
  const bool armed = fair_deadline_ns != 0;
  const uint64_t span = static_cast<uint64_t>(mean_ns) * 2 + 1;
  fair_deadline_ns = now_ns + static_cast<int64_t>(rng % span);
  return armed;
}

bool ParseGrowthPolicy(std::string_view text, GrowthPolicy* policy,
                       size_t* fixed_buckets) {
  if (text == "threads") {
    *policy = GrowthPolicy::kThreads;
    return true;
  }
  if (text == "cpus") {
    *policy = GrowthPolicy::kCpus;
    return true;
  }
  if (text == "adaptive") {
    *policy = GrowthPolicy::kAdaptive;
    return true;
  }
  if (text.starts_with("fixed:")) {
    text.remove_prefix(6);
    uint64_t n = 0;
    if (!ParseUnsigned(text, kMaxTableBuckets, &n) || n == 0) {
      return false;
    }
    *policy = GrowthPolicy::kFixed;
    *fixed_buckets = n;
    return true;
  }
  return false;
}

const char* GrowthPolicyName(GrowthPolicy policy) {
  switch (policy) {
    case GrowthPolicy::kThreads:
      return "threads";
    case GrowthPolicy::kCpus:
      return "cpus";
    case GrowthPolicy::kFixed:
      return "fixed";
    case GrowthPolicy::kAdaptive:
      return "adaptive";
  }
  return "?";
}

size_t RoundUpPow2(size_t n) {
  constexpr size_t kTop = size_t{1} << 63;
  if (n <= 1) return 1;
  if (n > kTop) return kTop;
  return size_t{1} << (64 - __builtin_clzll(n - 1));
}

bool CanMapNow(size_t bytes) {
  void* probe = MapAnonymous(bytes, /*reserve=*/true);
  if (probe == nullptr) return false;
  munmap(probe, bytes);
  return true;
}

namespace {
std::atomic<size_t> g_fail_mappings_above{SIZE_MAX};
}  // namespace

void FailTableMappingsAbove(size_t buckets) {
  g_fail_mappings_above.store(buckets, std::memory_order_relaxed);
}

// The header shares the mapping with the buckets and takes one cache line.
struct alignas(64) BucketTable::Table {
  size_t size;
  unsigned shift;  // 64 - log2(size); 64 for a one-bucket table
  Table* next_retired;  // see BucketTable::retired_
  Bucket* buckets() { return reinterpret_cast<Bucket*>(this + 1); }
};

BucketTable::Table* BucketTable::InitHeader(void* mem, size_t buckets) {
  static_assert(sizeof(Table) == 64, "the header takes one cache line");
  auto* t = static_cast<Table*>(mem);
  t->size = buckets;
  t->next_retired = nullptr;
  t->shift = 64 - static_cast<unsigned>(__builtin_ctzll(buckets));
  return t;
}

BucketTable::Table* BucketTable::AllocateTable(size_t buckets) {
  if (buckets > g_fail_mappings_above.load(std::memory_order_relaxed)) {
    return nullptr;
  }
  // buckets <= kMaxTableBuckets: the size cannot overflow.
  const size_t bytes = sizeof(Table) + buckets * sizeof(Bucket);
  void* mem = MapAnonymous(bytes, /*reserve=*/true);
  if (mem == nullptr) return nullptr;
  // Zero-filled pages are empty, unlocked buckets.
  return InitHeader(mem, buckets);
}

BucketTable::Table* BucketTable::InlineTable(size_t buckets) {
  // Never used before (the table only grows): still zero-filled.
  return InitHeader(inline_storage_, buckets);
}

void BucketTable::FreeTable(Table* table) {
  if (static_cast<void*>(table) == inline_storage_) return;
  munmap(table, sizeof(Table) + table->size * sizeof(Bucket));
}

size_t BucketTable::IndexOf(const Table* table, uintptr_t key) {
  // A one-bucket table (shift 64) takes 0 bits: index 0.
  return FibonacciHash(key, 64 - table->shift);
}

BucketTable::BucketTable(const TableOptions& options) : options_(options) {
  if (options_.max_buckets > kMaxTableBuckets) {
    options_.max_buckets = kMaxTableBuckets;
  }
  if (options_.buckets > kMaxTableBuckets) options_.buckets = kMaxTableBuckets;
  options_.max_buckets = RoundUpPow2(options_.max_buckets);
  size_t initial = RoundUpPow2(options_.buckets);
  if (options_.policy != GrowthPolicy::kFixed) {
    if (initial < 16) initial = 16;
    if (initial > options_.max_buckets) initial = options_.max_buckets;
  }
  options_.max_collision_buckets =
      RoundUpPow2(options_.max_collision_buckets > kMaxTableBuckets
                      ? kMaxTableBuckets
                      : options_.max_collision_buckets);
  sample_collisions_ = options_.policy == GrowthPolicy::kAdaptive;
  // Only the `cpus` policy sizes by CPUs (a table made directly, as tests
  // and benchmarks make them; the runtime passes the count it read at
  // start-up, docs/design.md section 3.13).
  if (options_.cpus == 0 && options_.policy == GrowthPolicy::kCpus) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    options_.cpus = n > 0 ? static_cast<size_t>(n) : 1;
  }
  // Memory short: halve the size until a mapping succeeds; the inline
  // table is the floor, so construction never fails.
  Table* t = nullptr;
  size_t size = initial;
  for (; size > kInlineBuckets; size /= 2) {
    t = AllocateTable(size);
    if (t != nullptr) break;
  }
  if (t == nullptr) t = InlineTable(size);
  if (size != initial) allocation_failures_.store(1, std::memory_order_relaxed);
  table_.store(t, std::memory_order_release);
  // A fixed table that fell back keeps its smaller size for good.
  immutable_.store(
      options_.policy == GrowthPolicy::kFixed || size >= options_.max_buckets,
      std::memory_order_release);
}

BucketTable::~BucketTable() {
  for (Table* t = retired_; t != nullptr;) {
    Table* next = t->next_retired;
    FreeTable(t);
    t = next;
  }
  FreeTable(table_.load());
}

size_t BucketTable::bucket_count() const {
  return table_.load(std::memory_order_acquire)->size;
}

size_t BucketTable::BucketIndex(uintptr_t key) const {
  return IndexOf(table_.load(std::memory_order_acquire), key);
}

namespace {
// Collision sampling of this thread (BucketTable::kCollisionWindow):
// LockBucket calls until its next sample, the generator of the intervals
// (the same sequence in every thread: tests can count on it), and the
// samples and collisions of its current batch, not yet added to the
// table's window.
__attribute__((tls_model("initial-exec"))) thread_local uint32_t
    t_sample_countdown = BucketTable::kCollisionSampleEvery;
__attribute__((tls_model("initial-exec"))) thread_local uint64_t t_sample_rng =
    0x9E3779B97F4A7C15ull;
__attribute__((tls_model("initial-exec"))) thread_local uint32_t t_batch_samples;
__attribute__((tls_model("initial-exec"))) thread_local uint32_t
    t_batch_collisions;
// The table size when this thread's current batch began.
__attribute__((tls_model("initial-exec"))) thread_local size_t t_batch_from;

// Inside MaybeGrow or a growth on this thread (SectionState::busy): a
// collision growth here could wait on what the interrupted code holds.
// Only the TLS owner grows (a task on shared TLS registers nothing and its
// collision growths are dropped, LeaveOutermostSection), so t_section is
// the caller's own.
struct BusyScope {
  BusyScope() { ++t_section.busy; }
  ~BusyScope() { --t_section.busy; }
};

// Whether this LockBucket is a collision sample: about 1 in
// kCollisionSampleEvery, at random intervals (uniform in [1, 2 x every - 1]),
// so that a thread cycling over its keys does not sample the same few of
// them forever. A handler interrupting the update loses at most a count.
bool SampleDue() {
  constexpr uint32_t kEvery = BucketTable::kCollisionSampleEvery;
  const uint32_t left = t_sample_countdown;
  if (left > 1) {
    t_sample_countdown = left - 1;
    return false;
  }
  t_sample_countdown =
      1 + static_cast<uint32_t>(NextRandom(&t_sample_rng) % (2 * kEvery - 1));
  return true;
}
}  // namespace

void BucketTable::UnlockBucket(Bucket* b) { b->lock.Unlock(); }

Bucket* BucketTable::LockBucket(uintptr_t key) const {
  for (;;) {
    Table* t = table_.load(std::memory_order_seq_cst);
    Bucket* b = &t->buckets()[IndexOf(t, key)];
    b->LockAndRepair();
    // A grower holds every old bucket lock while it moves waiters and
    // publishes; seeing the same table after locking means no move of this
    // bucket can be in progress or pending.
    if (table_.load(std::memory_order_relaxed) == t) {
      // At the collision cap, samples could ask for nothing: none is taken.
      if (sample_collisions_ && t->size < options_.max_collision_buckets &&
          SampleDue()) {
        SampleCollision(b, key, t->size);
      }
      return b;
    }
    b->lock.Unlock();
  }
}

Bucket* BucketTable::LockBucketAt(size_t index, size_t* size) const {
  for (;;) {
    Table* t = table_.load(std::memory_order_seq_cst);
    *size = t->size;
    if (index >= t->size) return nullptr;
    Bucket* b = &t->buckets()[index];
    b->LockAndRepair();
    if (table_.load(std::memory_order_relaxed) == t) return b;
    b->lock.Unlock();
  }
}

Bucket* BucketTable::LockWaiterBucket(const Waiter* w) const {
  for (;;) {
    const uintptr_t key = w->current_key();
    Bucket* b = LockBucket(key);
    if (w->current_key() == key) return b;
    UnlockBucket(b);
  }
}

std::pair<Bucket*, Bucket*> BucketTable::LockBucketPair(uintptr_t a,
                                                        uintptr_t b) const {
  for (;;) {
    Table* t = table_.load(std::memory_order_seq_cst);
    const size_t ia = IndexOf(t, a);
    const size_t ib = IndexOf(t, b);
    Bucket* ba = &t->buckets()[ia];
    Bucket* bb = &t->buckets()[ib];
    Bucket* first = ia <= ib ? ba : bb;
    Bucket* second = ia <= ib ? bb : ba;
    first->LockAndRepair();
    if (table_.load(std::memory_order_relaxed) != t) {
      first->lock.Unlock();
      continue;
    }
    if (second != first) second->LockAndRepair();
    return {ba, bb};
  }
}

void BucketTable::UnlockBucketPair(std::pair<Bucket*, Bucket*> pair) {
  pair.first->lock.Unlock();
  if (pair.second != pair.first) pair.second->lock.Unlock();
}

void BucketTable::LockAllForFork() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // The section first: on shared TLS, its entry is where this task's busy
  // count lives (until the matching unlock or reset).
  EnterSection();
  ++Sections(/*claim=*/false)->busy;
  grow_lock_.Lock();
  Table* t = table_.load(std::memory_order_acquire);
  for (size_t i = 0; i < t->size; ++i) t->buckets()[i].LockAndRepair();
}

void BucketTable::UnlockAllAfterFork() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  Table* t = table_.load(std::memory_order_acquire);
  for (size_t i = 0; i < t->size; ++i) t->buckets()[i].lock.Unlock();
  grow_lock_.Unlock();
  --Sections(/*claim=*/false)->busy;
  LeaveSection(nullptr);
}

void BucketTable::ResetInChildAfterFork() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  Table* t = table_.load(std::memory_order_acquire);
  for (size_t i = 0; i < t->size; ++i) {
    Bucket& b = t->buckets()[i];
    b.head = b.tail = nullptr;
    b.lock.Unlock();
  }
  // The child's one thread owns its TLS alone by now (the fork step
  // kSharedTls ran AdoptSectionsInForkChild first): t_section is its own.
  grow_lock_.Unlock();
  --Sections(/*claim=*/false)->busy;
  LeaveSection(nullptr);
}

size_t BucketTable::TargetBuckets(size_t live_threads) const {
  size_t want;
  switch (options_.policy) {
    case GrowthPolicy::kThreads:
    case GrowthPolicy::kAdaptive: {
      // In double, compared before the conversion: a NaN or out-of-range
      // factor must not reach an undefined double-to-integer conversion.
      const double w = static_cast<double>(live_threads) * options_.load_factor;
      want = !(w >= 1) ? 1
             : w >= static_cast<double>(kMaxTableBuckets)
                 ? kMaxTableBuckets
                 : static_cast<size_t>(w);
      break;
    }
    case GrowthPolicy::kCpus: {
      const size_t n =
          live_threads < options_.cpus ? live_threads : options_.cpus;
      want = n >= kMaxTableBuckets / 4 ? kMaxTableBuckets : 4 * n;
      break;
    }
    case GrowthPolicy::kFixed:
    default:
      return RoundUpPow2(options_.buckets);
  }
  want = RoundUpPow2(want);
  return want < 16 ? 16 : want;
}

void BucketTable::SampleCollision(Bucket* b, uintptr_t key,
                                  size_t size) const {
  // The address of a thread-local names the live thread; 0: the bucket's
  // first lock in this table. The record changes only with the key: a
  // sample of the record's key (a thread back at its own key, a waker and
  // its waiter, threads contending for one lock) writes nothing, so the
  // line that other CPUs spin on is not written inside the lock.
  const uintptr_t self = reinterpret_cast<uintptr_t>(&t_batch_samples);
  if (b->last_key != key) {
    const uintptr_t last = b->last_locker;
    if (last != self && last != 0) ++t_batch_collisions;
    b->last_key = key;
    b->last_locker = self;
  }
  if (t_batch_samples++ == 0) t_batch_from = size;
  if (t_batch_samples < kCollisionBatch) return;
  const uint64_t batch =
      uint64_t{t_batch_collisions} << 32 | t_batch_samples;
  t_batch_samples = 0;
  t_batch_collisions = 0;
  // A batch that spans a growth counted collisions of a smaller table.
  if (t_batch_from != size) return;
  // One shared write per kCollisionBatch samples. The flush that fills the
  // window takes it whole (and leaves an empty one); the counts other
  // threads add until then belong to it too.
  const uint64_t before = window_.fetch_add(batch, std::memory_order_relaxed);
  if (static_cast<uint32_t>(before) >= kCollisionWindow ||
      static_cast<uint32_t>(before + batch) < kCollisionWindow) {
    return;
  }
  const uint64_t window = window_.exchange(0, std::memory_order_relaxed);
  const uint64_t samples = static_cast<uint32_t>(window);
  const uint64_t collisions = window >> 32;
  // Emptied by a growth (Replace) since the fill: the new table's counts.
  if (samples < kCollisionWindow) return;
  sampled_locks_.fetch_add(samples, std::memory_order_relaxed);
  sampled_collisions_.fetch_add(collisions, std::memory_order_relaxed);
  if (collisions * kCollisionRateDivisor <= samples) return;
  if (size >= options_.max_collision_buckets || immutable()) return;
  // While buckets hold few keys each, collisions fall in proportion to the
  // size: grow by the factor that brings the rate to the threshold at once
  // (one window per growth, not one per doubling), at least 2x.
  const size_t factor = RoundUpPow2(static_cast<size_t>(
      (collisions * kCollisionRateDivisor + samples - 1) / samples));
  SectionState* sections = Sections(/*claim=*/false);
  sections->grow_table = const_cast<BucketTable*>(this);
  sections->grow_from = size;
  sections->grow_to = size * (factor < 2 ? 2 : factor);
}

void BucketTable::GrowForCollisions(size_t from, size_t to) {
  // A signal handler interrupting this growth (holding grow_lock_) must not
  // start another on this thread.
  BusyScope busy;
  size_t target = to;
  if (target > options_.max_collision_buckets) {
    target = options_.max_collision_buckets;
  }
  if (target > options_.max_buckets) target = options_.max_buckets;
  // Another thread grew the table since this thread's window ended: the
  // collisions it counted were of the smaller table.
  if (bucket_count() != from) return;
  Replace(target, /*for_collisions=*/true);
}

// Lock analysis cannot follow "every bucket of the old table".
bool BucketTable::Replace(size_t target, bool for_collisions)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  grow_lock_.Lock();
  Table* old = table_.load(std::memory_order_acquire);
  if (target <= old->size) {  // another thread grew it meanwhile
    grow_lock_.Unlock();
    return false;
  }
  Table* fresh = AllocateTable(target);
  if (fresh == nullptr) {
    // Growth is an optimisation: the current table keeps serving.
    allocation_failures_.fetch_add(1, std::memory_order_relaxed);
    grow_lock_.Unlock();
    return false;
  }
  Bucket* old_buckets = old->buckets();
  EnterSection();
  for (size_t i = 0; i < old->size; ++i) old_buckets[i].LockAndRepair();
  // Old buckets are visited in index order and each queue front to back, so
  // waiters of one key (all in one old bucket) keep their FIFO order.
  // Fairness timers start afresh in the new table.
  for (size_t i = 0; i < old->size; ++i) {
    Waiter* w = old_buckets[i].head;
    while (w != nullptr) {
      Waiter* next = w->next;
      Bucket& nb = fresh->buckets()[IndexOf(fresh, w->current_key())];
      // The new table is not yet published: no other thread can reach it.
      nb.Enqueue(w);
      w = next;
    }
    old_buckets[i].head = old_buckets[i].tail = nullptr;
  }
  table_.store(fresh, std::memory_order_seq_cst);
  // The window's counts were of the old table. (A batch checked against
  // the old size just before this may still land in the new window: at
  // most one batch per thread, a slight over-count.)
  window_.store(0, std::memory_order_relaxed);
  if (fresh->size >= options_.max_buckets) {
    immutable_.store(true, std::memory_order_release);
  }
  growths_.fetch_add(1, std::memory_order_relaxed);
  if (for_collisions) {
    collision_growths_.fetch_add(1, std::memory_order_relaxed);
  }
  for (size_t i = 0; i < old->size; ++i) old_buckets[i].lock.Unlock();
  LeaveSection(nullptr);
  // Readers that loaded `old` may still lock its buckets (and find the
  // table changed): it stays mapped, freed only with the table.
  old->next_retired = retired_;
  retired_ = old;
  retired_tables_.fetch_add(1, std::memory_order_relaxed);
  if (static_cast<void*>(old) != inline_storage_) {
    retired_bytes_.fetch_add(sizeof(Table) + old->size * sizeof(Bucket),
                             std::memory_order_relaxed);
  }
  grow_lock_.Unlock();
  return true;
}

bool BucketTable::MaybeGrow(size_t live_threads) {
  if (immutable()) return false;
  size_t target = TargetBuckets(live_threads);
  if (target > options_.max_buckets) target = options_.max_buckets;
  if (target <= bucket_count()) return false;
  BusyScope busy;
  return Replace(target, /*for_collisions=*/false);
}

}  // namespace parklot::internal
