#include "sync/shared_mutex.h"

#include <cerrno>

#include "base/text.h"
#include "runtime/spin.h"

namespace parklot::internal {
namespace {

using Core = SharedMutexCore;

// Unpark tokens. 0 (what any stray or generic unpark delivers) means
// "re-check the word"; the others tell the woken thread it was handed the
// lock.
constexpr UnparkToken kTokenRetry = 0;
constexpr UnparkToken kTokenShared = 1;     // you hold a read lock
constexpr UnparkToken kTokenExclusive = 2;  // you hold the write lock

// Park tokens: bit 0 is set for writers, the rest is the parker's slot (so
// that an unlocker can hand the lock to a writer with its owner field).
ParkToken MakeParkToken(bool writer, uint32_t slot) {
  return (ParkToken{slot} << 1) | (writer ? 1 : 0);
}
bool IsWriterToken(ParkToken t) { return t & 1; }
uint32_t SlotOfToken(ParkToken t) { return static_cast<uint32_t>(t >> 1); }

// Threads waiting to acquire (readers and writers) park on the word's
// address; a pending writer waiting for readers to drain parks on the next
// byte's address. Both are inside the lock object, so no other object can
// use them as keys.
uintptr_t KeyOf(const std::atomic<uint64_t>* word) {
  return reinterpret_cast<uintptr_t>(word);
}
uintptr_t DrainKeyOf(const std::atomic<uint64_t>* word) {
  return reinterpret_cast<uintptr_t>(word) + 1;
}

void CountHandoff() {
  if (ThreadData* td = CurrentThreadDataIfAny()) {
    td->counters.Bump(td->counters.handoffs);
  }
}

// A thread that times out of a park on the acquire key clears the parked
// bit if it was the last one there (under the bucket lock, so no parker can
// be missed: parkers set the bit and validate it under the same lock).
void ClearParkedIfLast(std::atomic<uint64_t>* word, bool was_last) {
  if (was_last) {
    word->fetch_and(~Core::kWaitersParked, std::memory_order_relaxed);
  }
}

// Sets the parked bit (unless the word moved on since `w` was read) and
// parks on the word while `blocked` holds. A lost race on the bit returns
// kInvalid, as a failed validation does: the caller re-reads and retries.
template <typename Blocked>
ParkResult MarkParkedAndPark(std::atomic<uint64_t>* word, uint64_t w,
                             Blocked blocked, ParkToken token,
                             const Deadline& deadline) {
  if (!(w & Core::kWaitersParked) &&
      !word->compare_exchange_weak(w, w | Core::kWaitersParked,
                                   std::memory_order_relaxed,
                                   std::memory_order_relaxed)) {
    return {ParkResult::kInvalid, 0};
  }
  return Park(
      KeyOf(word),
      [&] {
        const uint64_t v = word->load(std::memory_order_relaxed);
        return blocked(v) && (v & Core::kWaitersParked);
      },
      [] {},
      [word](uintptr_t, bool was_last) { ClearParkedIfLast(word, was_last); },
      token, deadline);
}

}  // namespace

int SharedMutexCore::TryLock(std::atomic<uint64_t>* word) {
  const uint64_t me = OwnerBits(CurrentSlot());
  uint64_t w = word->load(std::memory_order_relaxed);
  while (!(w & kWriter) && ReadersOf(w) == 0) {
    if (word->compare_exchange_weak(w, w | me, std::memory_order_acquire,
                                    std::memory_order_relaxed)) {
      return 0;
    }
  }
  return EBUSY;
}

int SharedMutexCore::TryLockShared(std::atomic<uint64_t>* word) {
  uint64_t w = word->load(std::memory_order_relaxed);
  while (!(w & kWriter)) {
    if (ReadersOf(w) >= kMaxReaders) return EAGAIN;
    if (word->compare_exchange_weak(w, w + kOneReader,
                                    std::memory_order_acquire,
                                    std::memory_order_relaxed)) {
      return 0;
    }
  }
  return EBUSY;
}

int SharedMutexCore::LockSlow(std::atomic<uint64_t>* word,
                              std::atomic<int32_t>* ema, Kind kind,
                              const Deadline& deadline) {
  const uint32_t self = CurrentSlot();
  const uint64_t me = OwnerBits(self);
  // What keeps this writer out: with kPreferWriter only another writer
  // (readers inside are waited out after claiming); with kPreferReader any
  // holder.
  auto blocked = [kind](uint64_t w) {
    return (w & kWriter) ||
           (kind == Kind::kPreferReader && ReadersOf(w) != 0);
  };
  SpinWait spin(ema);
  for (;;) {
    uint64_t w = word->load(std::memory_order_relaxed);
    if (!blocked(w)) {
      // Free of writers. Take it (no readers), or claim it as the pending
      // writer and wait for the readers inside to leave.
      if (word->compare_exchange_weak(w, w | me, std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
        spin.Acquired();
        if (ReadersOf(w) == 0) return 0;
        return WaitForReaders(word, ema, self, deadline);
      }
      continue;
    }
    // The writer in the way (if any) is the owner whose state decides.
    // kWritersFirst: no spinning; the unlock hands the lock to a parked
    // writer only (ReleaseToWriter), and one spinning here when it comes
    // would let parked readers in ahead of it.
    if (kind != Kind::kWritersFirst && spin.Spin(OwnerOf(w))) continue;
    const ParkResult r = MarkParkedAndPark(word, w, blocked,
                                           MakeParkToken(true, self), deadline);
    if (r.unparked() && r.token == kTokenExclusive) {
      // Handed over with our slot in the owner field.
      (void)word->load(std::memory_order_acquire);
      return 0;
    }
    if (r.timed_out()) {
      // POSIX: a timed lock that could be taken at once succeeds anyway.
      return TryLock(word) == 0 ? 0 : ETIMEDOUT;
    }
    spin.Parked();
  }
}

// The caller has claimed the writer bit while readers were inside; new
// readers now block. Waits for the readers to leave (the last one hands the
// lock over) or for the deadline (then withdraws the claim and wakes
// whoever it kept out).
int SharedMutexCore::WaitForReaders(std::atomic<uint64_t>* word,
                                    std::atomic<int32_t>* ema, uint32_t self,
                                    const Deadline& deadline) {
  const uint64_t me = OwnerBits(self);
  SpinWait spin(ema);
  for (;;) {
    uint64_t w = word->load(std::memory_order_acquire);
    if (ReadersOf(w) == 0) {
      spin.Acquired();
      break;
    }
    // No owner to watch: readers are not recorded.
    if (spin.Spin(kNoSlot)) continue;
    // Only the pending writer sets or clears kWriterParked.
    if (!(w & kWriterParked)) {
      word->fetch_or(kWriterParked, std::memory_order_relaxed);
    }
    const ParkResult r = Park(
        DrainKeyOf(word),
        [&] { return ReadersOf(word->load(std::memory_order_relaxed)) != 0; },
        [] {}, [](uintptr_t, bool) {}, MakeParkToken(true, self), deadline);
    if (r.timed_out()) {
      // Out of the drain queue (under its bucket lock), so no reader will
      // hand over to us any more.
      word->fetch_and(~kWriterParked, std::memory_order_relaxed);
      w = word->load(std::memory_order_acquire);
      for (;;) {
        // The readers may have left meanwhile; then the lock is ours.
        if (ReadersOf(w) == 0) return 0;
        if (w & kWaitersParked) {
          // Readers (or writers) queued behind our claim: release it and
          // wake them.
          if (ReleaseAndWake(word, me)) return ETIMEDOUT;
          w = word->load(std::memory_order_relaxed);
          continue;
        }
        if (word->compare_exchange_weak(w, w - me, std::memory_order_release,
                                        std::memory_order_relaxed)) {
          return ETIMEDOUT;
        }
      }
    }
    // Woken (the last reader left) or invalid: re-check.
    spin.Parked();
  }
  word->fetch_and(~kWriterParked, std::memory_order_acquire);
  return 0;
}

int SharedMutexCore::LockSharedSlow(std::atomic<uint64_t>* word,
                                    std::atomic<int32_t>* ema,
                                    const Deadline& deadline) {
  const uint32_t self = CurrentSlot();
  auto blocked = [](uint64_t w) { return (w & kWriter) != 0; };
  SpinWait spin(ema);
  for (;;) {
    uint64_t w = word->load(std::memory_order_relaxed);
    if (!blocked(w)) {
      if (ReadersOf(w) >= kMaxReaders) return EAGAIN;
      if (word->compare_exchange_weak(w, w + kOneReader,
                                      std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
        spin.Acquired();
        return 0;
      }
      continue;
    }
    if (spin.Spin(OwnerOf(w))) continue;
    const ParkResult r = MarkParkedAndPark(word, w, blocked,
                                           MakeParkToken(false, self), deadline);
    if (r.unparked() && r.token == kTokenShared) {
      (void)word->load(std::memory_order_acquire);
      return 0;
    }
    if (r.timed_out()) {
      // As for writers: taken at once if it can be (else EBUSY or EAGAIN).
      return TryLockShared(word) == 0 ? 0 : ETIMEDOUT;
    }
    spin.Parked();
  }
}

void SharedMutexCore::UnlockSlow(std::atomic<uint64_t>* word,
                                 bool writers_first) {
  const uint64_t me = OwnerBits(CurrentSlot());
  // A writer parked on a writers-first lock is parked behind a writer
  // (kWritersFirst writers park only while the writer bit is set, which
  // keeps readers out): handing it the lock keeps them out, so readers wait
  // for as long as writers do (docs/design.md section 4, SharedMutex).
  if (writers_first &&
      (word->load(std::memory_order_relaxed) & kWaitersParked) &&
      ReleaseToWriter(word, me)) {
    return;
  }
  // No writer parked: the parked readers are woken but not handed the
  // lock, so that a writer already on its way (running, not yet parked)
  // may still take it before them, as a writer arriving at glibc's lock
  // finds them still waiting.
  for (;;) {
    uint64_t w = word->load(std::memory_order_relaxed);
    if (!(w & kWaitersParked)) {
      // Nobody parked (a spurious CAS failure, or the bit was cleared by a
      // timed-out waiter): plain release.
      if (word->compare_exchange_weak(w, w - me, std::memory_order_release,
                                      std::memory_order_relaxed)) {
        return;
      }
      continue;
    }
    if (ReleaseAndWake(word, me, !writers_first)) return;
  }
}

void SharedMutexCore::UnlockSharedSlow(std::atomic<uint64_t>* word) {
  for (;;) {
    uint64_t w = word->load(std::memory_order_relaxed);
    if (ReadersOf(w) == 1 && (w & kWriterParked)) {
      // The last reader out of a pending writer's way hands it the lock.
      if (UnlockSharedToPendingWriter(word)) return;
      continue;
    }
    if (ReadersOf(w) == 1 && (w & kWaitersParked) && !(w & kWriter)) {
      // The lock becomes free with threads parked for it (writers of a
      // kPreferReader lock, or writers left behind a reader handoff).
      if (ReleaseAndWake(word, kOneReader)) return;
      continue;
    }
    if (word->compare_exchange_weak(w, w - kOneReader,
                                    std::memory_order_release,
                                    std::memory_order_relaxed)) {
      return;
    }
  }
}

// Releases `release` (the caller's writer bits or one read lock) and wakes
// the threads parked on the acquire key: every parked reader and the first
// parked writer. If readers were woken and no writer holds the lock after
// the release, the lock is handed to them (they return holding read
// locks); this is what keeps readers from starving under writers
// (`readers_handoff` false, for kWritersFirst: they retry instead). Else, if
// only a writer was woken, the lock is free and the bucket's fairness timer
// fired, it is handed to that writer. Otherwise the woken threads retry.
//
// The release is the compare-and-swap inside the callback, under the
// bucket lock; after it this function touches only the parking lot.
// Returns false, without releasing, if the release would leave a pending
// writer (parked on the drain key) with no readers: the caller must take
// the drain path instead. The threads this woke then simply retry.
bool SharedMutexCore::ReleaseAndWake(std::atomic<uint64_t>* word,
                                     uint64_t release, bool readers_handoff) {
  uint64_t readers_woken = 0;
  bool writer_woken = false;
  uint32_t writer_slot = kNoSlot;
  bool released = false;
  UnparkFilter(
      KeyOf(word),
      [&](ParkToken t) {
        if (IsWriterToken(t)) {
          if (writer_woken) return FilterOp::kSkip;
          writer_woken = true;
          writer_slot = SlotOfToken(t);
          return FilterOp::kUnpark;
        }
        ++readers_woken;
        return FilterOp::kUnpark;
      },
      [&](UnparkResult result) -> UnparkToken {
        uint64_t w = word->load(std::memory_order_relaxed);
        for (;;) {
          uint64_t next = w - release;
          if (ReadersOf(next) == 0 && (next & kWriterParked)) {
            return kTokenRetry;
          }
          UnparkToken token = kTokenRetry;
          if (!(next & kWriter)) {
            if (readers_woken != 0 && readers_handoff) {
              next += readers_woken * kOneReader;
              token = kTokenShared;
            } else if (writer_woken && readers_woken == 0 &&
                       result.be_fair && ReadersOf(next) == 0) {
              next |= OwnerBits(writer_slot);
              token = kTokenExclusive;
            }
          }
          next = result.have_more_threads ? (next | kWaitersParked)
                                          : (next & ~kWaitersParked);
          if (word->compare_exchange_weak(w, next, std::memory_order_release,
                                          std::memory_order_relaxed)) {
            released = true;
            if (token != kTokenRetry) CountHandoff();
            return token;
          }
        }
      });
  return released;
}

// Releases the caller's write lock `release` by handing it to the first
// writer parked on the acquire key (readers stay parked), through the
// owner field, as UnlockSharedToPendingWriter does. Returns false, without
// releasing, if no writer is parked: the caller wakes the readers.
bool SharedMutexCore::ReleaseToWriter(std::atomic<uint64_t>* word,
                                      uint64_t release) {
  bool found = false;
  uint32_t writer_slot = kNoSlot;
  bool released = false;
  UnparkFilter(
      KeyOf(word),
      [&](ParkToken t) {
        if (found) return FilterOp::kStop;
        if (!IsWriterToken(t)) return FilterOp::kSkip;
        found = true;
        writer_slot = SlotOfToken(t);
        return FilterOp::kUnpark;
      },
      [&](UnparkResult result) -> UnparkToken {
        if (result.unparked_threads == 0) return kTokenRetry;
        uint64_t w = word->load(std::memory_order_relaxed);
        for (;;) {
          // A write unlock leaves no readers and no writer bit: the lock
          // goes straight to the woken writer.
          uint64_t next = (w - release) | OwnerBits(writer_slot);
          next = result.have_more_threads ? (next | kWaitersParked)
                                          : (next & ~kWaitersParked);
          if (word->compare_exchange_weak(w, next, std::memory_order_release,
                                          std::memory_order_relaxed)) {
            released = true;
            CountHandoff();
            return kTokenExclusive;
          }
        }
      });
  return released;
}

// The caller holds the last read lock and a pending writer may be parked on
// the drain key: hand it the lock. Returns false without releasing if the
// state changed so that ReleaseAndWake is needed instead.
bool SharedMutexCore::UnlockSharedToPendingWriter(
    std::atomic<uint64_t>* word) {
  bool released = false;
  bool taken = false;
  UnparkFilter(
      DrainKeyOf(word),
      [&](ParkToken) {
        // A writer queued here holds the writer bit, so no reader can enter
        // while we hold this bucket: if we are the only reader now, we stay
        // the last one.
        if (taken ||
            ReadersOf(word->load(std::memory_order_relaxed)) != 1) {
          return FilterOp::kStop;
        }
        taken = true;
        return FilterOp::kUnpark;
      },
      [&](UnparkResult result) -> UnparkToken {
        uint64_t w = word->load(std::memory_order_relaxed);
        for (;;) {
          uint64_t next = w - kOneReader;
          if (result.unparked_threads != 0) {
            // The writer (its owner bits are already in the word) holds the
            // lock from here on.
            next &= ~kWriterParked;
          } else if (ReadersOf(next) == 0 && !(next & kWriter) &&
                     (next & kWaitersParked)) {
            return kTokenRetry;
          }
          if (word->compare_exchange_weak(w, next, std::memory_order_release,
                                          std::memory_order_relaxed)) {
            released = true;
            return kTokenExclusive;
          }
        }
      });
  return released;
}

}  // namespace parklot::internal

namespace parklot {

using internal::SayLine;

void SharedMutex::LockShared() {
  const int rc = internal::SharedMutexCore::LockShared(&word_, &ema_);
  if (rc != 0) {
    SayLine("parklot::SharedMutex: too many readers (%d)", rc);
    abort();
  }
}

}  // namespace parklot
