// Scenario 1 of //bench:suite: uncontended lock+unlock, trylock+unlock and
// notify with no waiter, one thread (ns/op).
#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "bench/suite_harness.h"

namespace parklot {
namespace bench {
namespace {

enum class Op { kLockUnlock, kTryLock, kNotifyOne, kNotifyAll };

template <typename L>
Body LockBody(Op op) {
  return [op](int, const std::atomic<bool>& stop, WorkerOut* out) {
    auto lock = std::make_unique<L>();
    uint64_t n = 0;
    const int64_t t0 = NowNs();
    if (op == Op::kLockUnlock) {
      while (!stop.load(std::memory_order_relaxed)) {
        for (int i = 0; i < 256; ++i) {
          lock->lock();
          lock->unlock();
        }
        n += 256;
      }
    } else {
      while (!stop.load(std::memory_order_relaxed)) {
        for (int i = 0; i < 256; ++i) {
          if (lock->try_lock()) lock->unlock();
        }
        n += 256;
      }
    }
    out->busy_ns = NowNs() - t0;
    out->ops = n;
  };
}

template <typename C>
Body NotifyBody(Op op) {
  return [op](int, const std::atomic<bool>& stop, WorkerOut* out) {
    auto cond = std::make_unique<C>();
    uint64_t n = 0;
    const int64_t t0 = NowNs();
    while (!stop.load(std::memory_order_relaxed)) {
      for (int i = 0; i < 256; ++i) {
        if (op == Op::kNotifyOne) {
          cond->notify_one();
        } else {
          cond->notify_all();
        }
      }
      n += 256;
    }
    out->busy_ns = NowNs() - t0;
    out->ops = n;
  };
}

std::string RunUncontended(const Body& body, bool pin, absl::Duration window,
                           Sample* s) {
  const WindowResult w = RunWindow(1, pin, window, body);
  if (!w.error.empty()) return w.error;
  Summarize(w, 0, 1, s);
  const WorkerOut& o = w.workers[0];
  const double ops = std::max<double>(1, static_cast<double>(o.ops));
  Put(s, "ns_per_op", static_cast<double>(o.busy_ns) / ops);
  s->real_s = static_cast<double>(o.busy_ns) / 1e9;
  return "";
}

class Uncontended : public Scenario {
 public:
  int number() const override { return 1; }

  void Measure(Context& c) override {
    const Plan& plan = c.plan;
    const absl::Duration window =
        plan.Window(absl::Milliseconds(20), absl::Milliseconds(10),
                    absl::Milliseconds(3));
    const std::pair<Op, const char*> lock_ops[] = {
        {Op::kLockUnlock, "lock+unlock"}, {Op::kTryLock, "trylock+unlock"}};
    const std::pair<Op, const char*> cond_ops[] = {
        {Op::kNotifyOne, "notify_one,no-waiter"},
        {Op::kNotifyAll, "notify_all,no-waiter"}};
    std::vector<Case> cases;
    for (const auto& [op, cell] : lock_ops) {
      for (const std::string& pin : plan.pins) {
        ForEachMutex([&, op = op, cell = cell]<typename L>() {
          const bool pinned = pin == "pinned";
          cases.push_back({"uncontended", cell, pin, L::kName,
                           [op, pinned, window](Sample* s) {
                             return RunUncontended(LockBody<L>(op), pinned,
                                                   window, s);
                           }});
        });
      }
    }
    for (const auto& [op, cell] : cond_ops) {
      for (const std::string& pin : plan.pins) {
        ForEachCond([&, op = op, cell = cell]<typename C>() {
          const bool pinned = pin == "pinned";
          cases.push_back({"uncontended", cell, pin, C::kName,
                           [op, pinned, window](Sample* s) {
                             return RunUncontended(NotifyBody<C>(op), pinned,
                                                   window, s);
                           }});
        });
      }
    }
    RunCases("1 uncontended", cases, plan.reps, c.results);
  }

  std::vector<Table> Tables(const Plan& plan) const override {
    (void)plan;
    return {
        {"uncontended",
         "1. uncontended, one thread: CPU time per operation (the cost; "
         "wall time per operation also counts preemptions by other "
         "processes)",
         {{"cpu_ns_per_op", "cpu/op", Column::kTime, true, true},
          {"ns_per_op", "wall/op", Column::kTime, false, true}}}};
  }

  void Targets(const Results& r, std::vector<Verdict>* v) const override {
    Tally t;
    for (const Series* s : r.Of("uncontended")) {
      if (s->impl != "parklot") continue;
      const double x =
          Ratio(r, "uncontended", s->cell, s->pin, "parklot", "cpu_ns_per_op");
      t.Add(x, x <= 1.0);
    }
    v->push_back({"1 uncontended: parklot CPU time/op <= 1.0x glibc",
                  t.Range(), t.Result()});
  }
};

PARKLOT_SUITE_SCENARIO(Uncontended);

}  // namespace
}  // namespace bench
}  // namespace parklot
