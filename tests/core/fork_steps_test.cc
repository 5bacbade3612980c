// runtime/fork.h: the one atfork owner runs the registered steps' prepare
// parts in ForkStep order and their parent/child parts in reverse, skips
// the parent/child parts of a step whose prepare took nothing, and leaves
// both processes a working lot (the kLot step, registered by the runtime).
#include "runtime/fork.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "gtest/gtest.h"
#include "runtime/parking_lot.h"
#include "runtime/thread_data.h"
#include "tests/util/watchdog.h"

namespace parklot::internal {
namespace {

// What the steps ran, in order, one letter each (fixed storage: the child
// part runs in a fork child).
char g_log[16];
int g_len = 0;
void Log(char c) {
  if (g_len < static_cast<int>(sizeof(g_log))) g_log[g_len++] = c;
}
std::string TakeLog() {
  std::string s(g_log, g_len);
  g_len = 0;
  return s;
}

bool g_first_takes = true;
bool PrepareFirst() {
  Log('A');
  return g_first_takes;
}
void ParentFirst() { Log('a'); }
void ChildFirst() { Log('x'); }
bool PrepareSecond() {
  Log('B');
  return true;
}
void ParentSecond() { Log('b'); }
void ChildSecond() { Log('y'); }

constexpr ForkHandlers kFirst{PrepareFirst, ParentFirst, ChildFirst};
constexpr ForkHandlers kSecond{PrepareSecond, ParentSecond, ChildSecond};

// Parks on `key` with a validate that refuses, then unparks it: both take
// the key's bucket lock, so they hang if fork left it held.
bool LotWorks() {
  static int word;
  const uintptr_t key = KeyOf(&word);
  if (!Park(key, [] { return false; }).invalid()) return false;
  return UnparkAll(key) == 0;
}

// Forks; in the child, checks the child log is `child_log` and the lot
// works, exiting 0 if so. Returns the parent's log and the child's status.
std::string ForkAndCheckChild(const std::string& child_log, int* status) {
  TakeLog();
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(30);
    const std::string got = TakeLog();
    // The prepare letters are in the child's copy too.
    if (got.size() < 2 || got.substr(2) != child_log) _exit(2);
    _exit(LotWorks() ? 0 : 3);
  }
  EXPECT_GT(pid, 0);
  EXPECT_EQ(waitpid(pid, status, 0), pid);
  return TakeLog();
}

TEST(ForkSteps, PrepareInOrderParentAndChildInReverse) {
  testing::Watchdog watchdog(absl::Seconds(60));
  ASSERT_TRUE(LotWorks());  // the lot exists: its kLot step takes its locks
  RegisterForkStep(ForkStep::kShimStandIns, &kFirst);
  RegisterForkStep(ForkStep::kOnceGeneration, &kSecond);
  g_first_takes = true;
  int status = -1;
  EXPECT_EQ(ForkAndCheckChild("yx", &status), "ABba");
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(LotWorks());
}

TEST(ForkSteps, AStepThatTookNothingIsNotUndone) {
  testing::Watchdog watchdog(absl::Seconds(60));
  RegisterForkStep(ForkStep::kShimStandIns, &kFirst);
  RegisterForkStep(ForkStep::kOnceGeneration, &kSecond);
  g_first_takes = false;
  int status = -1;
  EXPECT_EQ(ForkAndCheckChild("y", &status), "ABb");
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(LotWorks());
}

}  // namespace
}  // namespace parklot::internal
