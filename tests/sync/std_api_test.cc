// C++ API conformance of parklot's primitives: each meets the
// named requirements its header claims, checked at compile time, works with
// the standard library's lock types and std::condition_variable_any, and
// its std::chrono spellings wait as the std type it stands in for does
// (std::timed_mutex, std::counting_semaphore, std::condition_variable),
// with system_clock, steady_clock, a clock of the program's own, and time
// points far away. Through <parklot/...>, the installed include path.
#include <atomic>
#include <chrono>
#include <concepts>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <type_traits>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "parklot/condvar.h"
#include "parklot/latch.h"
#include "parklot/mutex.h"
#include "parklot/semaphore.h"
#include "parklot/shared_mutex.h"
#include "tests/util/watchdog.h"

namespace parklot {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using std::chrono::system_clock;

// --- The named requirements ([thread.req.lockable], [thread.sharedmutex.
// requirements]) as concepts, each with the clocks the standard allows. ---

template <class L>
concept BasicLockable = requires(L& m) {
  m.lock();
  m.unlock();
};
template <class L>
concept Lockable = BasicLockable<L> && requires(L& m) {
  { m.try_lock() } -> std::convertible_to<bool>;
};
template <class L>
concept TimedLockable = Lockable<L> && requires(L& m, milliseconds d,
                                                steady_clock::time_point st,
                                                system_clock::time_point sy) {
  { m.try_lock_for(d) } -> std::convertible_to<bool>;
  { m.try_lock_until(st) } -> std::convertible_to<bool>;
  { m.try_lock_until(sy) } -> std::convertible_to<bool>;
};
template <class L>
concept SharedLockable = requires(L& m) {
  m.lock_shared();
  { m.try_lock_shared() } -> std::convertible_to<bool>;
  m.unlock_shared();
};
template <class L>
concept SharedTimedLockable =
    SharedLockable<L> && requires(L& m, milliseconds d,
                                  steady_clock::time_point st,
                                  system_clock::time_point sy) {
      { m.try_lock_shared_for(d) } -> std::convertible_to<bool>;
      { m.try_lock_shared_until(st) } -> std::convertible_to<bool>;
      { m.try_lock_shared_until(sy) } -> std::convertible_to<bool>;
    };
// [thread.mutex.requirements.general]: neither copyable nor movable.
template <class M>
concept MutexObject = std::is_default_constructible_v<M> &&
                      !std::is_copy_constructible_v<M> &&
                      !std::is_move_constructible_v<M> &&
                      !std::is_copy_assignable_v<M> &&
                      !std::is_move_assignable_v<M>;

static_assert(TimedLockable<Mutex> && MutexObject<Mutex>);
static_assert(TimedLockable<RecursiveMutex> && MutexObject<RecursiveMutex>);
static_assert(TimedLockable<ErrorCheckingMutex> &&
              MutexObject<ErrorCheckingMutex>);
static_assert(TimedLockable<SharedMutex> && SharedTimedLockable<SharedMutex> &&
              MutexObject<SharedMutex>);
static_assert(!SharedLockable<Mutex>);

// std::counting_semaphore's interface.
template <class S>
concept CountingSemaphore =
    requires(S& s, milliseconds d, steady_clock::time_point st,
             system_clock::time_point sy) {
      s.release();
      s.release(2);
      s.acquire();
      { s.try_acquire() } -> std::same_as<bool>;
      { s.try_acquire_for(d) } -> std::same_as<bool>;
      { s.try_acquire_until(st) } -> std::same_as<bool>;
      { s.try_acquire_until(sy) } -> std::same_as<bool>;
      { S::max() } -> std::convertible_to<std::ptrdiff_t>;
    };
static_assert(CountingSemaphore<Semaphore>);
static_assert(Semaphore::max() == Semaphore::kMaxValue);

// std::latch's interface.
template <class L>
concept LatchLike = requires(L& l, const L& cl) {
  l.count_down();
  l.count_down(1);
  { cl.try_wait() } -> std::same_as<bool>;
  cl.wait();
  l.arrive_and_wait();
  { L::max() } -> std::convertible_to<std::ptrdiff_t>;
};
static_assert(LatchLike<Latch>);

// std::condition_variable's interface, for std::unique_lock<Mutex>.
template <class CV, class M>
concept ConditionVariableFor =
    requires(CV& cv, std::unique_lock<M>& l, milliseconds d,
             steady_clock::time_point st, system_clock::time_point sy,
             bool (*pred)()) {
      cv.notify_one();
      cv.notify_all();
      cv.wait(l);
      cv.wait(l, pred);
      { cv.wait_for(l, d) } -> std::same_as<std::cv_status>;
      { cv.wait_for(l, d, pred) } -> std::same_as<bool>;
      { cv.wait_until(l, st) } -> std::same_as<std::cv_status>;
      { cv.wait_until(l, sy) } -> std::same_as<std::cv_status>;
      { cv.wait_until(l, st, pred) } -> std::same_as<bool>;
    };
static_assert(ConditionVariableFor<CondVar, Mutex>);
// The reference the concept is checked against.
static_assert(ConditionVariableFor<std::condition_variable, std::mutex>);

// --- The standard library's lock types, at run time. ---

TEST(StdApiTest, LockTypes) {
  testing::Watchdog dog(absl::Seconds(60), "StdApiTest.LockTypes");
  Mutex m;
  RecursiveMutex r;
  ErrorCheckingMutex e;
  SharedMutex s;
  {
    std::scoped_lock all(m, r, e, s);
    EXPECT_TRUE(m.HeldByCurrentThread());
    EXPECT_EQ(r.depth(), 1u);
    EXPECT_TRUE(e.HeldByCurrentThread());
    EXPECT_TRUE(s.HeldExclusivelyByCurrentThread());
    std::unique_lock again(r);  // recursive
    EXPECT_EQ(r.depth(), 2u);
  }
  EXPECT_FALSE(m.HeldByCurrentThread());
  EXPECT_EQ(r.depth(), 0u);
  {
    std::unique_lock<Mutex> l(m, std::defer_lock);
    EXPECT_TRUE(l.try_lock_for(milliseconds(10)));
    l.unlock();
    EXPECT_TRUE(l.try_lock_until(system_clock::now() + milliseconds(10)));
  }
  {
    std::unique_lock<ErrorCheckingMutex> l(e);
    // std::unique_lock re-locking its own mutex throws, before the mutex
    // is asked; the mutex itself reports EDEADLK as std::system_error.
    EXPECT_THROW(e.lock(), std::system_error);
  }
  {
    std::shared_lock<SharedMutex> r1(s);
    std::shared_lock<SharedMutex> r2(s, milliseconds(10));
    EXPECT_TRUE(r2.owns_lock());
    EXPECT_EQ(s.ReaderCount(), 2u);
    std::unique_lock<SharedMutex> w(s, std::defer_lock);
    EXPECT_FALSE(w.try_lock_until(steady_clock::now() + milliseconds(2)));
  }
  std::lock(m, s);
  std::lock_guard<Mutex> gm(m, std::adopt_lock);
  std::lock_guard<SharedMutex> gs(s, std::adopt_lock);
}

// std::condition_variable_any over parklot locks: a waiter on a Mutex
// through std::unique_lock, and one on a SharedMutex through
// std::shared_lock, both notified by another thread.
TEST(StdApiTest, ConditionVariableAny) {
  testing::Watchdog dog(absl::Seconds(60), "StdApiTest.ConditionVariableAny");
  Mutex m;
  SharedMutex s;
  std::condition_variable_any cv;
  bool ready = false;
  std::atomic<int> woken{0};
  std::thread a([&] {
    std::unique_lock<Mutex> l(m);
    cv.wait(l, [&] { return ready; });
    EXPECT_TRUE(m.HeldByCurrentThread());
    woken++;
  });
  std::thread b([&] {
    std::shared_lock<SharedMutex> l(s);
    while (!std::atomic_ref<bool>(ready).load()) {
      cv.wait_for(l, milliseconds(50));
    }
    woken++;
  });
  {
    std::scoped_lock l(m, s);
    std::atomic_ref<bool>(ready).store(true);
  }
  cv.notify_all();
  a.join();
  b.join();
  EXPECT_EQ(woken.load(), 2);
  {
    std::unique_lock<Mutex> l(m);
    EXPECT_EQ(cv.wait_until(l, system_clock::now() + milliseconds(5)),
              std::cv_status::timeout);
    EXPECT_TRUE(l.owns_lock());
  }
}

// --- Time points: every clock as std::timed_mutex takes it. ---

// A clock of the program's own that runs at half the speed of steady_clock:
// a wait that measured its deadline on steady_clock would end when this
// clock has covered only half of it. [thread.req.timing] and libstdc++'s
// std::timed_mutex wait until the clock itself reads the deadline.
struct HalfSpeedClock {
  using rep = int64_t;
  using period = std::nano;
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<HalfSpeedClock>;
  static constexpr bool is_steady = true;
  static time_point now() {
    return time_point(duration(steady_clock::now().time_since_epoch().count() / 2));
  }
};

// Runs `attempt(t)` with the lock held by another thread, for time points
// 20 ms ahead on `Clock`; it must fail, and only once Clock reads t.
template <class Clock, class L, class F>
void ExpectTimesOutOnClock(L& lock, F attempt) {
  std::atomic<bool> held{false}, done{false};
  std::thread owner([&] {
    std::unique_lock<L> l(lock);
    held = true;
    while (!done) std::this_thread::sleep_for(milliseconds(1));
  });
  while (!held) std::this_thread::sleep_for(milliseconds(1));
  const auto t = Clock::now() + milliseconds(20);
  EXPECT_FALSE(attempt(t));
  EXPECT_GE(Clock::now(), t);
  done = true;
  owner.join();
}

template <class L>
void ExpectTimedLockLikeStd(L& mu, bool far_points = true) {
  auto until = [&mu](const auto& t) { return mu.try_lock_until(t); };
  ExpectTimesOutOnClock<system_clock>(mu, until);
  ExpectTimesOutOnClock<steady_clock>(mu, until);
  ExpectTimesOutOnClock<HalfSpeedClock>(mu, until);
  // Past time points on a free lock: a try_lock.
  EXPECT_TRUE(mu.try_lock_until(system_clock::now() - milliseconds(5)));
  mu.unlock();
  EXPECT_TRUE(mu.try_lock_until(HalfSpeedClock::now() - milliseconds(5)));
  mu.unlock();
  // The farthest time points and durations, in coarse units, mean "no
  // deadline", not an overflow into the past: released after 20 ms, the
  // lock is taken. (The standard has them as plain far-away times;
  // libstdc++ 12's std::timed_mutex overflows converting them to
  // nanoseconds and gives up at once, so it is not held to this.)
  if (!far_points) return;
  using Hours = std::chrono::hours;
  for (int i = 0; i < 3; ++i) {
    std::atomic<bool> held{false};
    std::thread owner([&] {
      std::unique_lock<L> l(mu);
      held = true;
      std::this_thread::sleep_for(milliseconds(20));
    });
    while (!held) std::this_thread::sleep_for(milliseconds(1));
    bool got = false;
    switch (i) {
      case 0:
        got = mu.try_lock_until(std::chrono::time_point<steady_clock, Hours>::max());
        break;
      case 1:
        got = mu.try_lock_until(std::chrono::time_point<system_clock, Hours>::max());
        break;
      case 2:
        got = mu.try_lock_for(Hours::max());
        break;
    }
    EXPECT_TRUE(got) << "case " << i;
    if (got) mu.unlock();
    owner.join();
  }
}

TEST(StdApiTest, TimedLockOnEveryClockLikeStdTimedMutex) {
  testing::Watchdog dog(absl::Seconds(60), "StdApiTest.TimedLock");
#ifndef __SANITIZE_THREAD__
  // The expectations hold for std's own. Not under TSan: GCC 12's TSan does
  // not intercept pthread_mutex_clocklock, which std::timed_mutex locks
  // through, and reports its unlock as of an unlocked mutex.
  std::timed_mutex reference;
  ExpectTimedLockLikeStd(reference, /*far_points=*/false);
#endif
  Mutex m;
  ExpectTimedLockLikeStd(m);
  RecursiveMutex r;
  ExpectTimedLockLikeStd(r);
  ErrorCheckingMutex e;
  ExpectTimedLockLikeStd(e);
  SharedMutex s;
  ExpectTimedLockLikeStd(s);
}

TEST(StdApiTest, SharedTimedLockOnEveryClock) {
  testing::Watchdog dog(absl::Seconds(60), "StdApiTest.SharedTimedLock");
  SharedMutex s;
  auto until = [&s](const auto& t) {
    const bool got = s.try_lock_shared_until(t);
    if (got) s.unlock_shared();
    return got;
  };
  ExpectTimesOutOnClock<system_clock>(s, until);
  ExpectTimesOutOnClock<steady_clock>(s, until);
  ExpectTimesOutOnClock<HalfSpeedClock>(s, until);
}

TEST(StdApiTest, SemaphoreOnEveryClock) {
  testing::Watchdog dog(absl::Seconds(60), "StdApiTest.Semaphore");
  Semaphore sem(0);
  const auto check = [&sem](auto clock_now) {
    const auto t = clock_now() + milliseconds(20);
    EXPECT_FALSE(sem.try_acquire_until(t));
    EXPECT_GE(clock_now(), t);
  };
  check([] { return system_clock::now(); });
  check([] { return steady_clock::now(); });
  check([] { return HalfSpeedClock::now(); });
  sem.release();
  EXPECT_TRUE(sem.try_acquire_until(HalfSpeedClock::now() - milliseconds(1)));
  std::thread poster([&] {
    std::this_thread::sleep_for(milliseconds(20));
    sem.release();
  });
  EXPECT_TRUE(sem.try_acquire_until(
      std::chrono::time_point<system_clock, std::chrono::hours>::max()));
  poster.join();
}

TEST(StdApiTest, CondVarOnEveryClock) {
  testing::Watchdog dog(absl::Seconds(60), "StdApiTest.CondVar");
  Mutex m;
  CondVar cv;
  std::unique_lock<Mutex> l(m);
  const auto check = [&](auto clock_now) {
    const auto t = clock_now() + milliseconds(20);
    // Nobody notifies: a timeout, reported only once the clock reads t
    // (a spurious wake-up may return no_timeout earlier, as std allows).
    while (cv.wait_until(l, t) == std::cv_status::no_timeout) {
    }
    EXPECT_GE(clock_now(), t);
    EXPECT_TRUE(l.owns_lock());
    EXPECT_FALSE(cv.wait_until(l, clock_now() + milliseconds(5), [] { return false; }));
    EXPECT_TRUE(m.HeldByCurrentThread());
  };
  check([] { return system_clock::now(); });
  check([] { return steady_clock::now(); });
  check([] { return HalfSpeedClock::now(); });
  EXPECT_FALSE(cv.wait_for(l, milliseconds(5), [] { return false; }));

  bool ready = false;
  std::thread notifier([&] {
    std::this_thread::sleep_for(milliseconds(20));
    std::scoped_lock g(m);
    ready = true;
    cv.notify_one();
  });
  EXPECT_TRUE(cv.wait_until(
      l, std::chrono::time_point<steady_clock, std::chrono::hours>::max(),
      [&] { return ready; }));
  l.unlock();
  notifier.join();

  // The longest duration is no deadline either.
  l.lock();
  ready = false;
  std::thread notifier2([&] {
    std::this_thread::sleep_for(milliseconds(20));
    std::scoped_lock g(m);
    ready = true;
    cv.notify_one();
  });
  EXPECT_TRUE(cv.wait_for(l, std::chrono::hours::max(), [&] { return ready; }));
  l.unlock();
  notifier2.join();
}

}  // namespace
}  // namespace parklot
