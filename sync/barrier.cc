#include "sync/barrier.h"

#include <limits.h>

#include "base/futex.h"
#include "runtime/parking_lot.h"

namespace parklot {

using internal::FutexWaitPrivate;
using internal::FutexWakePrivate;
using internal::KeyOf;
using internal::Park;
using internal::UnparkAll;
namespace {
// The generation half of the barrier word (x86-64 is little-endian: the
// high 32 bits), as a futex address. Only the kernel reads through it.
const std::atomic<uint32_t>* GenerationWord(const std::atomic<uint64_t>* w) {
  return reinterpret_cast<const std::atomic<uint32_t>*>(
      reinterpret_cast<const char*>(w) + 4);
}
}  // namespace

bool Barrier::Wait() {
  for (;;) {
    // acq_rel: publish this thread's writes to the last arrival (release),
    // and, for the last arrival, see everyone's (the arrivals form a
    // release sequence on the word).
    const uint64_t w = word_.fetch_add(1, std::memory_order_acq_rel);
    const uint32_t generation = static_cast<uint32_t>(w >> 32);
    const uint32_t arrived = static_cast<uint32_t>(w) + 1;
    if (arrived == count_) {
      // Last one. The others of this cycle now count as "on their way
      // out" until each has left (Exit), so that a destroyer waits for
      // them. Every other arrival of this cycle is waiting, so a plain
      // store starts the next cycle; after it the barrier's memory is not
      // touched (a futex wake only names the address, and a stray one is
      // harmless to any futex user).
      // Everything the release needs is read before the store: after it a
      // released thread may destroy and free the barrier (invariant 2).
      const bool others = count_ > 1;
      const std::atomic<uint32_t>* generation_word = GenerationWord(&word_);
      if (others) exits_.fetch_add(count_ - 1, std::memory_order_relaxed);
      word_.store(uint64_t{generation + 1u} << 32, std::memory_order_release);
      if (others) FutexWakePrivate(generation_word, INT_MAX);
      return true;
    }
    auto released = [this, generation] {
      return static_cast<uint32_t>(word_.load(std::memory_order_acquire) >>
                                   32) != generation;
    };
    // Every waiter of a cycle is released at once, by one wake: they sleep
    // on the barrier's own word, as glibc's do, not in the parking lot,
    // whose per-thread queue would cost the last arrival one wake system
    // call per waiter. The kernel compares the generation under its hash
    // lock, so a release between the check and the sleep is never missed.
    // Nothing is queued in user space: a signal handler that leaves by
    // siglongjmp leaves no trace.
    while (!released()) {
      FutexWaitPrivate(GenerationWord(&word_), generation);
    }
    if (arrived < count_) {
      Exit();
      return false;
    }
    // More than `count` threads arrived in one cycle: the store that ended
    // it discarded this surplus arrival. Arrive again in the new cycle.
  }
}

void Barrier::Exit() {
  const uintptr_t exit_key = KeyOf(&exits_);
  // The last access to the barrier: after it a destroyer may free it.
  const uint32_t e = exits_.fetch_sub(1, std::memory_order_release);
  if ((e & kExitMask) == 1 && (e & kExitWaiter)) UnparkAll(exit_key);
}

void Barrier::WaitForExits() {
  const uintptr_t exit_key = KeyOf(&exits_);
  uint32_t e = exits_.load(std::memory_order_acquire);
  while ((e & kExitMask) != 0) {
    if (!(e & kExitWaiter)) {
      if (!exits_.compare_exchange_weak(e, e | kExitWaiter,
                                        std::memory_order_acquire,
                                        std::memory_order_acquire)) {
        continue;
      }
    }
    Park(exit_key, [this] {
      const uint32_t v = exits_.load(std::memory_order_relaxed);
      return (v & kExitMask) != 0 && (v & kExitWaiter);
    });
    e = exits_.load(std::memory_order_acquire);
  }
  // Clear the flag for a barrier that goes on being used (in-place).
  exits_.fetch_and(kExitMask, std::memory_order_relaxed);
}

}  // namespace parklot
