// An exception thrown by a once routine passes through the shim's
// pthread_once (std::call_once is pthread_once underneath): the caller
// catches it, the once is not done, and the next call runs its routine;
// concurrent callers wait for the routine and run it again after a throw,
// as under glibc. The unwind runs the shim's landing pads, whose
// personality routine reaches libgcc_s's unwinder through forwarders
// resolved at that moment (preload/own_unwinder.c).
#include <atomic>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tests/preload/shim_test_util.h"

namespace {

std::once_flag g_flag;
std::atomic<int> g_runs{0};

void InitThrowingTwice() {
  if (g_runs.fetch_add(1) < 2) throw std::runtime_error("init failed");
}

int CallCatching() {
  try {
    std::call_once(g_flag, InitThrowingTwice);
    return 0;
  } catch (const std::runtime_error&) {
    return 1;
  }
}

}  // namespace

int main() {
  shim_test_start("once_throw", 60);
  // One thread: two throws, then the routine completes.
  CHECK(CallCatching() == 1);
  CHECK(CallCatching() == 1);
  CHECK(CallCatching() == 0);
  CHECK(g_runs.load() == 3);
  CHECK(CallCatching() == 0);
  CHECK(g_runs.load() == 3);

  // Many threads on a fresh flag whose routine throws for the first two
  // runners: each thread either caught a throw or saw the routine done,
  // and the routine completed exactly once.
  static std::once_flag flag;
  std::atomic<int> runs{0}, thrown{0}, done{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      try {
        std::call_once(flag, [&] {
          if (runs.fetch_add(1) < 2) throw std::runtime_error("again");
        });
        done.fetch_add(1);
      } catch (const std::runtime_error&) {
        thrown.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(runs.load() == 3);
  CHECK(thrown.load() == 2);
  CHECK(done.load() == 6);
  return shim_test_finish();
}
