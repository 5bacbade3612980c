// The thread registry: a thread is counted live at its first use of the
// lot and released exactly once at exit; registry indices are distinct
// among live threads and recycled, so a process that keeps creating
// short-lived threads keeps a bounded registry, table and memory; slot ids
// (lock owners) are never handed to a second thread.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "base/futex.h"
#include "gtest/gtest.h"
#include "runtime/global_table.h"
#include "runtime/parking_lot.h"
#include "runtime/registry.h"
#include "runtime/stats.h"
#include "runtime/thread_data.h"
#include "tests/core/parked_thread.h"
#include "tests/core/test_support.h"
#include "tests/util/watchdog.h"

namespace parklot::internal {
namespace {

using coretest::ParkedThread;
using coretest::SmallThread;
using coretest::WaitFor;

const absl::Duration kWatch = coretest::WatchdogLimit(absl::Seconds(180));

class Registry : public ::testing::Test {
 protected:
  void SetUp() override {
    // The test's own thread registers first (it unparks), so that the
    // baselines below only move with the threads the test starts.
    CurrentThreadData();
    base_live_ = registry::LiveThreads();
    base_registered_ = registry::ThreadsRegistered();
  }
  size_t base_live_ = 0;
  uint64_t base_registered_ = 0;
};

TEST_F(Registry, CountedAtFirstUseAndReleasedAtExit) {
  testing::Watchdog wd(kWatch, "CountedAtFirstUse");
  uint32_t slot = kNoSlot;
  std::thread t([&] {
    // Not yet known to the lot.
    EXPECT_EQ(CurrentThreadDataIfAny(), nullptr);
    EXPECT_EQ(registry::LiveThreads(), base_live_);
    int key;
    EXPECT_TRUE(Park(KeyOf(&key), [] { return false; }).invalid());
    ASSERT_NE(CurrentThreadDataIfAny(), nullptr);
    EXPECT_EQ(CurrentThreadDataIfAny(), CurrentThreadData());
    slot = CurrentSlot();
    EXPECT_NE(slot, kNoSlot);
    EXPECT_NE(CurrentThreadData()->index, 0u);
    EXPECT_LE(CurrentThreadData()->index, registry::HighestIndex());
    EXPECT_EQ(registry::LiveThreads(), base_live_ + 1);
    EXPECT_EQ(registry::ThreadsRegistered(), base_registered_ + 1);
    // Later uses do not count the thread again.
    EXPECT_TRUE(Park(KeyOf(&key), [] { return false; }).invalid());
    EXPECT_EQ(CurrentSlot(), slot);
    EXPECT_EQ(registry::LiveThreads(), base_live_ + 1);
  });
  t.join();
  // Thread exit (its TSD destructor, run before join returns) released it.
  EXPECT_EQ(registry::LiveThreads(), base_live_);
  EXPECT_EQ(registry::ThreadsRegistered(), base_registered_ + 1);
  EXPECT_EQ(registry::StateOf(slot), ThreadState::kRunning);
}

TEST_F(Registry, UnparkersAreRegisteredToo) {
  std::thread t([&] {
    int key;
    UnparkOne(KeyOf(&key), [](UnparkResult) { return kDefaultUnparkToken; });
    EXPECT_NE(CurrentThreadDataIfAny(), nullptr);
    EXPECT_EQ(registry::LiveThreads(), base_live_ + 1);
  });
  t.join();
  EXPECT_EQ(registry::LiveThreads(), base_live_);
}

TEST_F(Registry, StateFollowsParkAndUnpark) {
  testing::Watchdog wd(kWatch, "StateFollowsPark");
  EXPECT_EQ(registry::StateOf(kNoSlot), ThreadState::kRunning);
  EXPECT_EQ(registry::StateOf(0xFFFFFFFFu), ThreadState::kRunning);
  const size_t parked_before = registry::ParkedThreads();
  int key;
  ParkedThread t(KeyOf(&key));
  ASSERT_TRUE(t.AwaitEnqueued());
  const uint32_t slot = t.slot();
  // Published after before_sleep, so wait for it.
  ASSERT_TRUE(WaitFor(
      [&] { return registry::StateOf(slot) == ThreadState::kParked; }));
  EXPECT_EQ(registry::ParkedThreads(), parked_before + 1);
  EXPECT_EQ(UnparkAll(KeyOf(&key)), 1u);
  t.Join();
  EXPECT_EQ(registry::StateOf(slot), ThreadState::kRunning);
  EXPECT_EQ(registry::ParkedThreads(), parked_before);
}

// fork() from a signal handler that runs on a parked thread: the child
// keeps only that thread, its queues are emptied (its Park returns), and
// its wake-up takes it off the parked count, which must not go below 0.
// The child inherited the thread's kParked state while the fork step had
// reset the count to 0, so the wake-up's decrement wrapped the count to
// 2^64 - 1: the spin policy then never saw the child
// oversubscribed.
std::atomic<pid_t> g_fork_child{0};
std::atomic<bool> g_in_fork_child{false};

void ForkingHandler(int) {
  const pid_t pid = fork();
  if (pid == 0) {
    g_in_fork_child.store(true, std::memory_order_relaxed);
  } else {
    g_fork_child.store(pid, std::memory_order_release);
  }
}

TEST_F(Registry, ForkFromAHandlerOnAParkedThreadKeepsTheCountInRange) {
  testing::Watchdog wd(kWatch, "ForkFromHandlerOnParked");
  struct sigaction act = {};
  act.sa_handler = ForkingHandler;
  sigemptyset(&act.sa_mask);
  struct sigaction old;
  ASSERT_EQ(sigaction(SIGUSR1, &act, &old), 0);
  int key;
  std::atomic<uint32_t> slot{kNoSlot};
  std::thread t([&] {
    slot.store(CurrentSlot(), std::memory_order_release);
    Park(KeyOf(&key), [] { return true; });
    if (g_in_fork_child.load(std::memory_order_relaxed)) {
      // The child's only thread, woken by the emptied queues.
      const size_t parked = registry::ParkedThreads();
      if (parked != 0) fprintf(stderr, "child: %zu parked\n", parked);
      _exit(parked == 0 ? 0 : 1);
    }
  });
  ASSERT_TRUE(WaitFor([&] {
    const uint32_t s = slot.load(std::memory_order_acquire);
    return s != kNoSlot && registry::StateOf(s) == ThreadState::kParked;
  }));
  ASSERT_EQ(pthread_kill(t.native_handle(), SIGUSR1), 0);
  ASSERT_TRUE(WaitFor(
      [] { return g_fork_child.load(std::memory_order_acquire) != 0; }));
  int status = 0;
  ASSERT_EQ(waitpid(g_fork_child.load(), &status, 0), g_fork_child.load());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  // The parent's thread is still parked (the handler returned to its sleep).
  ASSERT_TRUE(WaitFor([&] { return UnparkAll(KeyOf(&key)) == 1; }));
  t.join();
  sigaction(SIGUSR1, &old, nullptr);
}

// fork() in the window of a thread's exit hook where the thread has moved
// to its own_record but its registry record, left queued by a wait it
// left by siglongjmp, is not yet evicted (a signal handler forking there):
// the child's queues are empty, so both records must be reset, or the
// hook's eviction, resumed in the child, walks an empty queue for a record
// it believes queued. The window is made here by hand: the registry
// record's parker says queued, and the thread is on its own_record.
TEST_F(Registry, ForkChildResetsBothRecordsOfAThreadInItsExitWindow) {
  testing::Watchdog wd(kWatch, "ForkChildResetsBothRecords");
  int child_status = -1;
  std::thread([&] {
    ThreadData* td = CurrentThreadData();
    ParkRecord* const registry_record = td->record;
    ASSERT_NE(registry_record, nullptr);
    registry_record->parker.store(kParkerQueued, std::memory_order_relaxed);
    td->record = nullptr;
    const pid_t pid = fork();
    if (pid == 0) {
      _exit(registry_record->parker.load(std::memory_order_relaxed) == 0 &&
                    td->own_record.parker.load(std::memory_order_relaxed) == 0
                ? 0
                : 1);
    }
    // The parent: back as it was before the thread exits.
    td->record = registry_record;
    registry_record->parker.store(0, std::memory_order_relaxed);
    ASSERT_GT(pid, 0);
    ASSERT_EQ(waitpid(pid, &child_status, 0), pid);
  }).join();
  EXPECT_TRUE(WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0)
      << child_status;
}

// Parked threads with consecutive slot ids (their states share no cache
// line, and their counts fall in different shards of ParkedThreads): each
// is seen parked, the total counts every one, and all return to running.
TEST_F(Registry, ManyParkedThreadsAllCountedAndReleased) {
  testing::Watchdog wd(kWatch, "ManyParkedThreads");
  constexpr int kThreads = 40;  // more than the count's shards
  const size_t parked_before = registry::ParkedThreads();
  int key;
  std::vector<std::unique_ptr<ParkedThread>> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.push_back(std::make_unique<ParkedThread>(KeyOf(&key)));
    ASSERT_TRUE(threads.back()->AwaitEnqueued());
  }
  std::set<uint32_t> slots;
  for (auto& t : threads) {
    const uint32_t slot = t->slot();
    slots.insert(slot);
    ASSERT_TRUE(WaitFor(
        [&] { return registry::StateOf(slot) == ThreadState::kParked; }));
  }
  EXPECT_EQ(slots.size(), static_cast<size_t>(kThreads));
  EXPECT_EQ(registry::ParkedThreads(), parked_before + kThreads);
  EXPECT_EQ(UnparkAll(KeyOf(&key)), static_cast<size_t>(kThreads));
  for (auto& t : threads) t->Join();
  for (uint32_t slot : slots) {
    EXPECT_EQ(registry::StateOf(slot), ThreadState::kRunning);
  }
  EXPECT_EQ(registry::ParkedThreads(), parked_before);
}

// The parked count under churn: threads park on a few shared keys with
// short deadlines (some are unparked, some time out), unpark one another,
// exit and are replaced (registry indices, and with them the count's
// shards, are reused), while a reader samples the count: it stays near the
// threads the test runs (a decrement before its increment would wrap a
// shard to 2^64 - 1), and once every thread has gone it is back where it
// began (a lost update would leave it off). The reader adds the shards one
// by one, not as a snapshot: preempted in the middle of a sum, it adds
// shards read in one round to shards read in a later one, so the bound is
// the most each shard can hold in any round (a round's consecutive slots
// put at most two threads in a shard), not the threads of one round (seen:
// 25 of 24 on a loaded machine).
TEST_F(Registry, ParkedCountStaysExactUnderChurn) {
  testing::Watchdog wd(kWatch, "ParkedCountStaysExactUnderChurn");
  constexpr int kThreads = 24;  // more than the count's shards
  constexpr int kShards = 16;   // Registry::kParkedShards (registry.cc)
  const int rounds = static_cast<int>(coretest::Scaled(60, 10, 2));
  constexpr int kOps = 200;
  const size_t parked_before = registry::ParkedThreads();
  int keys[4];
  std::atomic<bool> stop{false};
  std::atomic<size_t> max_seen{0};
  std::atomic<uint64_t> samples{0};
  std::thread reader([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      const size_t p = registry::ParkedThreads();
      size_t m = max_seen.load(std::memory_order_relaxed);
      while (p > m && !max_seen.compare_exchange_weak(m, p)) {
      }
      samples.fetch_add(1, std::memory_order_relaxed);
    }
  });
  std::atomic<uint64_t> unparked{0}, timed_out{0};
  for (int round = 0; round < rounds; ++round) {
    std::vector<SmallThread> threads(kThreads);
    for (int i = 0; i < kThreads; ++i) {
      threads[i].Start([&, i, round] {
        uint32_t rng =
            static_cast<uint32_t>(round * kThreads + i) * 2654435761u | 1;
        for (int op = 0; op < kOps; ++op) {
          rng ^= rng << 13;
          rng ^= rng >> 17;
          rng ^= rng << 5;
          const uintptr_t key = KeyOf(&keys[rng % 4]);
          if (rng % 3 != 0) {
            const ParkResult r = Park(
                key, [] { return true; }, [] {}, [](uintptr_t, bool) {}, 0,
                Deadline::In(absl::Microseconds(rng % 200)));
            (r.timed_out() ? timed_out : unparked).fetch_add(1);
          } else if (rng % 7 == 0) {
            UnparkAll(key);
          } else {
            UnparkOne(key, [](UnparkResult) { return kDefaultUnparkToken; });
          }
        }
      });
    }
    for (auto& t : threads) t.Join();
  }
  stop.store(true);
  reader.join();
  EXPECT_LE(max_seen.load(),
            parked_before + kShards * ((kThreads + kShards - 1) / kShards));
  EXPECT_EQ(registry::ParkedThreads(), parked_before);
  EXPECT_GT(unparked.load(), 0u);
  EXPECT_GT(timed_out.load(), 0u);
  std::printf("%d rounds of %d threads: %llu parks unparked, %llu timed out; "
              "%llu samples, at most %zu parked\n",
              rounds, kThreads,
              static_cast<unsigned long long>(unparked.load()),
              static_cast<unsigned long long>(timed_out.load()),
              static_cast<unsigned long long>(samples.load()),
              max_seen.load());
}

struct Ids {
  std::vector<uint32_t> indices;
  std::vector<uint32_t> slots;
};

// Runs `n` threads that are all registered and alive at the same time
// (each also does a timed park and an unpark), and returns their registry
// indices and slot ids.
Ids RunBatch(int n, size_t expect_live) {
  std::atomic<int> registered{0};
  absl::Notification leave;
  std::vector<uint32_t> indices(n);
  std::vector<uint32_t> slots(n);
  std::vector<SmallThread> threads(n);
  for (int i = 0; i < n; ++i) {
    threads[i].Start([&, i] {
      int key;
      // Registers, queues and dequeues itself.
      const ParkResult r = Park(
          KeyOf(&key), [] { return true; }, [] {}, [](uintptr_t, bool) {}, 0,
          Deadline::In(absl::ZeroDuration()));
      EXPECT_TRUE(r.timed_out());
      UnparkOne(KeyOf(&key), [](UnparkResult) { return kDefaultUnparkToken; });
      slots[i] = CurrentSlot();
      indices[i] = CurrentThreadData()->index;
      registered.fetch_add(1);
      leave.WaitForNotification();
    });
  }
  EXPECT_TRUE(WaitFor([&] { return registered.load() == n; }));
  EXPECT_EQ(registry::LiveThreads(), expect_live);
  leave.Notify();
  for (auto& t : threads) t.Join();
  return {indices, slots};
}

TEST_F(Registry, ExitFreesIndicesForReuseButNeverSlotIds) {
  testing::Watchdog wd(kWatch, "ExitFreesIndicesForReuse");
  constexpr int kBatch = 32;
  const Ids first = RunBatch(kBatch, base_live_ + kBatch);
  EXPECT_EQ(registry::LiveThreads(), base_live_);
  // Distinct while alive together.
  EXPECT_EQ(std::set<uint32_t>(first.indices.begin(), first.indices.end())
                .size(),
            static_cast<size_t>(kBatch));
  const uint32_t highest = registry::HighestIndex();
  for (uint32_t i : first.indices) {
    EXPECT_NE(i, 0u);
    EXPECT_LE(i, highest);
  }
  // A second batch of the same size reuses freed indices: no new ones.
  const Ids second = RunBatch(kBatch, base_live_ + kBatch);
  EXPECT_EQ(registry::HighestIndex(), highest);
  for (uint32_t i : second.indices) EXPECT_LE(i, highest);
  EXPECT_EQ(std::set<uint32_t>(second.indices.begin(), second.indices.end())
                .size(),
            static_cast<size_t>(kBatch));
  // Slot ids name lock owners: none of the first batch comes back, or a
  // new thread would pass for the owner of a lock an exited one held.
  std::set<uint32_t> all(first.slots.begin(), first.slots.end());
  all.insert(second.slots.begin(), second.slots.end());
  EXPECT_EQ(all.size(), static_cast<size_t>(2 * kBatch));
  EXPECT_EQ(all.count(kNoSlot), 0u);
  EXPECT_EQ(registry::ThreadsRegistered(), base_registered_ + 2 * kBatch);
}

// A TSD destructor that runs after parklot's own exit hook (its key was
// created later) and uses the lot, as liburcu-bp's exit path does when it
// locks its mutex through the shim.
pthread_key_t g_late_key;
void LateDestructor(void*) {
  int key;
  EXPECT_TRUE(Park(KeyOf(&key), [] { return false; }).invalid());
  UnparkOne(KeyOf(&key), [](UnparkResult) { return kDefaultUnparkToken; });
  UnparkUpTo(KeyOf(&key), 1);
}

TEST_F(Registry, LotUseAfterExitHookDoesNotRegisterAgain) {
  testing::Watchdog wd(kWatch, "LotUseAfterExitHook");
  ASSERT_EQ(pthread_key_create(&g_late_key, LateDestructor), 0);
  constexpr int kThreads = 10;
  for (int i = 0; i < kThreads; ++i) {
    std::thread t([] {
      int key;
      EXPECT_TRUE(Park(KeyOf(&key), [] { return false; }).invalid());
      pthread_setspecific(g_late_key, &g_late_key);
    });
    t.join();
  }
  EXPECT_EQ(registry::ThreadsRegistered(), base_registered_ + kThreads);
  EXPECT_EQ(registry::LiveThreads(), base_live_);
  pthread_key_delete(g_late_key);
}

// Resident set size in bytes, from /proc/self/statm.
size_t ResidentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long size = 0, resident = 0;
  const int n = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<size_t>(sysconf(_SC_PAGESIZE)) : 0;
}

// 10,000 short-lived threads in sequential batches: slots are recycled (the
// highest slot never moves after the first batch), the live count returns
// to its baseline, the table does not grow past what one batch needs, and
// (outside sanitizers, whose allocators keep memory on purpose) the RSS
// stays flat.
TEST_F(Registry, TenThousandShortLivedThreadsStayBounded) {
  testing::Watchdog wd(kWatch, "TenThousandShortLivedThreads");
  constexpr int kBatch = 50;
  constexpr int kTotal = 10000;
  RunBatch(kBatch, base_live_ + kBatch);
  const uint32_t highest = registry::HighestIndex();
  const size_t buckets = GlobalTable().bucket_count();
  size_t rss_warm = 0;
  for (int done = kBatch; done < kTotal; done += kBatch) {
    RunBatch(kBatch, base_live_ + kBatch);
    if (done == 20 * kBatch) rss_warm = ResidentBytes();
    ASSERT_EQ(registry::HighestIndex(), highest) << "after " << done;
  }
  const size_t rss_end = ResidentBytes();
  EXPECT_EQ(registry::LiveThreads(), base_live_);
  EXPECT_EQ(registry::ThreadsRegistered(), base_registered_ + kTotal);
  EXPECT_EQ(GlobalTable().bucket_count(), buckets);
  RecordProperty("rss_warm_kib", static_cast<int>(rss_warm >> 10));
  RecordProperty("rss_end_kib", static_cast<int>(rss_end >> 10));
  if (!coretest::kSanitized) {
    ASSERT_GT(rss_warm, 0u);
    // 9,000 more threads after warm-up: a per-thread leak of even one
    // page would add 36 MiB.
    EXPECT_LT(rss_end, rss_warm + (16u << 20))
        << "RSS grew from " << (rss_warm >> 10) << " KiB to "
        << (rss_end >> 10) << " KiB";
  }
}

// More live threads than the registry's first chunks of indices (4,096 a
// chunk, the first in .bss; the rest are mapped as fresh indices reach
// them): every thread is registered with an index of its own, a thread
// parks on a queue record in a mapped chunk, the statistics snapshot walks
// them all, and once they have exited their indices are reused.
TEST_F(Registry, MoreLiveThreadsThanTheFirstIndexChunk) {
  testing::Watchdog wd(kWatch, "MoreLiveThreadsThanTheFirstIndexChunk");
  const int kThreads = coretest::kSanitized ? 0 : 16384 + 600;
  if (kThreads == 0) GTEST_SKIP() << "sanitizers: too many threads";
  std::atomic<uint32_t> registered{0};
  std::atomic<uint32_t> gate{0};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  std::vector<pthread_t> threads;
  threads.reserve(static_cast<size_t>(kThreads));
  struct Arg {
    std::atomic<uint32_t>* registered;
    std::atomic<uint32_t>* gate;
  } arg{&registered, &gate};
  auto body = [](void* p) -> void* {
    Arg* a = static_cast<Arg*>(p);
    CurrentThreadData();  // registers
    a->registered->fetch_add(1, std::memory_order_release);
    // Alive until released (a kernel futex: the lot is not under test).
    while (a->gate->load(std::memory_order_acquire) == 0) {
      FutexWaitPrivate(a->gate, 0);
    }
    return nullptr;
  };
  for (int i = 0; i < kThreads; ++i) {
    pthread_t t;
    ASSERT_EQ(pthread_create(&t, &attr, body, &arg), 0) << "thread " << i;
    threads.push_back(t);
  }
  pthread_attr_destroy(&attr);
  ASSERT_TRUE(WaitFor([&] {
    return registered.load(std::memory_order_acquire) ==
           static_cast<uint32_t>(kThreads);
  }, absl::Seconds(120)));
  EXPECT_EQ(registry::LiveThreads(), base_live_ + kThreads);
  EXPECT_GE(registry::HighestIndex(), static_cast<uint32_t>(kThreads));
  EXPECT_GE(GetStats().live_threads, base_live_ + kThreads);
  {
    // One more thread, whose fresh index and queue record lie in a mapped
    // chunk, parks and is woken there.
    int key;
    ParkedThread t(KeyOf(&key));
    ASSERT_TRUE(t.AwaitEnqueued());
    EXPECT_GT(registry::HighestIndex(), static_cast<uint32_t>(kThreads));
    EXPECT_EQ(UnparkAll(KeyOf(&key)), 1u);
    EXPECT_TRUE(t.Join().result.unparked());
  }
  gate.store(1, std::memory_order_release);
  FutexWakePrivate(&gate, INT32_MAX);
  for (pthread_t t : threads) ASSERT_EQ(pthread_join(t, nullptr), 0);
  ASSERT_TRUE(WaitFor([&] { return registry::LiveThreads() == base_live_; }));
  // Exited indices are reused: a new thread takes one, not a fresh one.
  const uint32_t highest = registry::HighestIndex();
  std::thread([] { CurrentThreadData(); }).join();
  EXPECT_EQ(registry::HighestIndex(), highest);
}

}  // namespace
}  // namespace parklot::internal
