// Adaptive, owner-aware spinning (DESIGN.md, "Spin policy").
//
// A waiter spins only while spinning can pay: the lock's owner is running
// (not parked itself), the process has no more runnable threads than CPUs it
// may run on (else only a probe of a few PAUSEs), and the hold times seen
// recently fit the spin budget. The
// budget is an exponential moving average of the spin rounds that recent
// acquisitions needed, kept in the lock (as glibc's adaptive mutex keeps
// __spins). Backoff is PAUSE-based and exponential; never sched_yield.
#ifndef PARKLOT_RUNTIME_SPIN_H_
#define PARKLOT_RUNTIME_SPIN_H_

#include <atomic>
#include <cstdint>

namespace parklot {

// Upper bound on spin rounds (each round doubles its PAUSEs up to a cap,
// ~2-4 us in total on current x86 parts).
inline constexpr int kMaxSpinRounds = 12;

// Whether a waiter for a lock held by the thread in `owner_slot` (kNoSlot if
// unknown) should spin now. Reads the config, the owner's state and the
// registry; no writes. Thread-safe.
bool ShouldSpin(uint32_t owner_slot);

// The spin budget, in rounds, for a lock whose moving average of rounds
// needed is `ema` (0..kMaxSpinRounds*8, fixed point x8).
int SpinBudget(int32_t ema);

// Rounds of the probe spin (about 3 PAUSEs) a lock waiter makes when the
// process has more runnable threads than CPUs but the owner is not parked:
// a lock held for nanoseconds is often released within it, and a park and
// its unpark cost far more (measured by bench/suite, scenario 2, one lock,
// T >> CPUs). Longer spins there would steal the CPU a preempted owner
// needs.
inline constexpr int kOversubscribedProbeRounds = 2;

// The budget a waiter for a lock held by `owner_slot` spins now: 0 if
// spinning is off or the owner is parked; the probe if the process is
// oversubscribed; otherwise SpinBudget(ema). Reads only. Thread-safe.
int SpinBudgetFor(uint32_t owner_slot, int32_t ema);

// Folds the rounds an acquisition needed into `ema` (x8 fixed point,
// weight 1/8). A failed spin counts as the budget plus one, so a lock whose
// holds outgrow the budget stops being spun on. Relaxed; races between
// updaters only lose a sample.
void UpdateSpinEma(std::atomic<int32_t>* ema, int rounds_needed);

// One backoff round: PAUSE 2^min(round, 6) times.
void SpinRound(int round);

}  // namespace parklot

#endif  // PARKLOT_RUNTIME_SPIN_H_
