// parklot::SharedMutex: semantics of both kinds, every timeout/busy path,
// the std adapters, reader/writer preference and starvation freedom, the
// in-place core on a pthread_rwlock_t, destruction right after unlock, and
// a checksummed torture run with 2..64 threads.
#include "sync/shared_mutex.h"

#include <errno.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "runtime/deadline.h"
#include "runtime/global_table.h"
#include "runtime/thread_data.h"
#include "tests/sync/sync_test_util.h"
#include "tests/util/watchdog.h"

namespace parklot::internal::testing {
namespace {

using Kind = SharedMutex::Kind;

constexpr absl::Duration kShort = absl::Milliseconds(30);
// Bounds waits that must end; never reached unless something is broken.
constexpr absl::Duration kGenerous = absl::Seconds(20);

std::string KindName(const ::testing::TestParamInfo<Kind>& info) {
  return info.param == Kind::kPreferWriter ? "PreferWriter" : "PreferReader";
}

// Runs `fn` on its own thread; joins on destruction.
class Runner {
 public:
  template <typename Fn>
  explicit Runner(Fn fn) : thread_([this, fn] {
      ref_.Publish();
      fn();
      done_.store(true, std::memory_order_release);
    }) {}
  ~Runner() { Join(); }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  bool WaitParked() const { return ref_.WaitParked(); }
  bool done() const { return done_.load(std::memory_order_acquire); }
  bool WaitDone() const {
    return Eventually([this] { return done(); }, kGenerous);
  }

 private:
  ThreadRef ref_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// A one-way flag a test thread can wait for.
class Gate {
 public:
  void Open() { open_.store(true, std::memory_order_release); }
  void Wait() const {
    ASSERT_TRUE(Eventually(
        [this] { return open_.load(std::memory_order_acquire); }, kGenerous));
  }

 private:
  std::atomic<bool> open_{false};
};

TEST(SharedMutexTest, LayoutAndConstantInit) {
  static_assert(sizeof(SharedMutex) == 16, "word + spin EMA + kind");
  static_assert(sizeof(SharedMutex) <= sizeof(pthread_rwlock_t));
  static_assert(alignof(SharedMutex) <= alignof(pthread_rwlock_t));
  static constinit SharedMutex global;
  static constinit SharedMutex global_reader(Kind::kPreferReader);
  EXPECT_EQ(global.kind(), Kind::kPreferWriter);
  EXPECT_EQ(global_reader.kind(), Kind::kPreferReader);
  global.Lock();
  EXPECT_TRUE(global.HeldExclusivelyByCurrentThread());
  global.Unlock();
  EXPECT_FALSE(global.HeldExclusivelyByCurrentThread());
}

TEST(SharedMutexTest, OneBucketBuild) {
  if (!ExpectOneBucket()) GTEST_SKIP() << "default table";
  EXPECT_EQ(GlobalTable().bucket_count(), 1u);
}

class SharedMutexKindTest : public ::testing::TestWithParam<Kind> {};
INSTANTIATE_TEST_SUITE_P(Kinds, SharedMutexKindTest,
                         ::testing::Values(Kind::kPreferWriter,
                                           Kind::kPreferReader),
                         KindName);

TEST_P(SharedMutexKindTest, ExclusiveBasics) {
  Watchdog wd(kWatchdogLimit, "ExclusiveBasics");
  SharedMutex mu(GetParam());
  mu.Lock();
  EXPECT_TRUE(mu.HeldExclusivelyByCurrentThread());
  EXPECT_EQ(mu.ReaderCount(), 0u);
  EXPECT_FALSE(mu.TryLock());        // not recursive: busy, no deadlock
  EXPECT_FALSE(mu.TryLockShared());  // a writer holds it
  EXPECT_FALSE(mu.LockFor(absl::ZeroDuration()));
  EXPECT_FALSE(mu.LockSharedFor(absl::Milliseconds(1)));
  {
    Runner other([&] {
      EXPECT_FALSE(mu.HeldExclusivelyByCurrentThread());
      EXPECT_FALSE(mu.TryLock());
      EXPECT_FALSE(mu.TryLockShared());
      EXPECT_EQ(SharedMutexCore::TryLock(mu.word()), EBUSY);
      EXPECT_EQ(SharedMutexCore::TryLockShared(mu.word()), EBUSY);
    });
  }
  mu.Unlock();
  EXPECT_FALSE(mu.HeldExclusivelyByCurrentThread());
  EXPECT_TRUE(mu.TryLock());
  mu.Unlock();
  EXPECT_TRUE(mu.LockFor(absl::Milliseconds(-5)));  // free: succeeds anyway
  mu.Unlock();
  EXPECT_TRUE(mu.LockUntil(Deadline::Realtime(absl::InfinitePast())));
  mu.Unlock();
  EXPECT_EQ(mu.word()->load(), 0u);
}

TEST_P(SharedMutexKindTest, SharedBasics) {
  Watchdog wd(kWatchdogLimit, "SharedBasics");
  SharedMutex mu(GetParam());
  mu.LockShared();
  EXPECT_EQ(mu.ReaderCount(), 1u);
  EXPECT_FALSE(mu.HeldExclusivelyByCurrentThread());
  EXPECT_FALSE(mu.TryLock());
  EXPECT_FALSE(mu.LockFor(absl::ZeroDuration()));
  {
    // Readers share: another thread gets a read lock at once, in every
    // spelling, but not the write lock.
    Runner other([&] {
      EXPECT_TRUE(mu.TryLockShared());
      EXPECT_TRUE(mu.LockSharedFor(absl::ZeroDuration()));
      mu.LockShared();
      EXPECT_EQ(mu.ReaderCount(), 4u);
      mu.UnlockShared();
      mu.UnlockShared();
      mu.UnlockShared();
      EXPECT_FALSE(mu.TryLock());
    });
  }
  EXPECT_EQ(mu.ReaderCount(), 1u);
  mu.UnlockShared();
  EXPECT_EQ(mu.ReaderCount(), 0u);
  EXPECT_TRUE(mu.LockSharedUntil(Deadline::Monotonic(absl::InfinitePast())));
  mu.UnlockShared();
  EXPECT_EQ(mu.word()->load(), 0u);
}

TEST_P(SharedMutexKindTest, StdAdapters) {
  Watchdog wd(kWatchdogLimit, "StdAdapters");
  SharedMutex a(GetParam()), b(GetParam());
  std::mutex m;
  {
    std::scoped_lock lock(a, b, m);
    EXPECT_TRUE(a.HeldExclusivelyByCurrentThread());
    EXPECT_TRUE(b.HeldExclusivelyByCurrentThread());
  }
  EXPECT_FALSE(a.HeldExclusivelyByCurrentThread());
  {
    std::unique_lock<SharedMutex> lock(a);
    EXPECT_TRUE(lock.owns_lock());
    lock.unlock();
    EXPECT_TRUE(lock.try_lock());
    lock.unlock();
    EXPECT_TRUE(lock.try_lock_for(std::chrono::milliseconds(5)));
    lock.unlock();
    EXPECT_TRUE(lock.try_lock_until(std::chrono::steady_clock::now() +
                                    std::chrono::milliseconds(5)));
    lock.unlock();
    EXPECT_TRUE(lock.try_lock_until(std::chrono::system_clock::now()));
  }
  {
    std::shared_lock<SharedMutex> r1(a);
    std::shared_lock<SharedMutex> r2(a, std::try_to_lock);
    EXPECT_TRUE(r2.owns_lock());
    EXPECT_EQ(a.ReaderCount(), 2u);
    std::unique_lock<SharedMutex> w(a, std::defer_lock);
    EXPECT_FALSE(w.try_lock());
    EXPECT_FALSE(w.try_lock_for(std::chrono::milliseconds(2)));
    EXPECT_FALSE(w.try_lock_until(std::chrono::system_clock::now() +
                                  std::chrono::milliseconds(2)));
    EXPECT_FALSE(w.try_lock_until(std::chrono::steady_clock::now() +
                                  std::chrono::milliseconds(2)));
    // A clock that is neither steady_clock nor system_clock.
    EXPECT_FALSE(w.try_lock_until(std::chrono::high_resolution_clock::now() +
                                  std::chrono::milliseconds(2)));
  }
  {
    std::shared_lock<SharedMutex> r(a, std::chrono::milliseconds(5));
    EXPECT_TRUE(r.owns_lock());
    r.unlock();
    EXPECT_TRUE(r.try_lock_until(std::chrono::steady_clock::now()));
  }
  {
    std::lock(a, b);
    std::lock_guard<SharedMutex> ga(a, std::adopt_lock);
    std::lock_guard<SharedMutex> gb(b, std::adopt_lock);
    // Another thread's shared timed attempts fail while we hold them.
    Runner other([&] {
      std::shared_lock<SharedMutex> r(a, std::chrono::milliseconds(2));
      EXPECT_FALSE(r.owns_lock());
      EXPECT_FALSE(a.try_lock_shared_until(std::chrono::system_clock::now() +
                                           std::chrono::milliseconds(2)));
      EXPECT_FALSE(a.try_lock_shared_for(std::chrono::microseconds(100)));
    });
  }
  EXPECT_EQ(a.word()->load(), 0u);
  EXPECT_EQ(b.word()->load(), 0u);
}

// Timed waits end after their deadline (a lower bound only: no upper
// bound is asserted), on both clocks, and leave the lock as it was.
TEST_P(SharedMutexKindTest, TimeoutsWhileHeld) {
  Watchdog wd(kWatchdogLimit, "TimeoutsWhileHeld");
  SharedMutex mu(GetParam());
  std::atomic<int32_t> ema{0};
  Gate held, release;
  Runner reader([&] {
    mu.LockShared();
    held.Open();
    release.Wait();
    mu.UnlockShared();
  });
  held.Wait();
  absl::Time start = MonotonicNow();
  EXPECT_FALSE(mu.LockFor(kShort));
  EXPECT_GE(MonotonicNow() - start, kShort - absl::Milliseconds(1));
  start = absl::Now();
  EXPECT_FALSE(mu.LockUntil(Deadline::Realtime(absl::Now() + kShort)));
  EXPECT_GE(absl::Now() - start, kShort - absl::Milliseconds(1));
  EXPECT_FALSE(mu.LockUntil(Deadline::Monotonic(MonotonicNow() - kShort)));
  EXPECT_EQ(SharedMutexCore::Lock(mu.word(), &ema, GetParam(),
                                  Deadline::In(absl::Milliseconds(1))),
            ETIMEDOUT);
  // A timed-out writer leaves nothing behind: readers still get in.
  EXPECT_TRUE(mu.TryLockShared());
  mu.UnlockShared();
  EXPECT_EQ(mu.ReaderCount(), 1u);
  release.Open();
  reader.Join();
  EXPECT_EQ(mu.word()->load(), 0u);

  Gate wheld, wrelease;
  Runner writer([&] {
    mu.Lock();
    wheld.Open();
    wrelease.Wait();
    mu.Unlock();
  });
  wheld.Wait();
  start = MonotonicNow();
  EXPECT_FALSE(mu.LockSharedFor(kShort));
  EXPECT_GE(MonotonicNow() - start, kShort - absl::Milliseconds(1));
  EXPECT_FALSE(mu.LockSharedUntil(Deadline::Realtime(absl::Now() + kShort)));
  EXPECT_FALSE(mu.LockSharedUntil(Deadline::Realtime(absl::InfinitePast())));
  EXPECT_EQ(SharedMutexCore::LockShared(mu.word(), &ema,
                                        Deadline::In(absl::Milliseconds(1))),
            ETIMEDOUT);
  EXPECT_FALSE(mu.LockFor(kShort));
  wrelease.Open();
  writer.Join();
  EXPECT_EQ(mu.word()->load(), 0u);
}

// Parked waiters that time out clear the parked bit behind them, and an
// unlock with waiters still parked wakes them.
TEST_P(SharedMutexKindTest, ParkedWaitersTimeOutAndWake) {
  Watchdog wd(kWatchdogLimit, "ParkedWaitersTimeOutAndWake");
  SharedMutex mu(GetParam());
  mu.Lock();
  std::atomic<int> timed_out{0}, acquired{0};
  {
    std::vector<std::unique_ptr<Runner>> waiters;
    for (int i = 0; i < 4; ++i) {
      waiters.push_back(std::make_unique<Runner>([&, i] {
        const bool ok = (i % 2) ? mu.LockSharedFor(absl::Milliseconds(20))
                                : mu.LockFor(absl::Milliseconds(20));
        EXPECT_FALSE(ok);
        timed_out.fetch_add(1);
      }));
    }
  }
  EXPECT_EQ(timed_out.load(), 4);
  EXPECT_EQ(mu.word()->load() & SharedMutexCore::kWaitersParked, 0u);
  {
    std::vector<std::unique_ptr<Runner>> waiters;
    for (int i = 0; i < 4; ++i) {
      waiters.push_back(std::make_unique<Runner>([&, i] {
        if (i % 2) {
          mu.LockShared();
          acquired.fetch_add(1);
          mu.UnlockShared();
        } else {
          mu.Lock();
          acquired.fetch_add(1);
          mu.Unlock();
        }
      }));
    }
    for (auto& w : waiters) ASSERT_TRUE(w->WaitParked());
    EXPECT_NE(mu.word()->load() & SharedMutexCore::kWaitersParked, 0u);
    mu.Unlock();
  }
  EXPECT_EQ(acquired.load(), 4);
  EXPECT_EQ(mu.word()->load(), 0u);
}

// A writer's unlock hands the lock to the readers parked at that moment,
// before any writer (parked or barging) can take it: readers never starve
// behind writers.
TEST_P(SharedMutexKindTest, WriterUnlockHandsOffToParkedReaders) {
  Watchdog wd(kWatchdogLimit, "WriterUnlockHandsOffToParkedReaders");
  SharedMutex mu(GetParam());
  constexpr int kReaders = 3;
  std::atomic<int> seq{0};
  std::atomic<int> reader_seq_max{0};
  std::atomic<int> writer_seq{0};
  Gate release_readers;
  mu.Lock();
  std::vector<std::unique_ptr<Runner>> readers;
  for (int i = 0; i < kReaders; ++i) {
    readers.push_back(std::make_unique<Runner>([&] {
      mu.LockShared();
      const int s = seq.fetch_add(1) + 1;
      int m = reader_seq_max.load();
      while (m < s && !reader_seq_max.compare_exchange_weak(m, s)) {
      }
      release_readers.Wait();
      mu.UnlockShared();
    }));
  }
  for (auto& r : readers) ASSERT_TRUE(r->WaitParked());
  Runner writer([&] {
    mu.Lock();
    writer_seq.store(seq.fetch_add(1) + 1);
    mu.Unlock();
  });
  ASSERT_TRUE(writer.WaitParked());
  mu.Unlock();
  // The readers hold the lock as soon as Unlock returns.
  EXPECT_EQ(mu.ReaderCount(), static_cast<uint64_t>(kReaders));
  EXPECT_FALSE(mu.TryLock());
  ASSERT_TRUE(Eventually([&] { return seq.load() >= kReaders; }));
  release_readers.Open();
  for (auto& r : readers) r->Join();
  writer.Join();
  EXPECT_EQ(reader_seq_max.load(), kReaders);
  EXPECT_EQ(writer_seq.load(), kReaders + 1);
  EXPECT_EQ(mu.word()->load(), 0u);
}

// The test's thread holds a read lock on a `kind` SharedMutex and a writer
// waits (parked) for it; then `while_waiting` runs, and must leave just that
// one read lock held. The writer gets in only when it is released.
template <typename Fn>
void WithWriterWaitingBehindReader(Kind kind, Fn while_waiting) {
  SharedMutex mu(kind);
  mu.LockShared();
  std::atomic<bool> writer_in{false};
  Runner writer([&] {
    mu.Lock();
    writer_in.store(true);
    mu.Unlock();
  });
  ASSERT_TRUE(writer.WaitParked());
  while_waiting(mu);
  EXPECT_FALSE(writer_in.load());
  mu.UnlockShared();  // the last reader hands the lock to the writer
  writer.Join();
  EXPECT_TRUE(writer_in.load());
  EXPECT_EQ(mu.word()->load(), 0u);
}

// kPreferWriter: a writer that arrives while a reader holds the lock claims
// it; new readers (including the holder's recursive attempt) then wait, and
// the writer gets in when the reader leaves.
TEST(SharedMutexTest, PreferWriterBlocksNewReaders) {
  Watchdog wd(kWatchdogLimit, "PreferWriterBlocksNewReaders");
  WithWriterWaitingBehindReader(Kind::kPreferWriter, [](SharedMutex& mu) {
    EXPECT_TRUE(SharedMutexCore::WriterActive(mu.word()));
    EXPECT_FALSE(mu.TryLockShared());  // recursive read: refused, not deadlock
    EXPECT_EQ(SharedMutexCore::TryLockShared(mu.word()), EBUSY);
    EXPECT_FALSE(mu.LockSharedFor(kShort));
    Runner other([&] { EXPECT_FALSE(mu.TryLockShared()); });
  });
}

// kPreferReader (glibc's default): a reader may take the lock again while a
// writer waits; the writer gets in once all read locks are released.
TEST(SharedMutexTest, PreferReaderAllowsRecursiveReadWhileWriterWaits) {
  Watchdog wd(kWatchdogLimit, "PreferReaderAllowsRecursiveRead");
  WithWriterWaitingBehindReader(Kind::kPreferReader, [](SharedMutex& mu) {
    EXPECT_FALSE(SharedMutexCore::WriterActive(mu.word()));
    EXPECT_TRUE(mu.TryLockShared());
    mu.LockShared();
    EXPECT_TRUE(mu.LockSharedFor(kShort));
    {
      Runner other([&] {
        EXPECT_TRUE(mu.TryLockShared());
        mu.UnlockShared();
      });
    }
    EXPECT_EQ(mu.ReaderCount(), 4u);
    mu.UnlockShared();
    mu.UnlockShared();
    mu.UnlockShared();
  });
}

// A pending writer that times out withdraws its claim and wakes the readers
// it kept out, although the reader it waited for still holds the lock.
TEST(SharedMutexTest, PendingWriterTimeoutReleasesBlockedReaders) {
  Watchdog wd(kWatchdogLimit, "PendingWriterTimeout");
  SharedMutex mu(Kind::kPreferWriter);
  mu.LockShared();
  std::atomic<bool> writer_failed{false};
  Runner writer([&] {
    EXPECT_FALSE(mu.LockFor(absl::Milliseconds(300)));
    writer_failed.store(true);
  });
  ASSERT_TRUE(writer.WaitParked());
  ASSERT_TRUE(SharedMutexCore::WriterActive(mu.word()));
  std::atomic<bool> reader_in{false};
  Runner reader([&] {
    mu.LockShared();  // blocked behind the pending writer
    reader_in.store(true);
    mu.UnlockShared();
  });
  ASSERT_TRUE(reader.WaitParked());
  ASSERT_TRUE(reader.WaitDone());
  writer.Join();
  EXPECT_TRUE(writer_failed.load());
  EXPECT_TRUE(reader_in.load());
  EXPECT_FALSE(SharedMutexCore::WriterActive(mu.word()));
  EXPECT_EQ(mu.ReaderCount(), 1u);
  mu.UnlockShared();
  EXPECT_EQ(mu.word()->load(), 0u);
}

// kPreferWriter: with 8 readers looping so that the lock is (almost)
// always read-held, a writer still gets in, every time, within a bound
// that only a starving writer would exceed.
TEST(SharedMutexTest, NoWriterStarvationUnderLoopingReaders) {
  Watchdog wd(kWatchdogLimit, "NoWriterStarvation");
  SharedMutex mu(Kind::kPreferWriter);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> reads{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 8; ++i) {
    readers.emplace_back([&, i] {
      std::minstd_rand rng(i + 1);
      while (!stop.load(std::memory_order_relaxed)) {
        mu.LockShared();
        RandomDelay(rng, 512);
        mu.UnlockShared();
        reads.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  ASSERT_TRUE(Eventually([&] { return reads.load() > 1000 / 8; }));
  const int writes = static_cast<int>(Scaled(200, 40));
  int64_t value = 0;
  for (int i = 0; i < writes; ++i) {
    ASSERT_TRUE(mu.LockFor(kGenerous)) << "writer starved at " << i;
    ++value;
    mu.Unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  stop.store(true);
  for (auto& t : readers) t.join();
  EXPECT_EQ(value, writes);
  EXPECT_GT(reads.load(), 0);
}

// Both kinds: under writers that never stop, a reader still gets in, every
// time, within a bound that only a starving reader would exceed.
TEST_P(SharedMutexKindTest, NoReaderStarvationUnderSustainedWrites) {
  Watchdog wd(kWatchdogLimit, "NoReaderStarvation");
  SharedMutex mu(GetParam());
  std::atomic<bool> stop{false};
  std::atomic<int64_t> writes{0};
  int64_t protected_value = 0;
  std::vector<std::thread> writers;
  for (int i = 0; i < 4; ++i) {
    writers.emplace_back([&, i] {
      std::minstd_rand rng(i + 1);
      while (!stop.load(std::memory_order_relaxed)) {
        mu.Lock();
        ++protected_value;
        RandomDelay(rng, 256);
        mu.Unlock();
        writes.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  ASSERT_TRUE(Eventually([&] { return writes.load() > 100; }));
  const int reads = static_cast<int>(Scaled(400, 40));
  int64_t last = -1;
  for (int i = 0; i < reads; ++i) {
    ASSERT_TRUE(mu.LockSharedFor(kGenerous)) << "reader starved at " << i;
    EXPECT_GE(protected_value, last);
    last = protected_value;
    mu.UnlockShared();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  stop.store(true);
  for (auto& t : writers) t.join();
  EXPECT_EQ(protected_value, writes.load());
}

// The core on a zero-initialized pthread_rwlock_t, as the shim uses it:
// PTHREAD_RWLOCK_INITIALIZER is an unlocked lock, and UnlockAny picks the
// mode the caller holds.
TEST(SharedMutexTest, CoreInPlaceOnPthreadRwlock) {
  Watchdog wd(kWatchdogLimit, "CoreInPlaceOnPthreadRwlock");
  static_assert(sizeof(std::atomic<uint64_t>) + sizeof(std::atomic<int32_t>) <=
                sizeof(pthread_rwlock_t));
  static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
  auto* word = reinterpret_cast<std::atomic<uint64_t>*>(&rw);
  auto* ema = reinterpret_cast<std::atomic<int32_t>*>(
      reinterpret_cast<char*>(&rw) + 8);
  for (Kind kind : {Kind::kPreferReader, Kind::kPreferWriter}) {
    EXPECT_EQ(SharedMutexCore::Lock(word, ema, kind), 0);
    EXPECT_TRUE(SharedMutexCore::HeldExclusivelyByCurrentThread(word));
    EXPECT_EQ(SharedMutexCore::TryLock(word), EBUSY);
    EXPECT_EQ(SharedMutexCore::TryLockShared(word), EBUSY);
    SharedMutexCore::UnlockAny(word);
    EXPECT_EQ(word->load(), 0u);
    EXPECT_EQ(SharedMutexCore::LockShared(word, ema), 0);
    EXPECT_EQ(SharedMutexCore::TryLockShared(word), 0);
    EXPECT_FALSE(SharedMutexCore::HeldExclusivelyByCurrentThread(word));
    SharedMutexCore::UnlockAny(word);
    SharedMutexCore::UnlockAny(word);
    EXPECT_EQ(word->load(), 0u);
    {
      Runner holder([&] {
        EXPECT_EQ(SharedMutexCore::Lock(word, ema, kind), 0);
        std::thread t([&] {
          EXPECT_EQ(SharedMutexCore::Lock(word, ema, kind,
                                          Deadline::In(kShort)),
                    ETIMEDOUT);
          EXPECT_EQ(SharedMutexCore::LockShared(word, ema,
                                                Deadline::In(kShort)),
                    ETIMEDOUT);
        });
        t.join();
        SharedMutexCore::UnlockAny(word);
      });
    }
    EXPECT_EQ(word->load(), 0u);
  }
}

// Invariant 2: whoever unlocks must not touch the lock once another thread
// may have acquired, destroyed and freed it. Writers: the last to drop a
// reference (under the write lock) unlocks, destroys, poisons and frees;
// the others may still be inside Unlock's wake-up. Readers: a writer
// destroys the object as soon as it gets the lock after every reader has
// dropped its reference, while the last reader may still be inside
// UnlockShared handing the lock over.
struct RefCounted {
  explicit RefCounted(Kind kind, int refs) : mu(kind), refs(refs) {}
  SharedMutex mu;
  int refs;
};

TEST_P(SharedMutexKindTest, DestroyRightAfterUnlock) {
  Watchdog wd(kWatchdogLimit, "DestroyRightAfterUnlock");
  const int iterations = static_cast<int>(Scaled(3000, 200));
  constexpr int kThreads = 3;
  for (int it = 0; it < iterations; ++it) {
    RefCounted* obj = MallocNew<RefCounted>(GetParam(), kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([obj] {
        obj->mu.Lock();
        const bool last = --obj->refs == 0;
        obj->mu.Unlock();
        if (last) DestroyPoisonFree(obj);
      });
    }
    for (auto& t : threads) t.join();
  }
  for (int it = 0; it < iterations; ++it) {
    RefCounted* obj = MallocNew<RefCounted>(GetParam(), kThreads);
    std::atomic<int> readers_done{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([obj, &readers_done] {
        obj->mu.LockShared();
        readers_done.fetch_add(1, std::memory_order_release);
        obj->mu.UnlockShared();
      });
    }
    threads.emplace_back([obj, &readers_done] {
      for (;;) {
        obj->mu.Lock();
        const bool all = readers_done.load(std::memory_order_acquire) ==
                         kThreads;
        obj->mu.Unlock();
        if (all) break;
      }
      // Holding no lock now; every reader released before our last Lock.
      DestroyPoisonFree(obj);
    });
    for (auto& t : threads) t.join();
  }
}

// Torture: T threads, each mixing blocking, try and timed reads and writes
// with random delays. Writers bump every word of a protected array (which
// readers check is uniform) and a plain counter; checksums at the end.
struct TortureParam {
  Kind kind;
  int threads;
};

class SharedMutexTortureTest : public ::testing::TestWithParam<TortureParam> {
};

TEST_P(SharedMutexTortureTest, Checksums) {
  const TortureParam p = GetParam();
  Watchdog wd(kWatchdogLimit, "SharedMutexTortureTest.Checksums");
  SharedMutex mu(p.kind);
  constexpr int kWords = 8;
  uint64_t data[kWords] = {};
  int64_t writes_done = 0;  // guarded by mu (exclusive)
  std::atomic<int> writers_inside{0}, readers_inside{0};
  std::atomic<int64_t> writes_claimed{0}, reads_done{0}, failures{0};
  // 400k operations per configuration, 4M over all of them.
  const int64_t ops_per_thread = Scaled(400000 / p.threads, 200);
  std::vector<std::thread> threads;
  for (int t = 0; t < p.threads; ++t) {
    threads.emplace_back([&, t] {
      std::minstd_rand rng(t * 7919 + p.threads);
      for (int64_t i = 0; i < ops_per_thread; ++i) {
        const unsigned r = rng();
        const bool write = r % 4 == 0;
        const unsigned how = (r >> 4) % 8;  // 0: try, 1: timed, else blocking
        if (write) {
          bool got;
          if (how == 0) {
            got = mu.TryLock();
          } else if (how == 1) {
            got = mu.LockFor(absl::Microseconds(r % 200));
          } else {
            mu.Lock();
            got = true;
          }
          if (!got) {
            failures.fetch_add(1, std::memory_order_relaxed);
            continue;
          }
          EXPECT_EQ(writers_inside.fetch_add(1), 0);
          EXPECT_EQ(readers_inside.load(), 0);
          const uint64_t v = data[0];
          for (int k = 0; k < kWords; ++k) {
            EXPECT_EQ(data[k], v);
            data[k] = v + 1;
          }
          ++writes_done;
          if ((r >> 8) % 16 == 0) RandomDelay(rng, 128);
          writers_inside.fetch_sub(1);
          mu.Unlock();
          writes_claimed.fetch_add(1, std::memory_order_relaxed);
        } else {
          bool got;
          if (how == 0) {
            got = mu.TryLockShared();
          } else if (how == 1) {
            got = mu.LockSharedFor(absl::Microseconds(r % 200));
          } else {
            mu.LockShared();
            got = true;
          }
          if (!got) {
            failures.fetch_add(1, std::memory_order_relaxed);
            continue;
          }
          readers_inside.fetch_add(1);
          EXPECT_EQ(writers_inside.load(), 0);
          const uint64_t v = data[0];
          for (int k = 1; k < kWords; ++k) EXPECT_EQ(data[k], v);
          if ((r >> 8) % 16 == 0) RandomDelay(rng, 128);
          readers_inside.fetch_sub(1);
          mu.UnlockShared();
          reads_done.fetch_add(1, std::memory_order_relaxed);
        }
        if ((r >> 12) % 32 == 0) RandomDelay(rng, 256);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(writes_done, writes_claimed.load());
  for (int k = 0; k < kWords; ++k) {
    EXPECT_EQ(data[k], static_cast<uint64_t>(writes_done));
  }
  EXPECT_EQ(writes_claimed.load() + reads_done.load() + failures.load(),
            ops_per_thread * p.threads);
  EXPECT_EQ(mu.word()->load() & ~SharedMutexCore::kWaitersParked, 0u);
}

std::vector<TortureParam> TortureParams() {
  std::vector<TortureParam> v;
  for (Kind k : {Kind::kPreferWriter, Kind::kPreferReader}) {
    for (int n : {2, 4, 8, 16, 64}) v.push_back({k, n});
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(
    All, SharedMutexTortureTest, ::testing::ValuesIn(TortureParams()),
    [](const ::testing::TestParamInfo<TortureParam>& info) {
      return std::string(info.param.kind == Kind::kPreferWriter
                             ? "PreferWriter"
                             : "PreferReader") +
             std::to_string(info.param.threads);
    });

}  // namespace
}  // namespace parklot::internal::testing
