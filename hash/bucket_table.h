// The parking lot's table: a power-of-two array of buckets keyed by address.
//
// Each bucket holds a small lock, the FIFO queue of threads parked on keys
// that hash to it, and the bucket's eventual-fairness timer. The table grows
// with the process's threads under a policy chosen at start (docs/design.md
// section 2.5). A growth retires the old table without waiting for anyone: it
// stays mapped for the life of the process (growth at least doubles, so all
// retired tables together are smaller than the current one), and a reader
// re-checks the table after locking a bucket. Readers therefore take no
// reference count, no RCU section and make no system call for growth
// (docs/design.md sections 2.6 and 2.7).
#ifndef PARKLOT_HASH_BUCKET_TABLE_H_
#define PARKLOT_HASH_BUCKET_TABLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "hash/bucket_lock.h"
#include "hash/lock_section.h"

namespace parklot::internal {

// A queued thread, as the table sees it: its key, its queue link and its
// queue priority. The runtime embeds this in its per-thread data (no heap).
// All are written only under the lock of the bucket the waiter is queued
// in. `key` is atomic because a requeue may move a parked thread to another
// key while the thread itself, timing out, reads it to find its bucket.
// `priority` is the thread's real-time priority when it queued: 0 for
// every thread outside SCHED_FIFO and SCHED_RR (the kernel's futex queues
// also rank all of those as one, below every real-time thread), else its
// sched_priority, 1..99 (docs/design.md section 3.15).
struct Waiter {
  std::atomic<uintptr_t> key{0};
  Waiter* next = nullptr;
  uint8_t priority = 0;

  uintptr_t current_key() const { return key.load(std::memory_order_relaxed); }
};

// One bucket, on its own cache line so that unrelated keys do not share a
// line. Zero-filled memory is a valid empty bucket.
struct alignas(64) Bucket {
  BucketLock lock;
  Waiter* head ABSL_GUARDED_BY(lock) = nullptr;
  Waiter* tail ABSL_GUARDED_BY(lock) = nullptr;
  // Eventual fairness: CLOCK_MONOTONIC nanoseconds after which the next
  // unpark from this bucket should hand off fairly; 0 = not yet armed.
  int64_t fair_deadline_ns ABSL_GUARDED_BY(lock) = 0;
  uint64_t rng ABSL_GUARDED_BY(lock) = 0;
  // The `adaptive` policy's collision record: the key and the thread (an
  // address unique to the live thread) of the last sampled LockBucket here
  // whose key differed from the record's (see
  // BucketTable::kCollisionWindow). Written only by such samples.
  uintptr_t last_key ABSL_GUARDED_BY(lock) = 0;
  uintptr_t last_locker ABSL_GUARDED_BY(lock) = 0;

  // Queues `w` (with w->key and w->priority set): each key's waiters stay
  // in descending priority, first come first served among equals, as the
  // kernel's futex queues are. A waiter of priority 0 (no real-time
  // thread) goes to the tail at the cost of one predictable branch; a
  // real-time one goes before the first waiter of its key with a lower
  // priority, found by a walk of the queue.
  void Enqueue(Waiter* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lock) {
    w->next = nullptr;
    if (__builtin_expect(w->priority != 0, 0)) return EnqueueByPriority(w);
    if (tail == nullptr) {
      head = w;
    } else {
      tail->next = w;
    }
    tail = w;
  }
  // Enqueue of a real-time waiter.
  void EnqueueByPriority(Waiter* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lock);
  // Unlinks `w`, whose predecessor in the queue is `prev` (nullptr = head).
  void Remove(Waiter* w, Waiter* prev) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lock);
  // Unlinks `w` if it is queued here; returns whether it was. For waiters
  // whose task may have died between marking itself queued and linking
  // itself, or whose unparker died after unlinking it: a walk of the queue.
  bool RemoveIfQueued(Waiter* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lock);
  // Takes the lock, and repairs the queue if the lock was taken over from
  // a task that exited holding it (BucketLock::Lock).
  void LockAndRepair() ABSL_EXCLUSIVE_LOCK_FUNCTION(lock) {
    if (__builtin_expect(lock.Lock(), 0)) RepairAfterDeadHolder();
  }
  // After a holder died in the middle of Enqueue or Remove: every change
  // those make leaves the chain from `head` whole (a waiter is linked
  // before `tail` names it, and unlinked before `tail` forgets it), so
  // `tail` is recomputed from it. A waiter the dead task had taken off the
  // queue and not yet released stays asleep, as a waiter does under glibc
  // when the task that was waking it is killed before its FUTEX_WAKE.
  void RepairAfterDeadHolder() ABSL_EXCLUSIVE_LOCKS_REQUIRED(lock);
  // True if a waiter other than those already seen has `key`, searching from
  // `from` (inclusive); used to report "more waiters on this key".
  bool HasKey(uintptr_t key, const Waiter* from) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(lock);

  // The eventual-fairness timer (as in WebKit's and Rust's parking_lot):
  // returns true if the deadline has passed and then re-arms it at a random
  // interval, uniform in [0, 2 * mean_ns), from `now_ns` (CLOCK_MONOTONIC).
  // A never-armed timer is armed and reports false.
  bool FairTimeoutExpired(int64_t now_ns, int64_t mean_ns)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(lock);
};
static_assert(sizeof(Bucket) == 64, "one bucket per cache line");

// How the table sizes itself.
enum class GrowthPolicy {
  kThreads,  // buckets >= live threads x load factor
  kCpus,     // Linux 6.16: roundup_pow2(4 x min(threads, CPUs)), min 16
  kFixed,    // `fixed:N`: N buckets forever, no growth
  // The default. As kThreads, and also doubles while the table's buckets
  // are shared between threads waiting on different keys (a collision: see
  // BucketTable::kCollisionWindow), up to TableOptions::max_collision_buckets.
  kAdaptive,
};

struct TableOptions {
  GrowthPolicy policy = GrowthPolicy::kAdaptive;
  // Initial size for kThreads/kCpus/kAdaptive; the size for kFixed.
  // Rounded up to a power of two.
  size_t buckets = 16;
  // Cap; a table that reaches it becomes immutable. The default covers
  // 100,000 threads at the default load factor.
  size_t max_buckets = size_t{1} << 19;
  // Buckets per live thread for kThreads and kAdaptive. At 4, a thread's
  // bucket is shared with another thread's current key with probability about
  // 1 - e^(-1/4) = 22%, queues stay under one waiter on average, it matches
  // the kernel's own 4x factor, and it costs 256 B of table per thread.
  double load_factor = 4.0;
  // CPUs for kCpus; 0 = the online CPU count, read by the constructor for
  // kCpus only (other policies leave it 0: no system call).
  size_t cpus = 0;
  // kAdaptive: collisions alone never grow the table past this (rounded up
  // to a power of two; max_buckets still caps everything). Live threads
  // may grow it further. 2^14 buckets = 1 MiB: in futex_hash, tables of
  // 2^15 and 2^16 buckets (2-4 MiB on 4 KiB pages) ran slower than 2^14.
  size_t max_collision_buckets = size_t{1} << 14;
};

// The largest table any policy or cap may ask for: 2^30 buckets (64 GiB).
// Sizes beyond it are clamped to it; the configuration rejects them.
inline constexpr size_t kMaxTableBuckets = size_t{1} << 30;

// Parses "threads", "cpus", "adaptive", "fixed:N" (1 <= N <=
// kMaxTableBuckets).
// Returns false on malformed or out-of-range input.
bool ParseGrowthPolicy(std::string_view text, GrowthPolicy* policy,
                       size_t* fixed_buckets);
// "threads", "cpus", "fixed" or "adaptive".
const char* GrowthPolicyName(GrowthPolicy policy);

// Rounds up to a power of two: 1 for 0 and 1; saturates at 2^63 for
// n > 2^63 (the next power of two does not fit in size_t).
size_t RoundUpPow2(size_t n);

// Whether `bytes` of fresh private memory can be mapped now: maps and
// unmaps them (never touched). A probe before calling libraries that abort
// the process when mmap fails (Abseil's symbolizer): other threads may allocate between the probe and the call,
// so it narrows the window in which they could abort; it cannot close it.
// Thread-safe; async-signal-safe.
bool CanMapNow(size_t bytes);

// The table. Thread-safe: any number of threads may lock buckets while one
// grows the table. Memory comes from mmap, never malloc, so it can serve a
// pthread_mutex_lock interposed under a malloc that takes locks.
//
// Running out of memory never fails the table (docs/design.md section 6,
// invariant 7): tables of up to kInlineBuckets buckets live inside the
// BucketTable object itself (static storage for the process's table), so the
// default first table needs no allocation; a larger initial size that cannot be
// mapped falls back to halves of it, down to the inline table; and a growth
// whose new table cannot be mapped leaves the current table serving. Both are
// counted in allocation_failures().
class BucketTable {
 public:
  // The largest table kept inside the object.
  static constexpr size_t kInlineBuckets = 16;

  // Sizes in `options` above kMaxTableBuckets are clamped to it.
  explicit BucketTable(const TableOptions& options);
  // Frees the current table. The caller guarantees no thread uses it.
  ~BucketTable();
  BucketTable(const BucketTable&) = delete;
  BucketTable& operator=(const BucketTable&) = delete;

  // RAII: the span in which a thread uses the table's buckets, which is a
  // lock section (hash/lock_section.h): the one per-thread mark of every
  // park and unpark, on growable and immutable tables alike. Retired tables
  // are never unmapped, so a section pins nothing and shares nothing; a
  // collision growth this thread asked for runs when its outermost section
  // ends (see kCollisionWindow). Must not be nested with MaybeGrow. Costs a
  // thread-local increment and decrement and one predictable branch.
  // Async-signal-safe.
  class ReadSection {
   public:
    explicit ReadSection(const BucketTable& table)
        // The table object itself is never const (ReadSection only reads
        // it; a growth it ends with changes it).
        : table_(const_cast<BucketTable*>(&table)) {
      EnterSection();
    }
    ~ReadSection() { LeaveSection(table_); }
    ReadSection(const ReadSection&) = delete;
    ReadSection& operator=(const ReadSection&) = delete;

   private:
    BucketTable* table_;
  };

  // Every function below that returns locked buckets must be called inside a
  // ReadSection, the lock section (hash/lock_section.h: what a signal
  // handler inside one may do).

  // Returns the bucket for `key` in the current table, locked. Requires an
  // active ReadSection. Close with UnlockBucket.
  Bucket* LockBucket(uintptr_t key) const;
  // Returns bucket `index` of the current table, locked, and its size in
  // `*size`; nullptr (nothing locked) if index >= *size. For walks over
  // every bucket. Requires an active ReadSection. Close with UnlockBucket.
  Bucket* LockBucketAt(size_t index, size_t* size) const;
  // Unlocks a bucket returned by LockBucket, LockBucketAt or
  // LockWaiterBucket.
  static void UnlockBucket(Bucket* b);

  // Locks the bucket of `w`'s current key, retrying if a requeue changes
  // the key meanwhile. Requires an active ReadSection.
  Bucket* LockWaiterBucket(const Waiter* w) const;

  // Locks the buckets of two keys in one current table, in index order so
  // that two requeues in opposite directions cannot deadlock. Returns
  // {bucket(a), bucket(b)}; they are equal when the keys share a bucket (it
  // is locked once). Requires an active ReadSection.
  std::pair<Bucket*, Bucket*> LockBucketPair(uintptr_t a, uintptr_t b) const;
  // Unlocks what LockBucketPair returned.
  static void UnlockBucketPair(std::pair<Bucket*, Bucket*> pair);

  // The `adaptive` policy's collision sampling. About 1 in
  // kCollisionSampleEvery LockBucket calls of a thread, at random intervals
  // (a fixed interval would alias with a thread cycling over its keys, and
  // sample the same few of them), is a sample; a sample is
  // a collision when the bucket's last sample was another thread's, for
  // another key: two threads' keys share the bucket, so its cache line and
  // lock pass between them (and their CPUs) although their keys are
  // unrelated, which a bigger table would separate. A waker and its waiter
  // share a key, and one thread cycling over its own keys shares nothing
  // with anyone: neither counts. Only samples of another key than the
  // record's write the bucket's record: a store into a bucket line that
  // other CPUs spin on costs a cache miss inside the lock.
  //
  // A thread adds its samples to the table's window in batches of
  // kCollisionBatch (one shared atomic add per batch; a batch that spans a
  // growth is dropped). The batch that fills a window of kCollisionWindow
  // samples, from all threads together, judges it: more than 1 in
  // kCollisionRateDivisor collisions marks a growth due, by the power of two
  // that would bring the rate down to that (collisions fall in proportion
  // to the size while buckets hold few keys), at least 2x. A window from all
  // threads fills at the process's rate, not one thread's: with 256 threads
  // sharing 2 CPUs, a window per thread took 100 ms per doubling. The table
  // grows when that thread's outermost lock section ends, if it is not
  // itself inside a growth, registration or fork (a signal handler may be
  // running on it), and if no other thread grew the table since. Like
  // every growth it waits for nobody (it may run on any thread, in a
  // handler): the old table is retired and stays mapped.
  static constexpr uint32_t kCollisionSampleEvery = 16;  // mean interval
  static constexpr uint32_t kCollisionBatch = 64;        // samples
  static constexpr uint32_t kCollisionWindow = 2048;     // samples
  // 1 in 128: a bucket shared with another thread's key costs a cache-line
  // transfer (about 100 ns here) each time either thread comes back to it,
  // on operations of 20-40 ns, so even 1% of samples colliding (2% of a
  // thread's buckets shared) cost 4% in futex_hash at 2 threads
  // (4,096 buckets: 1.07% collisions, 0.96x the ops/s of 8,192: 0%).
  static constexpr uint32_t kCollisionRateDivisor = 128;

  // Grows the table if `live_threads` calls for more buckets under the
  // policy. Blocks while another thread grows. Must be called outside any
  // ReadSection and without bucket locks held. Returns true if it grew;
  // false if no growth was due, or if the new table could not be mapped
  // (then the current table keeps serving, allocation_failures() counts
  // it, and a later call tries again).
  bool MaybeGrow(size_t live_threads);

  // Retired tables stay mapped until the table is destroyed: readers that
  // loaded an old table may still lock its buckets (they then see the
  // table changed and retry), so no grace period is needed, and no system
  // call (sys_membarrier) that a sandbox written from glibc's behaviour
  // would refuse. Each growth at least doubles, so the retired tables sum
  // to less than the current one.

  // fork() support. Before fork: take the grow lock and every bucket lock,
  // so the child never inherits a table mid-change. In the parent after
  // fork: release them. In the child: only the forking thread exists, so
  // every queued waiter is a ghost of a parent thread; empty every queue
  // and release every lock.
  // (The fork functions open and close one lock section.)
  void LockAllForFork();
  void UnlockAllAfterFork();
  void ResetInChildAfterFork();

  // The size the policy wants for `live_threads` (not capped).
  size_t TargetBuckets(size_t live_threads) const;

  size_t bucket_count() const;
  // The index of `key`'s bucket in the current table (which a growth may
  // replace at any time). Thread-safe; locks nothing.
  size_t BucketIndex(uintptr_t key) const;
  uint64_t growths() const { return growths_.load(std::memory_order_relaxed); }
  // Of growths(): those the collision sampling asked for (kAdaptive); the
  // rest followed live threads.
  uint64_t collision_growths() const {
    return collision_growths_.load(std::memory_order_relaxed);
  }
  // Sampled LockBucket calls and the collisions among them, of every
  // judged window (kAdaptive; 0 otherwise): 1 in kCollisionSampleEvery
  // locks, less the batches dropped at growths and the window that is
  // still filling.
  uint64_t sampled_locks() const {
    return sampled_locks_.load(std::memory_order_relaxed);
  }
  uint64_t sampled_collisions() const {
    return sampled_collisions_.load(std::memory_order_relaxed);
  }
  // Times the table could not get the size it asked for: each growth whose
  // new table could not be mapped, and a construction that had to fall
  // back to a smaller initial table (counted once).
  uint64_t allocation_failures() const {
    return allocation_failures_.load(std::memory_order_relaxed);
  }
  // Tables replaced by growths, still mapped (see "Retired tables stay
  // mapped" below), and the bytes they map (the inline table, part of the
  // object, counts as a table of 0 bytes).
  uint64_t retired_tables() const {
    return retired_tables_.load(std::memory_order_relaxed);
  }
  uint64_t retired_bytes() const {
    return retired_bytes_.load(std::memory_order_relaxed);
  }
  // True once the table can never change again (kFixed, or cap reached).
  bool immutable() const { return immutable_.load(std::memory_order_acquire); }
  const TableOptions& options() const { return options_; }

 private:
  struct Table;
  // Writes the header of a table of `buckets` (a power of two) buckets at
  // `mem`, whose buckets are zero-filled.
  static Table* InitHeader(void* mem, size_t buckets);
  // Maps a zeroed table of `buckets` buckets; nullptr if mmap fails.
  static Table* AllocateTable(size_t buckets);
  // Sets up the inline table with `buckets` (<= kInlineBuckets) buckets.
  Table* InlineTable(size_t buckets);
  // Unmaps `table` unless it is the inline one.
  void FreeTable(Table* table);
  static size_t IndexOf(const Table* table, uintptr_t key);
  // kAdaptive: counts one sampled LockBucket of `key` that locked `b`, in
  // the current table of `size` buckets.
  void SampleCollision(Bucket* b, uintptr_t key, size_t size) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(b->lock);
  // Grows a table of `from` buckets to `to` for collisions (see
  // kCollisionWindow), within the caps.
  void GrowForCollisions(size_t from, size_t to);
  friend void LeaveOutermostSection(SectionState*,
                                              BucketTable*);
  // Publishes a zeroed table of `target` buckets, moving every waiter to it,
  // and retires the old one. Returns false if no growth was due or the new
  // table could not be mapped. Takes and releases grow_lock_.
  bool Replace(size_t target, bool for_collisions);

  TableOptions options_;
  std::atomic<Table*> table_{nullptr};
  std::atomic<bool> immutable_{false};
  std::atomic<uint64_t> growths_{0};
  std::atomic<uint64_t> allocation_failures_{0};
  std::atomic<uint64_t> collision_growths_{0};
  std::atomic<uint64_t> retired_tables_{0};
  std::atomic<uint64_t> retired_bytes_{0};
  mutable std::atomic<uint64_t> sampled_locks_{0};
  mutable std::atomic<uint64_t> sampled_collisions_{0};
  // kAdaptive: LockBucket samples collisions.
  bool sample_collisions_ = false;
  // kAdaptive: the current window of samples, collisions << 32 | samples
  // (see kCollisionWindow); emptied when a window is judged and at growth.
  // On a line of its own: every LockBucket reads table_.
  alignas(64) mutable std::atomic<uint64_t> window_{0};
  // Tables replaced by growths, freed at destruction (linked through their
  // headers); guarded by grow_lock_.
  Table* retired_ = nullptr;
  mutable BucketLock grow_lock_;
  // The inline table: a one-cache-line header, then kInlineBuckets buckets.
  alignas(64) unsigned char inline_storage_[64 * (1 + kInlineBuckets)] = {};
};

// Test-only: while set, mapping a table of more than `buckets` buckets
// fails as if mmap had run out of memory (so 0 fails every mapping). Pass
// SIZE_MAX to stop. Read only when a table is mapped (construction and
// growth), never on a lock path: it costs production nothing. Thread-safe.
void FailTableMappingsAbove(size_t buckets);

}  // namespace parklot::internal

#endif  // PARKLOT_HASH_BUCKET_TABLE_H_
