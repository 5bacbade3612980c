// Scenario 6 of //bench:suite: condition variables. Producer/consumer
// over a bounded queue (6a); broadcast to sleeping waiters (6b: time,
// context switches per waiter).
#include <limits.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/suite_harness.h"

namespace parklot::internal {
namespace bench {
namespace {

struct Params {
  absl::Duration window;                      // producer/consumer
  std::vector<std::pair<int, int>> pc_pairs;  // producers, consumers
  std::vector<int> pc_queues;
  std::vector<std::pair<int, int>> bc;  // waiters, rounds
};

Params ParamsFor(const Plan& plan) {
  using Pairs = std::vector<std::pair<int, int>>;
  using V = std::vector<int>;
  return {plan.Window(absl::Milliseconds(40), absl::Milliseconds(15),
                      absl::Milliseconds(3)),
          plan.Pick<Pairs>({{1, 1}, {4, 4}, {16, 16}}, {{1, 1}, {4, 4}, {16, 16}},
                           {{1, 1}, {2, 2}}),
          plan.Pick<V>({1, 100}, {1}, {1}),
          plan.Pick<Pairs>({{64, 10}, {1024, 3}}, {{64, 5}, {1024, 2}},
                           {{4, 2}, {16, 2}})};
}

template <typename C>
std::string RunProducerConsumer(int producers, int consumers, int capacity,
                                bool pin, absl::Duration window, Sample* s) {
  struct State {
    C cond;  // cv 0: not empty, cv 1: not full
    int count = 0;
    uint64_t sum = 0;
  };
  auto st = std::make_shared<State>();
  Body body = [st, producers, capacity](
                  int index, const std::atomic<bool>& stop, WorkerOut* out) {
    State& q = *st;
    uint64_t n = 0;
    if (index < producers) {
      for (;;) {
        q.cond.lock();
        while (q.count == capacity && !stop.load(std::memory_order_relaxed)) {
          q.cond.wait(1);
        }
        if (stop.load(std::memory_order_relaxed)) {
          q.cond.unlock();
          break;
        }
        ++q.count;
        q.cond.notify_one(0);
        q.cond.unlock();
        ++n;
      }
    } else {
      for (;;) {
        q.cond.lock();
        while (q.count == 0 && !stop.load(std::memory_order_relaxed)) {
          q.cond.wait(0);
        }
        if (q.count == 0) {
          q.cond.unlock();
          break;
        }
        --q.count;
        q.sum += n;
        q.cond.notify_one(1);
        q.cond.unlock();
        ++n;
      }
    }
    out->ops = n;
  };
  // At the stop, wake every sleeper (under the mutex: a thread that saw
  // `stop` false is then asleep and gets this broadcast).
  auto on_stop = [st] {
    st->cond.lock();
    st->cond.notify_all(0);
    st->cond.notify_all(1);
    st->cond.unlock();
  };
  const WindowResult w =
      RunWindow(producers + consumers, pin, window, std::move(body), on_stop);
  if (!w.error.empty()) return w.error;
  Summarize(w, static_cast<size_t>(producers), w.workers.size(), s);
  return "";
}

// N waiters sleep on the condvar; the main thread broadcasts (holding the
// mutex, as is usual) and times until the last waiter has re-acquired the
// mutex and passed. Each waiter counts its context switches from just
// before its wait to just after it released the mutex again: 1 if it only
// slept once, more if it woke only to block on the mutex (the herd). Then
// it waits on a separate kernel futex (the same for every implementation,
// not measured) until the main thread opens the next round, so that
// re-locking for the next round does not contend with the broadcast being
// measured. Repeated `rounds` times with the same threads.
template <typename C>
std::string RunBroadcast(int waiters, int rounds, bool pin, Sample* s) {
  struct State {
    C cond;
    uint64_t gen = 0;  // under the mutex
    int passed = 0;    // under the mutex
    bool stop = false;  // under the mutex
    int n = 0;
    alignas(64) std::atomic<int> waiting{0};
    alignas(64) std::atomic<uint32_t> done{0};
    alignas(64) std::atomic<uint32_t> next_round{0};
    std::atomic<int64_t> t_end{0};
    UsageSum used;
  };
  auto* st = new State;  // leaked if a waiter never returns
  st->n = waiters;
  auto waiter = [](void* p, int) {
    State& q = *static_cast<State*>(p);
    for (uint32_t round = 0;; ++round) {
      q.cond.lock();
      if (q.stop) {
        q.cond.unlock();
        break;
      }
      const uint64_t my = q.gen;
      const Usage u0 = Usage::Thread();
      q.waiting.fetch_add(1, std::memory_order_release);
      while (q.gen == my && !q.stop) q.cond.wait();
      if (q.stop) {
        q.cond.unlock();
        break;
      }
      if (++q.passed == q.n) {
        q.t_end.store(NowNs(), std::memory_order_relaxed);
        q.done.store(1, std::memory_order_release);
        FutexWakePrivate(&q.done, 1);
      }
      q.cond.unlock();
      q.used.Add(u0, Usage::Thread());
      // The gate to the next round (or the end).
      for (uint32_t v; (v = q.next_round.load(std::memory_order_acquire)) ==
                       round;) {
        FutexWaitPrivate(&q.next_round, v);
      }
    }
  };
  Threads threads;
  std::string error = threads.Start(waiters, pin, 256 * 1024, waiter, st);
  const int n = threads.size();
  // Waits (polling) until every waiter has registered for the next round.
  auto all_waiting = [&] {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (st->waiting.load(std::memory_order_acquire) < n) {
      if (absl::Now() > deadline) return false;
      SleepNs(100000);
    }
    return true;
  };
  std::vector<double> round_ns;
  if (error.empty()) {
    for (int r = 0; r < rounds; ++r) {
      if (!all_waiting()) {
        error = "waiters did not all block within 60s";
        break;
      }
      st->cond.lock();
      st->waiting.store(0, std::memory_order_relaxed);
      st->passed = 0;
      st->done.store(0, std::memory_order_relaxed);
      ++st->gen;
      const int64_t t0 = NowNs();
      st->cond.notify_all();
      st->cond.unlock();
      if (!AwaitNonZero(&st->done, absl::Now() + absl::Seconds(60))) {
        error = "broadcast: not every waiter passed within 60s (lost wake-up?)";
        break;
      }
      round_ns.push_back(
          static_cast<double>(st->t_end.load(std::memory_order_relaxed) - t0));
      if (r + 1 < rounds) {
        st->next_round.fetch_add(1, std::memory_order_release);
        FutexWakePrivate(&st->next_round, INT_MAX);
      }
    }
  }
  // Every waiter that passed has added its usage before reaching the gate;
  // wait for them all there (the last round's `passed` is n), then end.
  st->cond.lock();
  st->stop = true;
  st->cond.notify_all();
  st->cond.unlock();
  st->next_round.fetch_add(1, std::memory_order_release);
  FutexWakePrivate(&st->next_round, INT_MAX);
  if (!threads.Join(absl::Now() + absl::Seconds(60))) {
    return error.empty() ? "waiters did not exit within 60s" : error;
  }
  if (error.empty()) {
    const double per = static_cast<double>(n) * static_cast<double>(rounds);
    std::sort(round_ns.begin(), round_ns.end());
    const double med = round_ns[round_ns.size() / 2];
    s->iterations = per;
    s->real_s = med * rounds / 1e9;
    const UsageSum& u = st->used;
    s->cpu_s = static_cast<double>(u.cpu_ns.load()) / 1e9;
    Put(s, "round_ns", med);
    Put(s, "vcsw_per_waiter", static_cast<double>(u.vcsw.load()) / per);
    Put(s, "ivcsw_per_waiter", static_cast<double>(u.ivcsw.load()) / per);
    Put(s, "csw_per_waiter",
        static_cast<double>(u.vcsw.load() + u.ivcsw.load()) / per);
    Put(s, "cpu_ns_per_waiter", static_cast<double>(u.cpu_ns.load()) / per);
  }
  delete st;
  return error;
}

class Condvar : public Scenario {
 public:
  int number() const override { return 6; }

  std::vector<std::string> Notes(const Plan& plan) const override {
    return plan.Pick<std::vector<std::string>>(
        {}, {"quick 6: queue 100 left out"}, {});
  }

  void Measure(Context& c) override {
    const Plan& plan = c.plan;
    const Params p = ParamsFor(plan);
    std::vector<Case> pc;
    for (const auto& [np, nc] : p.pc_pairs) {
      for (int q : p.pc_queues) {
        for (const std::string& pin : plan.pins) {
          ForEachCond([&, np = np, nc = nc]<typename C>() {
            const bool pinned = pin == "pinned";
            const absl::Duration window = p.window;
            pc.push_back({"prodcons",
                          absl::StrFormat("P=%d C=%d queue=%d", np, nc, q), pin,
                          C::kName, [=](Sample* s) {
                            return RunProducerConsumer<C>(np, nc, q, pinned,
                                                          window, s);
                          }});
          });
        }
      }
    }
    RunCases("6a condvar producer/consumer", pc, plan.reps, c.results);
    std::vector<Case> bc;
    for (const auto& [waiters, rounds] : p.bc) {
      for (const std::string& pin : plan.pins) {
        ForEachCond([&, waiters = waiters, rounds = rounds]<typename C>() {
          const bool pinned = pin == "pinned";
          bc.push_back({"broadcast", absl::StrFormat("waiters=%d", waiters),
                        pin, C::kName, [=](Sample* s) {
                          return RunBroadcast<C>(waiters, rounds, pinned, s);
                        }});
        });
      }
    }
    RunCases("6b condvar broadcast", bc, plan.reps, c.results);
  }

  std::vector<Table> Tables(const Plan& plan) const override {
    (void)plan;
    using C = Column;
    return {
        {"prodcons",
         "6a. condvar producer/consumer: P producers, C consumers, "
         "bounded queue",
         SummaryColumns("item")},
        {"broadcast",
         "6b. condvar broadcast (under the mutex) to N sleeping "
         "waiters: time until the last has passed; context switches "
         "per waiter (1 = it slept once)",
         {{"round_ns", "time", C::kTime, true, true},
          {"csw_per_waiter", "csw/waiter", C::kFixed, false, true},
          {"vcsw_per_waiter", "vcsw/waiter", C::kFixed, false, false},
          {"ivcsw_per_waiter", "ivcsw/waiter", C::kFixed, false, false},
          {"cpu_ns_per_waiter", "cpu/waiter", C::kTime, false, false}}}};
  }

  void Targets(const Results& r, std::vector<Verdict>* v) const override {
    // Voluntary switches are the ones a herd causes (waking only to block
    // on the mutex); involuntary ones are preemptions, shown beside.
    Tally vol, all;
    for (const Series* s : r.Of("broadcast")) {
      if (s->impl != "parklot" || s->samples.empty()) continue;
      const double x = s->Median("vcsw_per_waiter");
      vol.Add(x, x <= 1.2);
      const double y = s->Median("csw_per_waiter");
      all.Add(y, y <= 1.2);
    }
    v->push_back({"6 broadcast: parklot voluntary context switches <= 1.2 x "
                  "waiters",
                  vol.Range(" per waiter"), vol.Result()});
    v->push_back({"6 broadcast: the same counting involuntary switches "
                  "(preemptions) too",
                  all.Range(" per waiter"), all.Result()});
  }

  // Broadcast: context switches per waiter.
  void Plots(const Plan& plan, const Results& r, const std::string& dir,
             const std::string& data,
             std::vector<std::string>* scripts) const override {
    (void)plan;
    if (r.Of("broadcast").empty()) return;
    const std::vector<std::string> impls = r.Impls("broadcast");
    std::string t = "case";
    for (const std::string& i : impls) absl::StrAppend(&t, " ", i);
    absl::StrAppend(&t, "\n");
    for (const std::string& pin : r.Pins("broadcast")) {
      for (const std::string& cell : r.Cells("broadcast")) {
        absl::StrAppend(&t, "\"", cell.substr(cell.find('=') + 1), " ",
                        pin == "pinned" ? "pin" : "unpin", "\"");
        for (const std::string& i : impls) {
          const Series* s = r.Find("broadcast", cell, pin, i);
          const double m = s != nullptr && !s->samples.empty()
                               ? s->Median("csw_per_waiter")
                               : NAN;
          absl::StrAppend(&t, " ",
                          std::isfinite(m) ? absl::StrFormat("%.4g", m)
                                           : std::string("?"));
        }
        absl::StrAppend(&t, "\n");
      }
    }
    const std::string file = data + "/broadcast.dat";
    WriteFile(file, t);
    std::string gp = GnuplotPreamble(dir + "/broadcast.png", 1200, 700);
    absl::StrAppend(
        &gp,
        "set title 'condvar broadcast: context switches per waiter "
        "(voluntary + involuntary; 1 = each waiter slept once; target <= "
        "1.2)'\n",
        "set style data histograms\nset style histogram clustered gap 1\n"
        "set style fill solid 0.8 border -1\nset boxwidth 0.9\n"
        "set yrange [0:*]\nset xlabel 'waiters'\n",
        "set ylabel 'context switches per waiter'\n",
        absl::StrFormat("plot for [i=2:%d] '%s' using i:xtic(1) title "
                        "columnheader(i), 1.2 with lines dt 2 lc rgb 'black' "
                        "title 'target 1.2'\n",
                        impls.size() + 1, file));
    AddPlotScript(data + "/broadcast.gp", gp, scripts);
  }
};

PARKLOT_SUITE_SCENARIO(Condvar);

}  // namespace
}  // namespace bench
}  // namespace parklot::internal
