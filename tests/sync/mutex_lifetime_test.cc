// docs/design.md section 6, invariant 2: after the point in unlock where
// another thread may acquire, destroy and free the lock, the unlocking thread
// never touches the lock's memory.
//
// A refcounted object holds a Mutex; every owner locks it, drops its
// reference and unlocks; the last one unlocks, destroys, poisons and frees
// it, while the former waiters may still be inside Unlock's slow path
// (waking the next waiter). Two ways of "freeing": malloc/free with 0xAB
// poisoning (a late access is a use-after-free under ASan), and a page that
// is poisoned and then made inaccessible with mprotect (a late access
// faults in every build).
// Built twice: as is, and with PARKLOT_POLICY=fixed:1.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <new>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "runtime/stats.h"
#include "sync/condvar.h"
#include "sync/mutex.h"
#include "tests/sync/sync_test_util.h"
#include "tests/util/watchdog.h"

namespace parklot::internal::testing {
namespace {

TEST(MutexLifetimeTest, TableIsAsBuilt) {
  Mutex mu;
  mu.Lock();
  mu.Unlock();
  EXPECT_TRUE(TableIsAsBuilt()) << DescribeConfig(GetConfig());
}

template <typename M>
struct RefCounted {
  M mu;
  int refs = 0;       // guarded by mu
  uint64_t data = 0;  // guarded by mu
};

// Where objects live and how they die.
class Arena {
 public:
  // kHeap: malloc + poison + free. kPages: one page each, poisoned then
  // mprotect(PROT_NONE); pages are reused round-robin long after.
  enum Kind { kHeap, kPages };
  explicit Arena(Kind kind) : kind_(kind) {
    if (kind_ == kPages) {
      page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
      base_ = static_cast<char*>(mmap(nullptr, page_ * kPages_, PROT_NONE,
                                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
      if (base_ == MAP_FAILED) std::abort();
    }
  }
  ~Arena() {
    if (kind_ == kPages) munmap(base_, page_ * kPages_);
  }

  template <typename T>
  T* New() {
    if (kind_ == kHeap) return MallocNew<T>();
    static_assert(sizeof(T) <= 4096, "one page");
    char* p = base_ + page_ * (next_++ % kPages_);
    if (mprotect(p, page_, PROT_READ | PROT_WRITE) != 0) std::abort();
    return new (p) T();
  }

  // Called by whichever thread drops the last reference.
  template <typename T>
  void Delete(T* obj) {
    if (kind_ == kHeap) {
      DestroyPoisonFree(obj);
      return;
    }
    obj->~T();
    std::memset(static_cast<void*>(obj), 0xAB, sizeof(T));
    if (mprotect(obj, page_, PROT_NONE) != 0) std::abort();
  }

 private:
  static constexpr size_t kPages_ = 1024;
  Kind kind_;
  size_t page_ = 0;
  char* base_ = nullptr;
  size_t next_ = 0;
};

// Rounds: the main thread publishes a fresh object per round; kOwners
// threads each lock it, drop a reference and unlock; the last destroys it.
template <typename M, typename LockFn, typename UnlockFn>
void RunRefcountRounds(Arena::Kind kind, int owners, int rounds, LockFn lock,
                       UnlockFn unlock) {
  Arena arena(kind);
  std::atomic<RefCounted<M>*> current{nullptr};
  std::atomic<int> published{-1};
  std::atomic<int> finished{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < owners; ++t) {
    threads.emplace_back([&, t] {
      Rng rng(t * 31 + 5);
      for (int round = 0;; ++round) {
        while (published.load() < round) {
          if (stop.load()) return;
          std::this_thread::yield();
        }
        RefCounted<M>* obj = current.load();
        lock(obj->mu, rng);
        ++obj->data;
        // Sometimes hold it across a reschedule so the others park.
        if (rng.Below(4) == 0) std::this_thread::yield();
        Delay(rng.Below(64));
        const bool last = --obj->refs == 0;
        unlock(obj->mu, rng);
        // From here on only the last owner may touch *obj.
        if (last) arena.Delete(obj);
        finished.fetch_add(1);
      }
    });
  }
  for (int round = 0; round < rounds; ++round) {
    RefCounted<M>* obj = arena.template New<RefCounted<M>>();
    obj->refs = owners;
    current.store(obj);
    published.store(round);
    ASSERT_TRUE(Eventually(
        [&] { return finished.load() == (round + 1) * owners; },
        absl::Seconds(60)))
        << "round " << round;
  }
  stop = true;
  for (auto& th : threads) th.join();
}

void LockMutexAnyWay(Mutex& mu, Rng& rng) {
  switch (rng.Below(4)) {
    case 0:
      while (!mu.TryLock()) std::this_thread::yield();
      return;
    case 1:
      while (!mu.LockFor(absl::Microseconds(rng.Below(100)))) {
      }
      return;
    default:
      mu.Lock();
  }
}

void UnlockMutexAnyWay(Mutex& mu, Rng& rng) {
  if (rng.Below(3) == 0) {
    mu.UnlockFair();
  } else {
    mu.Unlock();
  }
}

class MutexLifetime : public ::testing::TestWithParam<Arena::Kind> {};

TEST_P(MutexLifetime, LastOwnerFreesWhileOthersLeaveUnlock) {
  Watchdog dog(absl::Seconds(240), "mutex lifetime");
  const Stats before = GetStats();
  RunRefcountRounds<Mutex>(GetParam(), 4, static_cast<int>(Scaled(10000, 300)),
                           LockMutexAnyWay, UnlockMutexAnyWay);
  const Stats after = GetStats();
  std::printf("parks %llu, unparks %llu, handoffs %llu\n",
              static_cast<unsigned long long>(after.parks - before.parks),
              static_cast<unsigned long long>(after.unparks - before.unparks),
              static_cast<unsigned long long>(after.handoffs -
                                              before.handoffs));
}

TEST_P(MutexLifetime, ManyOwners) {
  Watchdog dog(absl::Seconds(240), "mutex lifetime, many owners");
  RunRefcountRounds<Mutex>(GetParam(), 12, static_cast<int>(Scaled(2000, 100)),
                           LockMutexAnyWay, UnlockMutexAnyWay);
}

TEST_P(MutexLifetime, RecursiveMutex) {
  Watchdog dog(absl::Seconds(240), "recursive mutex lifetime");
  RunRefcountRounds<RecursiveMutex>(
      GetParam(), 4, static_cast<int>(Scaled(4000, 200)),
      [](RecursiveMutex& mu, Rng& rng) {
        mu.Lock();
        if (rng.Below(2)) mu.Lock();
      },
      [](RecursiveMutex& mu, Rng&) {
        // Read the depth while holding it: after the last unlock the
        // object may be gone.
        const uint32_t depth = mu.depth();
        ASSERT_GE(depth, 1u);
        for (uint32_t i = 0; i < depth; ++i) ASSERT_EQ(mu.Unlock(), 0);
      });
}

TEST_P(MutexLifetime, ErrorCheckingMutex) {
  Watchdog dog(absl::Seconds(240), "errorcheck mutex lifetime");
  RunRefcountRounds<ErrorCheckingMutex>(
      GetParam(), 4, static_cast<int>(Scaled(4000, 200)),
      [](ErrorCheckingMutex& mu, Rng&) { ASSERT_EQ(mu.Lock(), 0); },
      [](ErrorCheckingMutex& mu, Rng&) { ASSERT_EQ(mu.Unlock(), 0); });
}

INSTANTIATE_TEST_SUITE_P(Arenas, MutexLifetime,
                         ::testing::Values(Arena::kHeap, Arena::kPages),
                         [](const ::testing::TestParamInfo<Arena::Kind>& p) {
                           return p.param == Arena::kHeap ? "Heap" : "Pages";
                         });

// The same with a condvar in the object: the last waiter to return frees
// mutex and condvar while the notifier and the other waiters may still be
// inside NotifyAll/NotifyOne or Unlock.
struct WithCondVar {
  Mutex mu;
  CondVar cv;
  int refs = 0;     // guarded by mu
  int arrived = 0;  // guarded by mu
};

TEST_P(MutexLifetime, CondVarBroadcastToTheLastWaiter) {
  Watchdog dog(absl::Seconds(240), "condvar lifetime");
  constexpr int kOwners = 4;
  Arena arena(GetParam());
  const int rounds = static_cast<int>(Scaled(6000, 200));
  std::atomic<WithCondVar*> current{nullptr};
  std::atomic<int> published{-1};
  std::atomic<int> finished{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kOwners; ++t) {
    threads.emplace_back([&, t] {
      Rng rng(t + 77);
      for (int round = 0;; ++round) {
        while (published.load() < round) {
          if (stop.load()) return;
          std::this_thread::yield();
        }
        WithCondVar* obj = current.load();
        obj->mu.Lock();
        if (++obj->arrived == kOwners) {
          // The last to arrive releases everybody.
          if (rng.Below(2)) {
            obj->cv.NotifyAll();
          } else {
            for (int i = 1; i < kOwners; ++i) obj->cv.NotifyOne();
          }
        } else {
          while (obj->arrived < kOwners) obj->cv.Wait(obj->mu);
        }
        const bool last = --obj->refs == 0;
        if (rng.Below(3) == 0) {
          obj->mu.UnlockFair();
        } else {
          obj->mu.Unlock();
        }
        if (last) arena.Delete(obj);
        finished.fetch_add(1);
      }
    });
  }
  for (int round = 0; round < rounds; ++round) {
    WithCondVar* obj = arena.New<WithCondVar>();
    obj->refs = kOwners;
    current.store(obj);
    published.store(round);
    ASSERT_TRUE(Eventually(
        [&] { return finished.load() == (round + 1) * kOwners; },
        absl::Seconds(60)))
        << "round " << round;
  }
  stop = true;
  for (auto& th : threads) th.join();
}

// Notifying without the mutex: the waiters are all parked on the condvar
// (so only a notify can release them), the notifier sets the predicate,
// unlocks, then notifies. POSIX lets a woken waiter destroy the condvar at
// once ("no threads currently blocked"), while the notifier may still be
// inside NotifyOne/NotifyAll: from the release of the last waiter on,
// neither may touch the condvar or the mutex.
struct NotifyOutside {
  Mutex mu;
  CondVar cv;
  int waiting = 0;   // guarded by mu
  int refs = 0;      // guarded by mu
  bool done = false; // guarded by mu
};

TEST_P(MutexLifetime, CondVarNotifiedOutsideTheMutex) {
  Watchdog dog(absl::Seconds(240), "condvar notified outside the mutex");
  constexpr int kWaiters = 3;
  Arena arena(GetParam());
  const int rounds = static_cast<int>(Scaled(6000, 200));
  std::atomic<NotifyOutside*> current{nullptr};
  std::atomic<int> published{-1};
  std::atomic<int> finished{0};
  std::atomic<bool> stop{false};
  auto next = [&](int round) -> NotifyOutside* {
    while (published.load() < round) {
      if (stop.load()) return nullptr;
      std::this_thread::yield();
    }
    return current.load();
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kWaiters; ++t) {
    threads.emplace_back([&] {
      for (int round = 0;; ++round) {
        NotifyOutside* obj = next(round);
        if (obj == nullptr) return;
        obj->mu.Lock();
        ++obj->waiting;
        while (!obj->done) obj->cv.Wait(obj->mu);
        const bool last = --obj->refs == 0;
        obj->mu.Unlock();
        if (last) arena.Delete(obj);
        finished.fetch_add(1);
      }
    });
  }
  threads.emplace_back([&] {
    for (int round = 0;; ++round) {
      NotifyOutside* obj = next(round);
      if (obj == nullptr) return;
      // Every waiter parked on the condvar: it queued before releasing mu.
      for (;;) {
        obj->mu.Lock();
        if (obj->waiting == kWaiters) break;
        obj->mu.Unlock();
        std::this_thread::yield();
      }
      obj->done = true;
      obj->mu.Unlock();
      // No waiter can leave before these notifies release it; the last
      // one released may free *obj while we are still inside the call.
      if (round % 2 == 0) {
        obj->cv.NotifyAll();
      } else {
        for (int i = 0; i < kWaiters; ++i) obj->cv.NotifyOne();
      }
      finished.fetch_add(1);
    }
  });
  for (int round = 0; round < rounds; ++round) {
    NotifyOutside* obj = arena.New<NotifyOutside>();
    obj->refs = kWaiters;
    current.store(obj);
    published.store(round);
    ASSERT_TRUE(Eventually(
        [&] { return finished.load() == (round + 1) * (kWaiters + 1); },
        absl::Seconds(60)))
        << "round " << round;
  }
  stop = true;
  for (auto& th : threads) th.join();
}

}  // namespace
}  // namespace parklot::internal::testing
