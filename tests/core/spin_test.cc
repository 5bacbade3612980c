// The adaptive, owner-aware spin policy: budgets from the moving average,
// the average itself, when spinning is refused (parked owner,
// oversubscribed process), and the spin-wait every lock runs.
#include "runtime/spin.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "runtime/config.h"
#include "runtime/parking_lot.h"
#include "runtime/registry.h"
#include "runtime/thread_data.h"
#include "tests/core/parked_thread.h"
#include "tests/core/test_support.h"
#include "tests/util/watchdog.h"

namespace parklot::internal {
namespace {

TEST(AdaptiveSpinBudget, FollowsTheMovingAverage) {
  ASSERT_EQ(GetConfig().spin, SpinMode::kAdaptive);
  // Budget = 2 x average rounds + 2, at most kMaxSpinRounds.
  EXPECT_EQ(AdaptiveSpinBudget(0), 2);
  EXPECT_EQ(AdaptiveSpinBudget(8), 4);       // average 1
  EXPECT_EQ(AdaptiveSpinBudget(3 * 8), 8);   // average 3
  EXPECT_EQ(AdaptiveSpinBudget(5 * 8), kMaxSpinRounds);
  EXPECT_EQ(AdaptiveSpinBudget(kMaxSpinRounds * 8), kMaxSpinRounds);
  // Holds longer than any spin: one probing round only.
  EXPECT_EQ(AdaptiveSpinBudget((kMaxSpinRounds + 1) * 8), 1);
  EXPECT_EQ(AdaptiveSpinBudget(kMaxSpinRounds * 8 * 8), 1);
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
  EXPECT_EQ(AdaptiveSpinBudget(ema.load()), 2);
}

TEST(SpinBudgetFor, NoneForAParkedOwner) {
  testing::Watchdog wd(coretest::WatchdogLimit(absl::Seconds(60)),
                       "NotOnAParkedOwner");
  CurrentThreadData();
  // One running thread on at least one CPU: spinning may pay.
  ASSERT_LE(registry::LiveThreads(), registry::AllowedCpus());
  EXPECT_EQ(SpinBudgetFor(kNoSlot, 0), AdaptiveSpinBudget(0));
  EXPECT_EQ(SpinBudgetFor(CurrentSlot(), 0), AdaptiveSpinBudget(0));
  int key;
  coretest::ParkedThread owner(KeyOf(&key));
  ASSERT_TRUE(owner.AwaitEnqueued());
  const uint32_t slot = owner.slot();
  ASSERT_TRUE(coretest::WaitFor(
      [&] { return registry::StateOf(slot) == ThreadState::kParked; }));
  // A parked owner gets no spin at all, not even the probe.
  EXPECT_EQ(SpinBudgetFor(slot, kMaxSpinRounds * 8), 0);
  // A running owner on an idle machine gets the full adaptive budget.
  EXPECT_EQ(SpinBudgetFor(CurrentSlot(), kMaxSpinRounds * 8),
            AdaptiveSpinBudget(kMaxSpinRounds * 8));
  // The spin-wait parks at once, and with no spin counts no failure.
  std::atomic<int32_t> ema{0};
  SpinWait spin(&ema);
  EXPECT_FALSE(spin.Spin(slot));
  EXPECT_EQ(ema.load(), 0);
  UnparkAll(KeyOf(&key));
  owner.Join();
}

TEST(SpinBudgetFor, OnlyTheProbeWhenRunnableThreadsOutnumberCpus) {
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
  // Oversubscribed, with a running owner: only the short probe.
  EXPECT_EQ(SpinBudgetFor(kNoSlot, kMaxSpinRounds * 8),
            kOversubscribedProbeRounds);
  EXPECT_EQ(SpinBudgetFor(CurrentSlot(), 0), kOversubscribedProbeRounds);
  leave.Notify();
  for (auto& t : threads) t.join();
  EXPECT_EQ(SpinBudgetFor(kNoSlot, 0), AdaptiveSpinBudget(0));
}

// Runs `spin` until it says to park; returns the rounds it spun.
int SpinUntilPark(SpinWait& spin, uint32_t owner) {
  int rounds = 0;
  while (spin.Spin(owner)) ++rounds;
  return rounds;
}

TEST(SpinWait, SpendsTheBudgetThenCountsAFailureOnce) {
  CurrentThreadData();
  ASSERT_LE(registry::LiveThreads(), registry::AllowedCpus());
  std::atomic<int32_t> ema{0};
  SpinWait spin(&ema);
  EXPECT_EQ(SpinUntilPark(spin, kNoSlot), AdaptiveSpinBudget(0));
  // The failure, folded in once: 0 + (13 * 8 - 0) / 8.
  EXPECT_EQ(ema.load(), kFailedSpinRounds);
  // Asked again (a lost race on the parked bit), it still says park and
  // does not count the failure twice.
  EXPECT_FALSE(spin.Spin(kNoSlot));
  EXPECT_EQ(ema.load(), kFailedSpinRounds);
  // Parked, then acquired: not the spin's success.
  spin.Parked();
  EXPECT_FALSE(spin.Spin(kNoSlot));
  spin.Acquired();
  EXPECT_EQ(ema.load(), kFailedSpinRounds);
}

TEST(SpinWait, AnAcquisitionWhileSpinningFeedsItsRounds) {
  CurrentThreadData();
  ASSERT_LE(registry::LiveThreads(), registry::AllowedCpus());
  const uint64_t won_before =
      CurrentThreadData()->counters.spin_acquired.load();
  std::atomic<int32_t> ema{3 * 8};  // budget 8
  SpinWait spin(&ema);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(spin.Spin(kNoSlot));
  spin.Acquired();
  EXPECT_EQ(ema.load(), 3 * 8 + (5 * 8 - 3 * 8) / 8);
  EXPECT_EQ(CurrentThreadData()->counters.spin_acquired.load(),
            won_before + 1);
  // Acquired without spinning (the first try won): no sample.
  std::atomic<int32_t> untouched{3 * 8};
  SpinWait quick(&untouched);
  quick.Acquired();
  EXPECT_EQ(untouched.load(), 3 * 8);
}

}  // namespace
}  // namespace parklot::internal
