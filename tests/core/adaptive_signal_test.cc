// hash/: collision growths of the `adaptive` policy (the default) while
// signal handlers lock buckets of the same table on the threads they
// interrupt. A handler's read section may end with a collision growth due
// on its thread; that growth must not run while the interrupted code is
// inside a read section, a lock section, or a growth of its own (it would
// wait on what the interrupted code holds), and must run otherwise. A
// deadlock fails by the watchdog; every round must still reach the cap,
// with every bucket unlocked at the end.
//
// Each round: a fresh table (16 buckets, collision cap 2^10), two workers
// cycling over interleaved keys (so that their keys share buckets, and the
// table grows for collisions), a signaller interrupting both every few
// microseconds, and a handler that, unless its thread is in a lock section
// (where the runtime defers instead), locks a few of its thread's keys,
// sometimes inside a nested read section.
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include <atomic>
#include <cstdint>
#include <thread>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "hash/bucket_table.h"
#include "hash/lock_section.h"
#include "tests/core/test_support.h"
#include "tests/util/watchdog.h"

namespace parklot::internal {
namespace {

constexpr size_t kCap = 1024;
constexpr int kKeys = 512;  // per worker
alignas(64) uint32_t g_words[2 * kKeys];

uintptr_t KeyOf(int worker, int i) {
  // Interleaved: worker 0 has the even words, worker 1 the odd ones.
  return reinterpret_cast<uintptr_t>(&g_words[2 * i + worker]);
}

void LockOnce(const BucketTable& t, uintptr_t key) {
  BucketTable::ReadSection rs(t);
  BucketTable::UnlockBucket(t.LockBucket(key));
}

std::atomic<BucketTable*> g_table{nullptr};
// Enough that a handler often completes its thread's sampling window.
constexpr int kHandlerLocks = 2048;
std::atomic<uint64_t> g_handler_locks{0}, g_handler_deferred{0},
    g_growths_during_handlers{0};
// Initial-exec: read in the handler.
__attribute__((tls_model("initial-exec"))) thread_local int t_worker = -1;
__attribute__((tls_model("initial-exec"))) thread_local uint32_t t_handled;

void Handler(int) {
  const int saved_errno = errno;
  const BucketTable* t = g_table.load(std::memory_order_acquire);
  if (t != nullptr && t_worker >= 0) {
    if (InLockSection()) {
      g_handler_deferred.fetch_add(1, std::memory_order_relaxed);
    } else {
      const uint32_t n = ++t_handled;
      if (n % 4 == 0) {
        BucketTable::ReadSection outer(*t);
        LockOnce(*t, KeyOf(t_worker, n % kKeys));
      }
      const uint64_t before = t->collision_growths();
      for (int i = 0; i < kHandlerLocks; ++i) {
        LockOnce(*t, KeyOf(t_worker, (n + i) % kKeys));
      }
      g_handler_locks.fetch_add(kHandlerLocks, std::memory_order_relaxed);
      // This handler's growth, or the other worker's meanwhile.
      if (t->collision_growths() != before) {
        g_growths_during_handlers.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }
  errno = saved_errno;
}

// One round; returns the table's collision growths.
uint64_t Round(absl::Duration limit) {
  TableOptions o;
  o.policy = GrowthPolicy::kAdaptive;
  o.buckets = 16;
  o.max_collision_buckets = kCap;
  BucketTable table(o);
  g_table.store(&table, std::memory_order_release);

  std::atomic<bool> stop{false};
  std::atomic<int> ready{0};
  pthread_t ids[2];
  std::thread workers[2];
  for (int w = 0; w < 2; ++w) {
    workers[w] = std::thread([&, w] {
      ids[w] = pthread_self();
      t_worker = w;
      ready.fetch_add(1);
      for (uint32_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        if (i % 64 == 0) {
          // A read section around several locks, as Requeue holds one.
          BucketTable::ReadSection rs(table);
          LockOnce(table, KeyOf(w, i % kKeys));
          LockOnce(table, KeyOf(w, (i + 1) % kKeys));
        } else {
          LockOnce(table, KeyOf(w, i % kKeys));
        }
      }
      t_worker = -1;
    });
  }
  while (ready.load() != 2) sched_yield();
  const absl::Time end = absl::Now() + limit;
  std::thread signaller([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      for (pthread_t id : ids) pthread_kill(id, SIGUSR1);
      absl::SleepFor(absl::Microseconds(20));
    }
  });
  while (table.bucket_count() < kCap && absl::Now() < end) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  stop.store(true);
  signaller.join();  // no signal is sent after this
  for (std::thread& w : workers) w.join();  // no handler runs after this
  g_table.store(nullptr, std::memory_order_release);

  EXPECT_EQ(table.bucket_count(), kCap) << "the round did not reach the cap";
  // Every bucket was left unlocked: each can be locked (a leaked lock
  // would hang here, and the watchdog fails the test).
  size_t size = 0;
  for (size_t i = 0;; ++i) {
    Bucket* b = table.LockBucketAt(i, &size);
    if (b == nullptr) break;
    BucketTable::UnlockBucket(b);
  }
  EXPECT_EQ(size, kCap);
  return table.collision_growths();
}

TEST(AdaptiveUnderSignals, CollisionGrowthsWithHandlersLockingTheTable) {
  testing::Watchdog wd(coretest::WatchdogLimit(absl::Seconds(60)),
                       "CollisionGrowthsWithHandlersLockingTheTable");
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = Handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ASSERT_EQ(sigaction(SIGUSR1, &sa, nullptr), 0);

  const int rounds = static_cast<int>(coretest::Scaled(40, 8, 2));
  uint64_t growths = 0;
  for (int r = 0; r < rounds && !HasFailure(); ++r) {
    growths += Round(absl::Seconds(10));
  }
  // 16 -> 1,024 takes one to six growths per round (a growth goes as far
  // as its window's collision rate calls for), all for collisions.
  EXPECT_GE(growths, 1u * rounds);
  EXPECT_LE(growths, 6u * rounds);
  EXPECT_GT(g_handler_locks.load(), 0u);
  std::printf("%d rounds, %llu collision growths, %llu handlers during which "
              "the table grew, %llu handler locks, %llu handlers in a lock "
              "section\n",
              rounds, static_cast<unsigned long long>(growths),
              static_cast<unsigned long long>(g_growths_during_handlers.load()),
              static_cast<unsigned long long>(g_handler_locks.load()),
              static_cast<unsigned long long>(g_handler_deferred.load()));
}

}  // namespace
}  // namespace parklot::internal
