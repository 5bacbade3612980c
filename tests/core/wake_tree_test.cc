// The wake tree (runtime/parking_lot.cc ReleaseChain): an unpark
// that releases more than 32 threads wakes two of them itself, and every
// woken thread wakes up to two more (its wake duty) before it returns from
// its park. These tests check that
//   - every released thread is woken exactly once through the tree: every
//     asleep thread but the two roots appears in exactly one duty, and no
//     duty names a thread outside the batch;
//   - counts, tokens and FIFO choice are what the unparks promise
//     (UnparkAll, UnparkUpTo, UnparkFilter with a handed token, UnparkPair,
//     the deferred and handler paths);
//   - nothing is lost when timeouts race the release, when keys collide,
//     when delays are random, when signal handlers run on the waiters (away
//     records), when a helper is slow, leaves its duty by siglongjmp (with
//     and without the shim's handler wrapper), or forks inside it.
// Built twice: with the default table and with PARKLOT_POLICY=fixed:1
// (every key in one bucket).
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "runtime/config.h"
#include "runtime/deadline.h"
#include "runtime/global_table.h"
#include "runtime/parking_lot.h"
#include "runtime/thread_data.h"
#include "tests/core/test_support.h"
#include "tests/util/watchdog.h"

namespace parklot::internal {
namespace {

using coretest::RandomDelay;
using coretest::Rng;
using coretest::Scaled;
using coretest::SmallThread;
using coretest::WaitFor;
using coretest::WatchdogLimit;
using testing::Watchdog;

const absl::Duration kWatch = WatchdogLimit(absl::Seconds(50));
// Above this the tree is used (runtime/parking_lot.cc kWakeSerialMax).
constexpr int kSerialMax = 32;

#ifdef PARKLOT_TEST_FIXED1
TEST(WakeTreeConfig, RunsOnOneBucketTable) {
  EXPECT_EQ(GetConfig().table.policy, GrowthPolicy::kFixed);
  EXPECT_EQ(GlobalTable().bucket_count(), 1u);
}
#endif

// What the test hook saw: every duty run, with the words it named.
struct DutyLog {
  std::mutex mu;
  std::vector<ParkRecord*> runners;
  std::vector<const std::atomic<uint32_t>*> named;
  void Clear() {
    std::lock_guard<std::mutex> l(mu);
    runners.clear();
    named.clear();
  }
};
DutyLog g_log;

void LogDuty(ParkRecord* td) {
  const uint32_t n = td->wake_duty_count.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> l(g_log.mu);
  g_log.runners.push_back(td);
  for (uint32_t i = 0; i < n; ++i) {
    g_log.named.push_back(td->wake_duty[i].load(std::memory_order_relaxed));
  }
}

// Installs `hook` for the scope.
class HookScope {
 public:
  explicit HookScope(void (*hook)(ParkRecord*)) {
    internal::g_wake_duty_hook.store(hook);
  }
  ~HookScope() { internal::g_wake_duty_hook.store(nullptr); }
};

// N threads that each park once on `key` (park token = index) and record
// what came back.
class Herd {
 public:
  Herd(int n, uintptr_t key, Deadline deadline = Deadline::Never())
      : n_(n), tds_(n), results_(n) {
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([this, i, key, deadline] {
        tds_[i].store(CurrentThreadData()->Record(), std::memory_order_release);
        const ParkResult r =
            Park(key, [] { return true; }, [] {}, [](uintptr_t, bool) {},
                 static_cast<ParkToken>(i), deadline);
        results_[i] = r;
        done_.fetch_add(1, std::memory_order_release);
      }, 128 << 10);
    }
  }
  ~Herd() { Join(); }
  void Join() {
    for (auto& t : threads_) t.Join();
    threads_.clear();
  }
  // Until every thread is asleep in the kernel on its parker.
  bool AwaitAsleep() {
    return WaitFor([this] {
      for (auto& td : tds_) {
        ParkRecord* d = td.load(std::memory_order_acquire);
        if (d == nullptr ||
            (d->parker.load(std::memory_order_acquire) & kParkerAsleep) == 0) {
          return false;
        }
      }
      return true;
    });
  }
  bool AwaitDone(int n) {
    return WaitFor([this, n] { return done() >= n; }, absl::Seconds(30));
  }
  int done() const { return done_.load(std::memory_order_acquire); }
  const ParkResult& result(int i) const { return results_[i]; }
  ParkRecord* td(int i) const { return tds_[i].load(); }
  int size() const { return n_; }

 private:
  int n_;
  std::vector<std::atomic<ParkRecord*>> tds_;
  std::vector<ParkResult> results_;
  std::atomic<int> done_{0};
  std::vector<SmallThread> threads_;
};

struct alignas(64) Slot {
  std::atomic<uint32_t> v{0};
};

// Every asleep thread of a batch but the unparker's two roots is named in
// exactly one duty, every named word is a parker of the batch, and only
// batch threads run duties.
void ExpectOneWakeEach(const Herd& h, const std::vector<int>& batch) {
  std::lock_guard<std::mutex> l(g_log.mu);
  std::set<const std::atomic<uint32_t>*> parkers;
  std::set<ParkRecord*> members;
  for (int i : batch) {
    parkers.insert(&h.td(i)->parker);
    members.insert(h.td(i));
  }
  std::multiset<const std::atomic<uint32_t>*> named(g_log.named.begin(),
                                                    g_log.named.end());
  EXPECT_EQ(named.size(), batch.size() - 2) << "the unparker wakes two";
  for (const auto* w : named) {
    EXPECT_EQ(named.count(w), 1u) << "a thread named in two duties";
    EXPECT_EQ(parkers.count(w), 1u) << "a duty names a thread outside";
  }
  for (ParkRecord* r : g_log.runners) {
    EXPECT_EQ(members.count(r), 1u) << "a duty ran outside the batch";
  }
}

TEST(WakeTree, UnparkAllWakesEachThreadOnce) {
  Watchdog wd(kWatch, "UnparkAllWakesEachThreadOnce");
  HookScope hook(LogDuty);
  for (int n : {kSerialMax + 1, kSerialMax + 2, 64, 100, 257}) {
    if (coretest::kTsan && n > 100) continue;
    g_log.Clear();
    Slot s;
    Herd h(n, KeyOf(&s));
    ASSERT_TRUE(h.AwaitAsleep());
    EXPECT_EQ(UnparkAll(KeyOf(&s), 9), static_cast<size_t>(n));
    ASSERT_TRUE(h.AwaitDone(n)) << n << ": " << h.done() << " returned";
    h.Join();
    std::vector<int> all(n);
    for (int i = 0; i < n; ++i) {
      all[i] = i;
      EXPECT_TRUE(h.result(i).unparked());
      EXPECT_EQ(h.result(i).token, 9u);
    }
    ExpectOneWakeEach(h, all);
    // The tree is shallow: the deepest thread is about log2(n) hops down.
    std::lock_guard<std::mutex> l(g_log.mu);
    EXPECT_GE(g_log.runners.size(), static_cast<size_t>(n / 2 - 2));
  }
}

TEST(WakeTree, SerialUpToThirtyTwo) {
  Watchdog wd(kWatch, "SerialUpToThirtyTwo");
  HookScope hook(LogDuty);
  g_log.Clear();
  Slot s;
  Herd h(kSerialMax, KeyOf(&s));
  ASSERT_TRUE(h.AwaitAsleep());
  EXPECT_EQ(UnparkAll(KeyOf(&s)), static_cast<size_t>(kSerialMax));
  ASSERT_TRUE(h.AwaitDone(kSerialMax));
  std::lock_guard<std::mutex> l(g_log.mu);
  EXPECT_TRUE(g_log.runners.empty()) << "the unparker wakes 32 itself";
}

// UnparkUpTo takes the first `count` (FIFO), and only those run or receive
// duties; the rest stay parked.
TEST(WakeTree, UnparkUpToTakesTheFirst) {
  Watchdog wd(kWatch, "UnparkUpToTakesTheFirst");
  HookScope hook(LogDuty);
  const int n = coretest::kTsan ? 60 : 120;
  Slot s;
  // Enqueued in index order, so FIFO order is index order.
  std::vector<std::unique_ptr<Herd>> herd;
  for (int i = 0; i < n; ++i) {
    herd.push_back(std::make_unique<Herd>(1, KeyOf(&s)));
    ASSERT_TRUE(herd.back()->AwaitAsleep());
  }
  g_log.Clear();
  const int take = 50;
  EXPECT_EQ(UnparkUpTo(KeyOf(&s), take), static_cast<size_t>(take));
  for (int i = 0; i < take; ++i) ASSERT_TRUE(herd[i]->AwaitDone(1));
  absl::SleepFor(absl::Milliseconds(20));
  for (int i = take; i < n; ++i) EXPECT_EQ(herd[i]->done(), 0) << i;
  {
    std::lock_guard<std::mutex> l(g_log.mu);
    std::set<const std::atomic<uint32_t>*> first;
    for (int i = 0; i < take; ++i) first.insert(&herd[i]->td(0)->parker);
    EXPECT_EQ(g_log.named.size(), static_cast<size_t>(take - 2));
    for (const auto* w : g_log.named) EXPECT_EQ(first.count(w), 1u);
  }
  EXPECT_EQ(UnparkAll(KeyOf(&s)), static_cast<size_t>(n - take));
  for (auto& h : herd) ASSERT_TRUE(h->AwaitDone(1));
}

// UnparkFilter: the chosen (odd park tokens) all get the token the
// callback returns, through the tree; the others stay.
TEST(WakeTree, UnparkFilterHandsItsToken) {
  Watchdog wd(kWatch, "UnparkFilterHandsItsToken");
  const int n = 90;
  Slot s;
  Herd h(n, KeyOf(&s));
  ASSERT_TRUE(h.AwaitAsleep());
  const UnparkResult r = UnparkFilter(
      KeyOf(&s),
      [](ParkToken t) { return t % 2 ? FilterOp::kUnpark : FilterOp::kSkip; },
      [](UnparkResult r) { return UnparkToken{1000 + r.unparked_threads}; });
  EXPECT_EQ(r.unparked_threads, static_cast<size_t>(n / 2));
  EXPECT_TRUE(r.have_more_threads);
  ASSERT_TRUE(h.AwaitDone(n / 2));
  absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(h.done(), n / 2);
  EXPECT_EQ(UnparkAll(KeyOf(&s), 5), static_cast<size_t>(n / 2));
  h.Join();
  for (int i = 0; i < n; ++i) {
    EXPECT_TRUE(h.result(i).unparked());
    EXPECT_EQ(h.result(i).token, i % 2 ? 1000u + n / 2 : 5u) << i;
  }
}

// UnparkPair (the served FUTEX_WAKE_OP and requeue): wake many on both keys.
TEST(WakeTree, UnparkPairWakesManyOnBothKeys) {
  Watchdog wd(kWatch, "UnparkPairWakesManyOnBothKeys");
  const int n = 50;
  Slot a, b;
  Herd ha(n, KeyOf(&a)), hb(n, KeyOf(&b));
  ASSERT_TRUE(ha.AwaitAsleep());
  ASSERT_TRUE(hb.AwaitAsleep());
  const PairResult r = UnparkPair(KeyOf(&a), KeyOf(&b), [&](PairPlan* p) {
    p->unpark_from = 40;
    p->unpark_to = 45;
    return true;
  });
  EXPECT_EQ(r.unparked_from, 40u);
  EXPECT_EQ(r.unparked_to, 45u);
  ASSERT_TRUE(ha.AwaitDone(40));
  ASSERT_TRUE(hb.AwaitDone(45));
  EXPECT_EQ(UnparkAll(KeyOf(&a)) + UnparkAll(KeyOf(&b)), 15u);
}

// A served FUTEX_WAKE or sem_post from a signal handler: UnparkUpTo runs
// the tree on a handler's stack, directly (outside a lock section).
Slot g_handler_slot;
std::atomic<size_t> g_handler_woke{0};
void WakeAllHandler(int) {
  g_handler_woke.store(UnparkUpTo(KeyOf(&g_handler_slot), SIZE_MAX));
}

TEST(WakeTree, UnparkUpToFromASignalHandler) {
  Watchdog wd(kWatch, "UnparkUpToFromASignalHandler");
  struct sigaction sa = {}, old = {};
  sa.sa_handler = WakeAllHandler;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
  // A small alternate stack, as a program may give its handlers.
  std::vector<char> alt(16 << 10);
  const int n = 70;
  Herd h(n, KeyOf(&g_handler_slot));
  ASSERT_TRUE(h.AwaitAsleep());
  std::thread t([&] {
    stack_t ss = {};
    ss.ss_sp = alt.data();
    ss.ss_size = alt.size();
    sigaltstack(&ss, nullptr);
    struct sigaction onstack = sa;
    onstack.sa_flags = SA_ONSTACK;
    sigaction(SIGUSR1, &onstack, nullptr);
    raise(SIGUSR1);
    ss.ss_flags = SS_DISABLE;
    sigaltstack(&ss, nullptr);
  });
  t.join();
  EXPECT_EQ(g_handler_woke.load(), static_cast<size_t>(n));
  ASSERT_TRUE(h.AwaitDone(n));
  sigaction(SIGUSR1, &old, nullptr);
}

// Waiters with short random deadlines race UnparkAll: a waiter the
// unparker dequeued reports kUnparked however late its deadline fell (it
// was released under the same bucket lock), one that left first reports
// kTimedOut, and the unparkers' counts add up to the kUnparked results
// exactly. Random delays on both sides; several keys, so with fixed:1 the
// trees of different keys interleave in one bucket.
TEST(WakeTree, TimeoutsRacingReleases) {
  Watchdog wd(kWatch, "TimeoutsRacingReleases");
  constexpr int kKeys = 3;
  const int per_key = coretest::kTsan ? 24 : 48;
  const int64_t rounds = Scaled(2000, 20, 4);
  Slot keys[kKeys];
  std::atomic<bool> stop{false};
  std::atomic<int64_t> unparked{0}, timed_out{0}, other{0}, counted{0};
  std::atomic<int> exited{0};
  std::vector<SmallThread> waiters;
  for (int k = 0; k < kKeys; ++k) {
    for (int i = 0; i < per_key; ++i) {
      waiters.emplace_back([&, k, i] {
        Rng rng(1000 * k + i + 1);
        while (!stop.load(std::memory_order_relaxed)) {
          RandomDelay(rng);
          const Deadline d = Deadline::In(
              absl::Microseconds(static_cast<int64_t>(rng.Below(3000))));
          const ParkResult r = Park(
              KeyOf(&keys[k]),
              [&] { return !stop.load(std::memory_order_relaxed); }, [] {},
              [](uintptr_t, bool) {}, kDefaultParkToken, d);
          if (r.unparked()) {
            unparked.fetch_add(1);
          } else if (r.timed_out()) {
            timed_out.fetch_add(1);
          } else if (!r.invalid()) {
            other.fetch_add(1);
          }
        }
        exited.fetch_add(1);
      }, 128 << 10);
    }
  }
  std::vector<std::thread> wakers;
  for (int k = 0; k < kKeys; ++k) {
    wakers.emplace_back([&, k] {
      Rng rng(77 + k);
      for (int64_t r = 0; r < rounds; ++r) {
        absl::SleepFor(absl::Microseconds(static_cast<int64_t>(rng.Below(2000))));
        counted.fetch_add(static_cast<int64_t>(
            rng.Below(2) ? UnparkAll(KeyOf(&keys[k]))
                         : UnparkUpTo(KeyOf(&keys[k]),
                                      static_cast<size_t>(33 + rng.Below(20)))));
      }
    });
  }
  for (auto& t : wakers) t.join();
  stop.store(true);
  // Each waiter exits at its next validate; wake those still asleep until
  // all are out (their wakes are counted like any other).
  while (exited.load() < kKeys * per_key) {
    for (int k = 0; k < kKeys; ++k) {
      counted.fetch_add(static_cast<int64_t>(UnparkAll(KeyOf(&keys[k]))));
    }
    absl::SleepFor(absl::Microseconds(200));
  }
  for (auto& t : waiters) t.Join();
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(counted.load(), unparked.load());
  EXPECT_GT(timed_out.load(), 0);
  EXPECT_GT(unparked.load(), 0);
  RecordProperty("unparked", static_cast<int>(unparked.load()));
  RecordProperty("timed_out", static_cast<int>(timed_out.load()));
}

// Many keys, random delays, no deadline that can save a lost wake-up
// (30 s): waiters wait for their key's counter to pass a target, wakers
// bump it and release everyone (or many) on it. Signal handlers that do
// what the shim's wrapper does (EnterSignalHandler/LeaveSignalHandler) run
// on the waiters throughout, so away records meet the trees.
void AwayHandler(int) {
  SignalHandlerScope scope;
  EnterSignalHandler(&scope);
  for (int i = 0; i < 50; ++i) CpuRelax();
  LeaveSignalHandler(scope);
}

TEST(WakeTree, ManyKeysRandomDelaysAndHandlers) {
  Watchdog wd(kWatch, "ManyKeysRandomDelaysAndHandlers");
  struct sigaction sa = {}, old = {};
  sa.sa_handler = AwayHandler;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR2, &sa, &old), 0);
  constexpr int kKeys = 4;
  const int threads = coretest::kTsan ? 80 : 160;
  const int64_t rounds = Scaled(1500, 20, 4);
  Slot counters[kKeys];
  std::atomic<int> lost{0}, exited{0};
  std::atomic<bool> stop{false};
  std::vector<SmallThread> waiters;
  std::vector<std::atomic<pthread_t>> ids(threads);
  for (int i = 0; i < threads; ++i) {
    waiters.emplace_back([&, i] {
      ids[i].store(pthread_self());
      Rng rng(i + 1);
      Slot& c = counters[i % kKeys];
      while (!stop.load(std::memory_order_relaxed)) {
        const uint32_t target = c.v.load(std::memory_order_acquire) + 1;
        RandomDelay(rng);
        while (c.v.load(std::memory_order_acquire) < target &&
               !stop.load(std::memory_order_relaxed)) {
          const ParkResult r = Park(
              KeyOf(&c),
              [&] {
                const bool wait = c.v.load(std::memory_order_relaxed) < target &&
                                  !stop.load(std::memory_order_relaxed);
                RandomDelay(rng);
                return wait;
              },
              [] {}, [](uintptr_t, bool) {}, kDefaultParkToken,
              Deadline::In(absl::Seconds(30)));
          if (r.timed_out()) lost.fetch_add(1);
        }
      }
      ids[i].store(pthread_t{});
      exited.fetch_add(1);
    }, 128 << 10);
  }
  std::atomic<bool> signals_done{false};
  std::thread signaller([&] {
    Rng rng(999);
    while (!signals_done.load()) {
      const pthread_t t = ids[rng.Below(threads)].load();
      if (t != pthread_t{}) pthread_kill(t, SIGUSR2);
      absl::SleepFor(absl::Microseconds(200));
    }
  });
  std::vector<std::thread> wakers;
  for (int w = 0; w < 2; ++w) {
    wakers.emplace_back([&, w] {
      Rng rng(555 + w);
      for (int64_t r = 0; r < rounds; ++r) {
        Slot& c = counters[rng.Below(kKeys)];
        absl::SleepFor(absl::Microseconds(static_cast<int64_t>(rng.Below(1000))));
        c.v.fetch_add(1, std::memory_order_release);
        if (rng.Below(2)) {
          UnparkAll(KeyOf(&c));
        } else {
          // More than the serial maximum, perhaps fewer than parked: a
          // waiter left over was not promised a wake by this bump... so
          // wake the rest too, in a second batch.
          UnparkUpTo(KeyOf(&c), static_cast<size_t>(33 + rng.Below(30)));
          UnparkAll(KeyOf(&c));
        }
      }
    });
  }
  for (auto& t : wakers) t.join();
  stop.store(true);
  while (exited.load() < threads) {
    for (auto& c : counters) {
      c.v.fetch_add(1);
      UnparkAll(KeyOf(&c));
    }
    absl::SleepFor(absl::Microseconds(200));
  }
  for (auto& t : waiters) t.Join();
  signals_done.store(true);
  signaller.join();
  sigaction(SIGUSR2, &old, nullptr);
  EXPECT_EQ(lost.load(), 0);
}

// A helper that is slow to run its duty (preempted, descheduled, low
// priority): the threads below it wait for it, but nothing is lost, and the
// threads of the other subtree do not wait.
std::atomic<int> g_slow_calls{0};
void SlowFirstHelper(ParkRecord*) {
  if (g_slow_calls.fetch_add(1) == 0) absl::SleepFor(absl::Milliseconds(300));
}

TEST(WakeTree, SlowHelperDelaysOnlyItsSubtree) {
  Watchdog wd(kWatch, "SlowHelperDelaysOnlyItsSubtree");
  HookScope hook(SlowFirstHelper);
  g_slow_calls.store(0);
  const int n = 80;
  Slot s;
  Herd h(n, KeyOf(&s));
  ASSERT_TRUE(h.AwaitAsleep());
  const absl::Time t0 = absl::Now();
  EXPECT_EQ(UnparkAll(KeyOf(&s)), static_cast<size_t>(n));
  // The other root's subtree (about half) comes out while the slow helper
  // sleeps.
  ASSERT_TRUE(h.AwaitDone(n / 4));
  if (!coretest::kSanitized) {
    EXPECT_LT(absl::Now() - t0, absl::Milliseconds(250));
  }
  ASSERT_TRUE(h.AwaitDone(n));
  h.Join();
  for (int i = 0; i < n; ++i) EXPECT_TRUE(h.result(i).unparked());
}

// A helper that leaves by siglongjmp from a signal handler while its duty
// is due. With the shim's wrapper (EnterSignalHandler first), the duty is
// run before the program's handler: nobody waits. Without it (a program
// linking the library, its handler unwrapped), the threads below wait
// until the helper's next Park, which runs the duty (EvictOwnRecord).
thread_local sigjmp_buf t_jump;
thread_local bool t_jumper = false;
std::atomic<bool> g_wrapped{true};
std::atomic<int> g_jumps{0};
void JumpHandler(int) {
  if (g_wrapped.load()) {
    SignalHandlerScope scope;
    EnterSignalHandler(&scope);
  }
  siglongjmp(t_jump, 1);
}
void JumpFromFirstHelper(ParkRecord*) {
  // Only the designated thread jumps, once, and never from the duty its
  // own handler runs.
  if (t_jumper && g_jumps.fetch_add(1) == 0) raise(SIGUSR2);
}

void RunJumpingHelper(bool wrapped) {
  struct sigaction sa = {}, old = {};
  sa.sa_handler = JumpHandler;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR2, &sa, &old), 0);
  g_wrapped.store(wrapped);
  g_jumps.store(0);
  HookScope hook(JumpFromFirstHelper);
  const int n = 60;
  Slot s;
  // Every thread may jump (whichever gets a duty first); each jumper parks
  // again, invalidly, after a pause, which runs any duty left.
  std::atomic<int> returned{0}, jumped{0};
  std::atomic<bool> release_jumpers{false};
  std::vector<std::atomic<ParkRecord*>> tds(n);
  std::vector<SmallThread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      tds[i].store(CurrentThreadData()->Record());
      t_jumper = true;
      if (sigsetjmp(t_jump, 1) == 0) {
        Park(KeyOf(&s), [] { return true; });
        t_jumper = false;
        returned.fetch_add(1);
        return;
      }
      t_jumper = false;
      jumped.fetch_add(1);
      while (!release_jumpers.load()) absl::SleepFor(absl::Milliseconds(1));
      int other;
      EXPECT_TRUE(Park(KeyOf(&other), [] { return false; }).invalid());
    }, 256 << 10);
  }
  ASSERT_TRUE(WaitFor([&] {
    for (auto& td : tds) {
      ParkRecord* d = td.load();
      if (d == nullptr || (d->parker.load() & kParkerAsleep) == 0) return false;
    }
    return true;
  }));
  EXPECT_EQ(UnparkAll(KeyOf(&s)), static_cast<size_t>(n));
  if (wrapped) {
    // The jumper's handler ran its duty: everyone else comes out now.
    ASSERT_TRUE(WaitFor([&] { return returned.load() == n - 1; },
                        absl::Seconds(20)));
  }
  // The jumper counts itself after its siglongjmp, which a busy machine may
  // delay past the others' return.
  ASSERT_TRUE(WaitFor([&] { return jumped.load() >= 1; }));
  EXPECT_EQ(jumped.load(), 1);
  release_jumpers.store(true);
  ASSERT_TRUE(WaitFor([&] { return returned.load() == n - 1; },
                      absl::Seconds(20)));
  for (auto& t : threads) t.Join();
  sigaction(SIGUSR2, &old, nullptr);
}

TEST(WakeTree, HelperLeavesBySiglongjmpWrapped) {
  Watchdog wd(kWatch, "HelperLeavesBySiglongjmpWrapped");
  RunJumpingHelper(true);
}

TEST(WakeTree, HelperLeavesBySiglongjmpUnwrapped) {
  Watchdog wd(kWatch, "HelperLeavesBySiglongjmpUnwrapped");
  RunJumpingHelper(false);
}

// A helper that forks inside its duty: the child, a copy of one thread,
// runs its copy of the duty on words no thread waits on and uses the lot
// normally; the parent's tree completes.
std::atomic<pid_t> g_child{0};
std::atomic<bool> g_forked{false};
void ForkInFirstHelper(ParkRecord*) {
  // One helper forks. (Two at once would be fine for glibc, which holds
  // its atfork lock from the prepare handlers to the parent ones, but
  // TSan cannot see that lock and reports runtime/fork.cc's steps.)
  if (g_forked.exchange(true)) return;
  const pid_t pid = fork();
  if (pid == 0) {
    // The child: the lot works (a park that times out, one that is woken).
    Slot s;
    const ParkResult r =
        Park(KeyOf(&s), [] { return true; }, [] {}, [](uintptr_t, bool) {},
             kDefaultParkToken, Deadline::In(absl::Milliseconds(5)));
    _exit(r.timed_out() ? 0 : 1);
  }
  g_child.store(pid);
}

TEST(WakeTree, HelperForksInItsDuty) {
  Watchdog wd(kWatch, "HelperForksInItsDuty");
  HookScope hook(ForkInFirstHelper);
  g_child.store(0);
  g_forked.store(false);
  const int n = 40;
  Slot s;
  Herd h(n, KeyOf(&s));
  ASSERT_TRUE(h.AwaitAsleep());
  EXPECT_EQ(UnparkAll(KeyOf(&s)), static_cast<size_t>(n));
  ASSERT_TRUE(h.AwaitDone(n));
  ASSERT_TRUE(WaitFor([] { return g_child.load() != 0; }));
  const pid_t pid = g_child.load();
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// Rounds of a latch-like release (one key, everyone, over and over) with
// the same threads, the shape of a barrier or a once in a loop.
TEST(WakeTree, RepeatedReleasesOfTheSameThreads) {
  Watchdog wd(kWatch, "RepeatedReleasesOfTheSameThreads");
  const int n = coretest::kTsan ? 48 : 96;
  const int64_t rounds = Scaled(1000, 20, 4);
  Slot gen;
  std::atomic<int> arrived{0};
  std::vector<SmallThread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&] {
      for (int64_t r = 0; r < rounds; ++r) {
        const uint32_t my = static_cast<uint32_t>(r);
        arrived.fetch_add(1);
        while (gen.v.load(std::memory_order_acquire) == my) {
          Park(KeyOf(&gen), [&] { return gen.v.load() == my; });
        }
      }
    }, 128 << 10);
  }
  for (int64_t r = 0; r < rounds; ++r) {
    ASSERT_TRUE(WaitFor([&] { return arrived.load() == n * (r + 1); },
                        absl::Seconds(30)))
        << "round " << r << ": " << arrived.load();
    gen.v.fetch_add(1, std::memory_order_release);
    UnparkAll(KeyOf(&gen));
  }
  for (auto& t : threads) t.Join();
}

}  // namespace
}  // namespace parklot::internal
