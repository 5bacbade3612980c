// The adaptive, owner-aware spin policy: budgets from the moving average,
// the average itself, and when spinning is refused (parked owner,
// oversubscribed process).
#include "runtime/spin.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "runtime/config.h"
#include "runtime/parking_lot.h"
#include "runtime/thread_data.h"
#include "tests/core/parked_thread.h"
#include "tests/core/test_support.h"
#include "tests/util/watchdog.h"

namespace parklot {
namespace {

TEST(SpinBudget, FollowsTheMovingAverage) {
  ASSERT_EQ(GetConfig().spin, SpinMode::kAdaptive);
  // Budget = 2 x average rounds + 2, at most kMaxSpinRounds.
  EXPECT_EQ(SpinBudget(0), 2);
  EXPECT_EQ(SpinBudget(8), 4);       // average 1
  EXPECT_EQ(SpinBudget(3 * 8), 8);   // average 3
  EXPECT_EQ(SpinBudget(5 * 8), kMaxSpinRounds);
  EXPECT_EQ(SpinBudget(kMaxSpinRounds * 8), kMaxSpinRounds);
  // Holds longer than any spin: one probing round only.
  EXPECT_EQ(SpinBudget((kMaxSpinRounds + 1) * 8), 1);
  EXPECT_EQ(SpinBudget(kMaxSpinRounds * 8 * 8), 1);
}

TEST(UpdateSpinEma, MovesTowardTheSamplesWithWeightOneEighth) {
  std::atomic<int32_t> ema{0};
  UpdateSpinEma(&ema, 8);
  EXPECT_EQ(ema.load(), 8);  // 0 + (64 - 0) / 8
  int32_t prev = ema.load();
  for (int i = 0; i < 100; ++i) {
    UpdateSpinEma(&ema, 8);
    EXPECT_GE(ema.load(), prev);
    prev = ema.load();
  }
  // Converged on 8 rounds (x8 fixed point) exactly, not short of it.
  EXPECT_EQ(ema.load(), 64);
  for (int i = 0; i < 100; ++i) UpdateSpinEma(&ema, 0);
  // Short holds bring the average all the way back down.
  EXPECT_EQ(ema.load(), 0);
  EXPECT_EQ(SpinBudget(ema.load()), 2);
}

TEST(ShouldSpin, NotOnAParkedOwner) {
  testing::Watchdog wd(coretest::WatchdogLimit(absl::Seconds(60)),
                       "NotOnAParkedOwner");
  CurrentThreadData();
  // One running thread on at least one CPU: spinning may pay.
  ASSERT_LE(registry::LiveThreads(), registry::AllowedCpus());
  EXPECT_TRUE(ShouldSpin(kNoSlot));
  EXPECT_TRUE(ShouldSpin(CurrentSlot()));
  int key;
  coretest::ParkedThread owner(KeyOf(&key));
  ASSERT_TRUE(owner.AwaitEnqueued());
  const uint32_t slot = owner.data()->slot;
  ASSERT_TRUE(coretest::WaitFor(
      [&] { return registry::StateOf(slot) == ThreadState::kParked; }));
  EXPECT_FALSE(ShouldSpin(slot));
  // A parked owner gets no spin at all, not even the probe.
  EXPECT_EQ(SpinBudgetFor(slot, kMaxSpinRounds * 8), 0);
  // A running owner on an idle machine gets the full adaptive budget.
  EXPECT_EQ(SpinBudgetFor(CurrentSlot(), kMaxSpinRounds * 8),
            SpinBudget(kMaxSpinRounds * 8));
  UnparkAll(KeyOf(&key));
  owner.Join();
}

TEST(ShouldSpin, NotWhenRunnableThreadsOutnumberCpus) {
  testing::Watchdog wd(coretest::WatchdogLimit(absl::Seconds(60)),
                       "NotWhenOversubscribed");
  CurrentThreadData();
  const size_t cpus = registry::AllowedCpus();
  ASSERT_GE(cpus, 1u);
  // Registered threads that are not parked in the lot (they wait on an
  // absl::Notification) count as runnable.
  absl::Notification leave;
  std::atomic<size_t> registered{0};
  std::vector<std::thread> threads;
  for (size_t i = 0; i < cpus + 1; ++i) {
    threads.emplace_back([&] {
      CurrentThreadData();
      registered.fetch_add(1);
      leave.WaitForNotification();
    });
  }
  ASSERT_TRUE(coretest::WaitFor([&] { return registered.load() == cpus + 1; }));
  EXPECT_FALSE(ShouldSpin(kNoSlot));
  // Oversubscribed, with a running owner: only the short probe.
  EXPECT_EQ(SpinBudgetFor(kNoSlot, kMaxSpinRounds * 8),
            kOversubscribedProbeRounds);
  EXPECT_EQ(SpinBudgetFor(CurrentSlot(), 0), kOversubscribedProbeRounds);
  leave.Notify();
  for (auto& t : threads) t.join();
  EXPECT_TRUE(ShouldSpin(kNoSlot));
}

}  // namespace
}  // namespace parklot
