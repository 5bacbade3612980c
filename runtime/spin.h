// Adaptive, owner-aware spinning (docs/design.md section 3.10), and the one
// spin-wait that every lock of sync/ runs before it parks.
//
// A waiter spins only while spinning can pay: the lock's owner is running
// (not parked itself), the process has no more runnable threads than CPUs it
// may run on (else only a probe of a few PAUSEs), and the hold times seen
// recently fit the spin budget. The budget is an exponential moving average
// of the spin rounds that recent acquisitions needed, kept in the lock (as
// glibc's adaptive mutex keeps __spins). Backoff is PAUSE-based and
// exponential; never sched_yield.
#ifndef PARKLOT_RUNTIME_SPIN_H_
#define PARKLOT_RUNTIME_SPIN_H_

#include <atomic>
#include <cstdint>

namespace parklot::internal {

// Upper bound on adaptive spin rounds (each round doubles its PAUSEs up to
// a cap, ~2-4 us in total on current x86 parts).
inline constexpr int kMaxSpinRounds = 12;

// Rounds of the probe spin (about 3 PAUSEs) a lock waiter makes when the
// process has more runnable threads than CPUs but the owner is not parked:
// a lock held for nanoseconds is often released within it, and a park and
// its unpark cost far more (measured by bench/suite, scenario 2, one lock,
// T >> CPUs). Longer spins there would steal the CPU a preempted owner
// needs.
inline constexpr int kOversubscribedProbeRounds = 2;

// The spin policy: the rounds a waiter for a lock held by the thread in
// `owner_slot` (kNoSlot if none or unknown) spins now, given the lock's
// moving average `ema` (x8 fixed point). 0 if PARKLOT_SPIN is off or the
// owner is parked; the probe (kOversubscribedProbeRounds) if the process
// has more runnable threads than CPUs; otherwise PARKLOT_SPIN=N's fixed
// budget, or AdaptiveSpinBudget(ema). Reads the config, the
// owner's state and the registry; no writes. Thread-safe.
int SpinBudgetFor(uint32_t owner_slot, int32_t ema);

// The adaptive budget, in rounds, for a moving average of rounds needed
// `ema` (x8 fixed point): twice the average plus two, at most
// kMaxSpinRounds; 1 (a probe that lets the average come down) once the
// average exceeds kMaxSpinRounds. Pure.
int AdaptiveSpinBudget(int32_t ema);

// Folds the rounds an acquisition needed into `ema` (x8 fixed point,
// weight 1/8). Relaxed; races between updaters only lose a sample.
void UpdateSpinEma(std::atomic<int32_t>* ema, int rounds_needed);

// What a failed spin (the budget spent, the lock still held) counts as in
// the average: more than any adaptive budget, so a lock whose holds
// outgrow the budget soon gets only the one-round probe.
inline constexpr int kFailedSpinRounds = kMaxSpinRounds + 1;

// One backoff round: PAUSE 2^min(round, 6) times.
void SpinRound(int round);

// One waiter's spinning before it parks, as Rust parking_lot's SpinWait or
// WebKit's LockAlgorithm: Mutex, SharedMutex and Semaphore each run their
// acquire loop around one of these. The loop tries to acquire; if it
// cannot, it calls Spin() and tries again while that returns true, else
// parks (then Parked()); once it has acquired it calls Acquired().
//
//   SpinWait spin(&ema);
//   for (;;) {
//     if (TryToAcquire()) { spin.Acquired(); return; }
//     if (spin.Spin(owner)) continue;
//     Park(...);
//     spin.Parked();
//   }
//
// Also counts the calling thread's spins and spins that won (stats). Not
// thread-safe: one per waiting thread, on its stack; the average it
// updates is shared (see UpdateSpinEma).
class SpinWait {
 public:
  // `ema`: the lock's moving average of rounds needed.
  explicit SpinWait(std::atomic<int32_t>* ema) : ema_(ema) {}

  // Spins one more backoff round and returns true if the budget allows;
  // returns false (the caller parks) once it is spent. The first call
  // fixes the budget from the policy (SpinBudgetFor, with `owner_slot` as
  // the holder in the way, kNoSlot if none or unknown); the call that finds
  // it spent feeds the average a failure (kFailedSpinRounds) once.
  bool Spin(uint32_t owner_slot) {
    if (budget_ < 0) Begin(owner_slot);
    if (round_ < budget_) {
      SpinRound(round_++);
      return true;
    }
    if (round_ > 0 && round_ == budget_) {
      // The spin did not pay: holds are outgrowing the budget.
      UpdateSpinEma(ema_, kFailedSpinRounds);
      ++round_;
    }
    return false;
  }

  // The waiter acquired. If it spun for it (and never parked), feeds the
  // rounds it took into the average and counts a spin that won.
  void Acquired() {
    if (round_ > 0 && round_ <= budget_) Won();
  }

  // The waiter parked: it spins no more, and a later acquisition is not
  // the spin's.
  void Parked() {
    budget_ = 0;
    round_ = 1;
  }

 private:
  void Begin(uint32_t owner_slot);
  void Won();

  std::atomic<int32_t>* ema_;
  int round_ = 0;
  int budget_ = -1;  // -1: not asked yet
};

}  // namespace parklot::internal

#endif  // PARKLOT_RUNTIME_SPIN_H_
