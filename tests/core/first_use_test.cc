// Many threads using the parking lot for the first time at the same moment,
// in a fresh process: one-time initialization, the registry's first slot
// allocations and its highest-slot bookkeeping must all hold up (TSan
// checks the races; the assertions check the bookkeeping).
//
// Its own binary: the first test must be the process's first use.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "runtime/parking_lot.h"
#include "runtime/registry.h"
#include "runtime/stats.h"
#include "runtime/thread_data.h"
#include "tests/core/test_support.h"
#include "tests/util/watchdog.h"

namespace parklot::internal {
namespace {

// Starts `n` threads that wait at a start line, then all register at once
// (an invalid Park registers without sleeping). Each checks right away that
// the highest index covers its own; all stay alive until every one has
// registered, so their indices are distinct and counted live together.
// Returns the slots.
std::vector<uint32_t> RegisterAtOnce(int n, std::atomic<int>* uncovered) {
  std::atomic<int> ready{0}, registered{0};
  std::atomic<bool> go{false};
  absl::Notification leave;
  std::vector<uint32_t> slots(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      int key;
      EXPECT_TRUE(Park(KeyOf(&key), [] { return false; }).invalid());
      slots[i] = CurrentThreadData()->index;
      if (registry::HighestIndex() < slots[i]) uncovered->fetch_add(1);
      registered.fetch_add(1);
      leave.WaitForNotification();
    });
  }
  while (ready.load() < n) std::this_thread::yield();
  go.store(true, std::memory_order_release);
  EXPECT_TRUE(coretest::WaitFor([&] { return registered.load() == n; }));
  EXPECT_EQ(registry::LiveThreads(), static_cast<size_t>(n));
  const uint32_t highest = registry::HighestIndex();
  for (uint32_t s : slots) {
    EXPECT_NE(s, kNoSlot);
    // The statistics snapshot walks indices up to HighestIndex(): a live one
    // above it would drop that thread's counters.
    EXPECT_LE(s, highest);
  }
  EXPECT_EQ(std::set<uint32_t>(slots.begin(), slots.end()).size(),
            static_cast<size_t>(n));
  // Every live thread's counters are in the snapshot: each made one
  // refused park.
  EXPECT_GE(GetStats().invalid, static_cast<uint64_t>(n));
  leave.Notify();
  for (auto& t : threads) t.join();
  return slots;
}

TEST(FirstUse, ManyThreadsRegisterAtOnce) {
  testing::Watchdog wd(coretest::WatchdogLimit(absl::Seconds(120)),
                       "ManyThreadsRegisterAtOnce");
  // Nothing has touched the lot yet.
  ASSERT_EQ(registry::ThreadsRegistered(), 0u);
  std::atomic<int> uncovered{0};
  RegisterAtOnce(64, &uncovered);
  EXPECT_EQ(registry::LiveThreads(), 0u);
  // Later rounds outgrow the recycled indices, so each again hands out many
  // fresh indices concurrently.
  for (int n = 128; n <= 384; n += 128) {
    const auto slots = RegisterAtOnce(n, &uncovered);
    EXPECT_EQ(*std::max_element(slots.begin(), slots.end()),
              static_cast<uint32_t>(n));
    EXPECT_EQ(registry::HighestIndex(), static_cast<uint32_t>(n));
  }
  EXPECT_EQ(uncovered.load(), 0);
  EXPECT_EQ(registry::ThreadsRegistered(), 64u + 128 + 256 + 384);
}

}  // namespace
}  // namespace parklot::internal
