// SetConfig before first use decides the process's configuration (over the
// environment), is refused once the configuration is fixed, and the table
// is built from it. Its own binary: this must be the process's first use.
#include <stdlib.h>

#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "runtime/config.h"
#include "runtime/global_table.h"
#include "runtime/parking_lot.h"
#include "runtime/thread_data.h"
#include "tests/core/parked_thread.h"
#include "tests/util/watchdog.h"

namespace parklot::internal {
namespace {

TEST(SetConfig, DecidesBeforeFirstUseOnly) {
  testing::Watchdog wd(coretest::WatchdogLimit(absl::Seconds(60)),
                       "SetConfig");
  // The API wins over the environment.
  setenv("PARKLOT_POLICY", "cpus", 1);
  Config c;
  c.table.policy = GrowthPolicy::kFixed;
  c.table.buckets = 32;
  c.spin = SpinMode::kOff;
  c.fair_mean_ns = 0;
  ASSERT_TRUE(SetConfig(c));
  const Config& got = GetConfig();
  EXPECT_EQ(got.table.policy, GrowthPolicy::kFixed);
  EXPECT_EQ(got.table.buckets, 32u);
  EXPECT_EQ(got.spin, SpinMode::kOff);
  EXPECT_EQ(got.fair_mean_ns, 0);
  // Fixed now: a second SetConfig changes nothing.
  Config other;
  other.table.buckets = 1024;
  EXPECT_FALSE(SetConfig(other));
  EXPECT_EQ(GetConfig().table.buckets, 32u);
  EXPECT_EQ(&GetConfig(), &got);
  // The table follows it.
  EXPECT_EQ(GlobalTable().bucket_count(), 32u);
  EXPECT_TRUE(GlobalTable().immutable());
  EXPECT_EQ(GlobalTable().options().policy, GrowthPolicy::kFixed);
  unsetenv("PARKLOT_POLICY");

  // fair_ns=0 means "always fair": every unpark that wakes a thread must
  // ask for a direct handoff, the first one from a bucket included.
  int key;
  for (int i = 0; i < 3; ++i) {
    coretest::ParkedThread t(KeyOf(&key));
    ASSERT_TRUE(t.AwaitEnqueued());
    const UnparkResult r = UnparkOne(
        KeyOf(&key), [](UnparkResult) { return kDefaultUnparkToken; });
    EXPECT_EQ(r.unparked_threads, 1u);
    EXPECT_TRUE(r.be_fair) << "unpark " << i;
    t.Join();
  }
}

}  // namespace
}  // namespace parklot::internal
