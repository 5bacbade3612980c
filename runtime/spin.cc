#include "runtime/spin.h"

#include "base/futex.h"
#include "runtime/config.h"
#include "runtime/registry.h"
#include "runtime/thread_data.h"

namespace parklot::internal {

int SpinBudgetFor(uint32_t owner_slot, int32_t ema) {
  const Config& c = GetConfig();
  if (c.spin == SpinMode::kOff) return 0;
  // A parked owner cannot release the lock until someone wakes it: spinning
  // on it is pure waste.
  if (registry::StateOf(owner_slot) == ThreadState::kParked) return 0;
  // With more runnable threads than CPUs, the owner is likely preempted and
  // a longer spin steals the CPU it needs (the oversubscribed case).
  const size_t live = registry::LiveThreads();
  const size_t parked = registry::ParkedThreads();
  const size_t runnable = live > parked ? live - parked : 1;
  if (runnable > registry::AllowedCpus()) return kOversubscribedProbeRounds;
  return c.spin == SpinMode::kFixed ? c.spin_budget : AdaptiveSpinBudget(ema);
}

int AdaptiveSpinBudget(int32_t ema) {
  const int avg = ema / 8;
  // Holds longer than a full spin: probe with one round so that the
  // average can come back down when holds shorten.
  if (avg > kMaxSpinRounds) return 1;
  const int budget = 2 * avg + 2;
  return budget < kMaxSpinRounds ? budget : kMaxSpinRounds;
}

void UpdateSpinEma(std::atomic<int32_t>* ema, int rounds_needed) {
  const int32_t old = ema->load(std::memory_order_relaxed);
  const int32_t delta = rounds_needed * 8 - old;
  // Integer division alone would stall up to 7 short of the samples; a
  // step of at least one lets the average reach them.
  int32_t step = delta / 8;
  if (step == 0 && delta != 0) step = delta > 0 ? 1 : -1;
  ema->store(old + step, std::memory_order_relaxed);
}

void SpinRound(int round) {
  const int pauses = 1 << (round < 6 ? round : 6);
  for (int i = 0; i < pauses; ++i) CpuRelax();
}

void SpinWait::Begin(uint32_t owner_slot) {
  budget_ = SpinBudgetFor(owner_slot, ema_->load(std::memory_order_relaxed));
  if (budget_ == 0) return;
  // Counted only for a registered thread: counting must not register one.
  if (ThreadData* td = CurrentThreadDataIfAny()) {
    td->counters.Bump(td->counters.spins);
  }
}

void SpinWait::Won() {
  UpdateSpinEma(ema_, round_);
  if (ThreadData* td = CurrentThreadDataIfAny()) {
    td->counters.Bump(td->counters.spin_acquired);
  }
}

}  // namespace parklot::internal
