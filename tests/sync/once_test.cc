// parklot::Once: exactly one init among 64 racing threads, waiters park
// rather than spin, a throwing init and a cancelled (forced-unwound) init
// leave the Once callable again, and destruction right after Call returns.
#include "sync/once.h"

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/global_table.h"
#include "runtime/thread_data.h"
#include "tests/sync/sync_test_util.h"
#include "tests/util/watchdog.h"

namespace parklot::internal::testing {
namespace {

TEST(OnceTest, LayoutAndConstantInit) {
  static_assert(sizeof(Once) == 4 && sizeof(Once) == sizeof(pthread_once_t));
  static_assert(alignof(Once) <= alignof(pthread_once_t));
  static constinit Once once;
  EXPECT_FALSE(once.done());
  EXPECT_EQ(once.word()->load(), 0u);  // PTHREAD_ONCE_INIT
  int runs = 0;
  once.Call([&] { ++runs; });
  once.Call([&] { ++runs; });
  EXPECT_EQ(runs, 1);
  EXPECT_TRUE(once.done());
}

TEST(OnceTest, OneBucketBuild) {
  if (!ExpectOneBucket()) GTEST_SKIP() << "default table";
  EXPECT_EQ(GlobalTable().bucket_count(), 1u);
}

TEST(OnceTest, ForwardsArgumentsAndCallables) {
  Once once;
  int sum = 0;
  struct Adder {
    void Add(int a, int b, int* out) const { *out = a + b; }
  };
  Adder adder;
  CallOnce(once, &Adder::Add, adder, 2, 3, &sum);
  EXPECT_EQ(sum, 5);
  CallOnce(once, &Adder::Add, adder, 10, 10, &sum);
  EXPECT_EQ(sum, 5);

  Once once2;
  auto moved = std::make_unique<int>(7);
  once2.Call([](std::unique_ptr<int> p, int* out) { *out = *p; },
             std::move(moved), &sum);
  EXPECT_EQ(sum, 7);
}

// 64 threads race on one Once whose init takes 10 ms: exactly one init;
// everyone returns after it and sees its (plain, non-atomic) writes.
TEST(OnceTest, SixtyFourRacersExactlyOneInit) {
  Watchdog wd(kWatchdogLimit, "OnceTest.SixtyFourRacersExactlyOneInit");
  const int rounds = static_cast<int>(Scaled(10, 3));
  for (int round = 0; round < rounds; ++round) {
    Once once;
    std::atomic<int> inits{0};
    int payload[16] = {};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int i = 0; i < 64; ++i) {
      threads.emplace_back([&] {
        while (!go.load(std::memory_order_acquire)) {
          std::this_thread::yield();
        }
        once.Call([&] {
          inits.fetch_add(1);
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
          for (int& p : payload) p = 42;
        });
        EXPECT_TRUE(once.done());
        for (int p : payload) EXPECT_EQ(p, 42);
      });
    }
    go.store(true, std::memory_order_release);
    for (auto& t : threads) t.join();
    EXPECT_EQ(inits.load(), 1);
  }
}

// Waiters park while the init runs (they neither spin nor return early).
TEST(OnceTest, WaitersParkWhileInitRuns) {
  Watchdog wd(kWatchdogLimit, "OnceTest.WaitersParkWhileInitRuns");
  Once once;
  std::atomic<bool> finish{false}, started{false};
  std::thread initializer([&] {
    once.Call([&] {
      started.store(true);
      ASSERT_TRUE(Eventually([&] { return finish.load(); }));
    });
  });
  ASSERT_TRUE(Eventually([&] { return started.load(); }));
  constexpr int kWaiters = 4;
  std::vector<ThreadRef> refs(kWaiters);
  std::atomic<int> returned{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.emplace_back([&, i] {
      refs[i].Publish();
      once.Call([] { ADD_FAILURE() << "second init"; });
      returned.fetch_add(1);
    });
  }
  for (auto& r : refs) ASSERT_TRUE(r.WaitParked());
  EXPECT_EQ(returned.load(), 0);
  EXPECT_EQ(Once::StateOf(once.word()->load()), Once::kRunningWithWaiters);
  finish.store(true);
  initializer.join();
  for (auto& t : waiters) t.join();
  EXPECT_EQ(returned.load(), kWaiters);
}

TEST(OnceTest, ThrowingInitIsRetried) {
  Once once;
  int calls = 0;
  EXPECT_THROW(once.Call([&] {
    ++calls;
    throw std::runtime_error("init failed");
  }),
               std::runtime_error);
  EXPECT_FALSE(once.done());
  EXPECT_EQ(once.word()->load(), Once::kNotRun);
  once.Call([&] { ++calls; });
  EXPECT_EQ(calls, 2);
  EXPECT_TRUE(once.done());
  once.Call([&] { ++calls; });
  EXPECT_EQ(calls, 2);
}

// The init throws while other threads are parked on the Once: one of them
// runs its own init, successfully; all return.
TEST(OnceTest, ThrowingInitWithParkedWaiters) {
  Watchdog wd(kWatchdogLimit, "OnceTest.ThrowingInitWithParkedWaiters");
  const int rounds = static_cast<int>(Scaled(20, 4));
  for (int round = 0; round < rounds; ++round) {
    Once once;
    std::atomic<int> attempts{0}, successes{0};
    std::atomic<bool> release_thrower{false};
    std::thread thrower([&] {
      try {
        once.Call([&] {
          attempts.fetch_add(1);
          ASSERT_TRUE(Eventually([&] { return release_thrower.load(); }));
          throw std::runtime_error("first init fails");
        });
        ADD_FAILURE() << "exception lost";
      } catch (const std::runtime_error&) {
      }
    });
    ASSERT_TRUE(Eventually([&] { return attempts.load() == 1; }));
    constexpr int kWaiters = 8;
    std::vector<ThreadRef> refs(kWaiters);
    std::vector<std::thread> waiters;
    for (int i = 0; i < kWaiters; ++i) {
      waiters.emplace_back([&, i] {
        refs[i].Publish();
        once.Call([&] {
          attempts.fetch_add(1);
          successes.fetch_add(1);
        });
        EXPECT_TRUE(once.done());
      });
    }
    for (auto& r : refs) ASSERT_TRUE(r.WaitParked());
    release_thrower.store(true);
    thrower.join();
    for (auto& t : waiters) t.join();
    EXPECT_EQ(attempts.load(), 2);
    EXPECT_EQ(successes.load(), 1);
  }
}

// pthread_once semantics under cancellation: the init routine is a
// cancellation point's victim; the forced unwind resets the Once, and a
// parked waiter then runs the init itself.
struct CancelCtx {
  Once* once;
  std::atomic<bool>* in_init;
};

void* CancelledInit(void* arg) {
  auto* ctx = static_cast<CancelCtx*>(arg);
  ctx->once->Call([ctx] {
    ctx->in_init->store(true);
    for (;;) {
      pthread_testcancel();  // the cancellation point
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  });
  return nullptr;
}

TEST(OnceTest, CancelledInitLeavesOnceCallable) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer does not support pthread_cancel's unwind";
#endif
  Watchdog wd(kWatchdogLimit, "OnceTest.CancelledInitLeavesOnceCallable");
  Once once;
  std::atomic<bool> in_init{false};
  CancelCtx ctx{&once, &in_init};
  pthread_t victim;
  ASSERT_EQ(pthread_create(&victim, nullptr, CancelledInit, &ctx), 0);
  ASSERT_TRUE(Eventually([&] { return in_init.load(); }));
  ThreadRef ref;
  std::atomic<int> runs{0};
  std::thread waiter([&] {
    ref.Publish();
    once.Call([&] { runs.fetch_add(1); });
  });
  ASSERT_TRUE(ref.WaitParked());
  ASSERT_EQ(pthread_cancel(victim), 0);
  void* result = nullptr;
  ASSERT_EQ(pthread_join(victim, &result), 0);
  EXPECT_EQ(result, PTHREAD_CANCELED);
  waiter.join();
  EXPECT_EQ(runs.load(), 1);
  EXPECT_TRUE(once.done());
}

// fork() while another thread runs the init, with no waiter and with
// waiters parked: in the child no thread will ever finish that init, so
// (as with glibc's pthread_once) the child's call runs its own function,
// exactly once, while a Once completed before the fork stays completed.
// The parent is unaffected: one init, every waiter returns.
TEST(OnceTest, ForkWhileInitRunsRunsItAgainInTheChild) {
  Watchdog wd(kWatchdogLimit,
              "OnceTest.ForkWhileInitRunsRunsItAgainInTheChild");
  for (int waiters : {0, 3}) {
    SCOPED_TRACE(waiters);
    Once once, completed;
    completed.Call([] {});
    std::atomic<bool> started{false}, finish{false};
    std::atomic<int> parent_inits{0};
    std::thread initializer([&] {
      once.Call([&] {
        parent_inits.fetch_add(1);
        started.store(true);
        ASSERT_TRUE(Eventually([&] { return finish.load(); }));
      });
    });
    ASSERT_TRUE(Eventually([&] { return started.load(); }));
    std::vector<ThreadRef> refs(waiters);
    std::vector<std::thread> parked;
    for (int i = 0; i < waiters; ++i) {
      parked.emplace_back([&, i] {
        refs[i].Publish();
        once.Call([&] { parent_inits.fetch_add(1); });
      });
    }
    for (auto& r : refs) ASSERT_TRUE(r.WaitParked());
    const uint32_t parent_gen = Once::CurrentGeneration();
    const uint32_t word_at_fork = once.word()->load();
    EXPECT_EQ(Once::StateOf(word_at_fork),
              waiters > 0 ? Once::kRunningWithWaiters : Once::kRunning);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Only async-signal-safe calls and the lot here; results by exit code.
      alarm(20);
      if (Once::CurrentGeneration() == parent_gen) _exit(2);
      int runs = 0;
      once.Call([&] { ++runs; });
      once.Call([&] { ++runs; });
      if (runs != 1) _exit(3);
      if (!once.done()) _exit(4);
      bool reran = false;
      completed.Call([&] { reran = true; });
      if (reran) _exit(5);
      _exit(0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "child status " << status << " (SIGALRM = hung)";
    // The parent's Once was not disturbed by the fork.
    EXPECT_EQ(once.word()->load(), word_at_fork);
    finish.store(true);
    initializer.join();
    for (auto& t : parked) t.join();
    EXPECT_EQ(parent_inits.load(), 1);
    EXPECT_TRUE(once.done());
  }
}

// Forks in a chain: each child forks again while one of its own threads
// runs an init; each generation's child runs it again. A running state's
// generation can never be taken for the current one after a fork.
TEST(OnceTest, ForkChainsKeepCountingGenerations) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer ends a child of a multi-threaded process "
                  "that starts a thread (die_after_fork)";
#endif
  Watchdog wd(kWatchdogLimit, "OnceTest.ForkChainsKeepCountingGenerations");
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(30);
    // Generations: this child, then 4 more levels below it.
    for (int level = 0; level < 4; ++level) {
      static Once once;  // fresh per level: reset below
      once.word()->store(Once::kNotRun);
      std::atomic<bool> started{false}, finish{false};
      pthread_t t;
      struct Arg {
        std::atomic<bool>* started;
        std::atomic<bool>* finish;
      } arg{&started, &finish};
      if (pthread_create(
              &t, nullptr,
              [](void* p) -> void* {
                auto* a = static_cast<Arg*>(p);
                once.Call([a] {
                  a->started->store(true);
                  while (!a->finish->load()) usleep(1000);
                });
                return nullptr;
              },
              &arg) != 0) {
        _exit(20);
      }
      while (!started.load()) usleep(1000);
      const uint32_t gen = Once::CurrentGeneration();
      const pid_t child = fork();
      if (child < 0) _exit(21);
      if (child > 0) {
        // This level waits for the rest of the chain, then finishes its
        // own init and exits with the chain's verdict.
        int st = 0;
        if (waitpid(child, &st, 0) != child) _exit(22);
        finish.store(true);
        pthread_join(t, nullptr);
        if (!once.done()) _exit(23);
        _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 24);
      }
      // The next level: the thread running `once` is gone.
      if (Once::CurrentGeneration() == gen) _exit(25);
      int runs = 0;
      once.Call([&] { ++runs; });
      if (runs != 1) _exit(26);
    }
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "status " << status;
}

// The initializer may still be waking waiters when one of them returns and
// destroys, poisons and frees the Once (docs/design.md section 6, invariant 2).
TEST(OnceTest, DestroyRightAfterCallReturns) {
  Watchdog wd(kWatchdogLimit, "OnceTest.DestroyRightAfterCallReturns");
  const int iterations = static_cast<int>(Scaled(10000, 300));
  for (int i = 0; i < iterations; ++i) {
    Once* once = MallocNew<Once>();
    std::atomic<bool> started{false};
    std::thread initializer([once, &started] {
      once->Call([&started] {
        started.store(true);
        std::this_thread::yield();
      });
    });
    while (!started.load()) std::this_thread::yield();
    once->Call([] { ADD_FAILURE() << "second init"; });
    DestroyPoisonFree(once);
    initializer.join();
  }
}

}  // namespace
}  // namespace parklot::internal::testing

// Under --config=asan: fake stacks for this test. CancelledInit leaves its
// init by a cancellation's forced unwind, which ASan does not follow: the
// unwound frames' redzones would stay on the real stack and the guard's
// UnparkAll would be reported writing into them. With fake stacks the
// frames' locals are not on the real stack. (Not for every test: fake
// frames do not keep over-aligned locals aligned.)
extern "C" const char* __asan_default_options() {
  return "detect_stack_use_after_return=1";
}
