#include "preload/futex_ops.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "base/futex.h"
#include "base/shared_tls.h"
#include "base/text.h"
#include "hash/lock_section.h"
#include "preload/futex_fault.h"
#include "preload/program_handler.h"
#include "runtime/deadline.h"
#include "runtime/global_table.h"
#include "runtime/parking_lot.h"
#include "runtime/registry.h"
#include "runtime/thread_data.h"

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace parklot::internal::futex {
namespace {

// ---------------------------------------------------------------------------
// Counters (PARKLOT_STATS).

bool g_counting = false;
std::atomic<uint64_t> g_served[kCommands];
std::atomic<uint64_t> g_kernel[kCommands];
std::atomic<uint64_t> g_served2[kFutex2Calls];
std::atomic<uint64_t> g_kernel2[kFutex2Calls];
std::atomic<uint64_t> g_forwarded{0};
std::atomic<uint64_t> g_forwarded_woken{0};

int CommandIndex(int cmd) {
  return cmd >= 0 && cmd < kCommands - 1 ? cmd : kCommands - 1;
}

void Count(std::atomic<uint64_t>* table, int cmd) {
  if (g_counting) table[CommandIndex(cmd)].fetch_add(1, std::memory_order_relaxed);
}

// ---------------------------------------------------------------------------
// Argument checks. A call fails in the kernel, with no effect on any
// waiter, when an address is misaligned or outside user space; such calls
// go to the kernel for its own error. Addresses below the lowest mappable
// one go there too (EFAULT), so a NULL word is an error, not a crash.

// The x86-64 user address space with 4-level page tables; higher addresses
// (5-level paging) go to the kernel, which knows.
constexpr uintptr_t kUserTop = (uintptr_t{1} << 47) - 4096;
std::atomic<uintptr_t> g_min_address{0};
std::atomic<int> g_init_state{0};  // Init(): 0 not started, 1 running, 2 done

[[gnu::always_inline]] inline uintptr_t MinAddress() {
  uintptr_t m = g_min_address.load(std::memory_order_relaxed);
  if (m != 0) return m;
  Init();
  return g_min_address.load(std::memory_order_relaxed);
}

[[gnu::always_inline]] inline bool WordOk(long a) {
  const auto p = static_cast<uintptr_t>(a);
  return (p & 3) == 0 && p >= MinAddress() && p <= kUserTop - 4;
}

bool TimespecAddressOk(long a) {
  const auto p = static_cast<uintptr_t>(a);
  return p >= MinAddress() && p <= kUserTop - sizeof(timespec);
}

// The caller's memory, through the accessors (futex_fault.h): false where
// the kernel would fail with EFAULT. (TSan sees no access inside them; it is
// told of the ordering a seq_cst access gives.)
[[gnu::always_inline]] inline bool ReadWord(const uint32_t* word,
                                           uint32_t* value) {
  if (!ReadUser32(word, value)) return false;
#if defined(__SANITIZE_THREAD__)
  __tsan_acquire(const_cast<uint32_t*>(word));
#endif
  return true;
}

// Compare-and-exchange: 0 exchanged, 1 differed (*expected updated), -EFAULT.
int CasWord(uint32_t* word, uint32_t* expected, uint32_t desired) {
#if defined(__SANITIZE_THREAD__)
  __tsan_release(word);
#endif
  const int r = parklot_user_cmpxchg32(word, expected, desired);
#if defined(__SANITIZE_THREAD__)
  if (r >= 0) __tsan_acquire(word);
#endif
  return r;
}

bool ReadTimespec(long address, timespec* ts) {
  uint64_t v[2];
  if (parklot_user_load64(reinterpret_cast<const void*>(address), &v[0]) != 0 ||
      parklot_user_load64(reinterpret_cast<const void*>(address + 8), &v[1]) !=
          0) {
    return false;
  }
  static_assert(sizeof(timespec) == sizeof v, "x86-64 timespec");
  memcpy(ts, v, sizeof v);
  return true;
}

// The kernel's wake loops stop after waking one once the count is reached,
// so 0 and negative counts wake one.
size_t WakeLimit(int nr) { return nr <= 0 ? 1 : static_cast<size_t>(nr); }

uint32_t* Word(long a) { return reinterpret_cast<uint32_t*>(a); }

// The re-entry rule: a call made while this task is inside one of the
// lot's lock sections is served only if it is a wake, which UnparkUpTo
// defers to the section's end (Wake); any other goes to the kernel, whose
// waiters served wakes reach (futex_ops.h, rule 2). Only a handler the
// shim does not wrap (sigvec, a raw rt_sigaction) can make such a call: the
// shim's wrapper delivers a signal that lands in a section at its end
// (hash/lock_section.h). Read from the section depth itself, so nothing is
// left behind by a handler that leaves a served call by siglongjmp (a task
// on another's TLS keeps a depth of its own, hash/lock_section.h).
[[gnu::always_inline]] inline bool MayServe(bool wake) {
  return wake || !InLockSection();
}

// ---------------------------------------------------------------------------
// The kernel's part of a served wake (the boundary rule, futex_ops.h).

// Its result: a count, or the kernel's error, which becomes the call's
// (Forwarded errors, futex_ops.h). FUTEX_CMP_REQUEUE's EAGAIN is the one
// error dropped: the call's compare was the lot's, under its locks, and it
// passed; a word changed since then is a later event.
long Forward(long uaddr, int op, long val, long val2, long uaddr2, long val3) {
  const long r = RawSyscall6(SYS_futex, uaddr, op, val, val2, uaddr2, val3);
  if (g_counting) {
    g_forwarded.fetch_add(1, std::memory_order_relaxed);
    if (r > 0) g_forwarded_woken.fetch_add(r, std::memory_order_relaxed);
  }
  if (r == -EAGAIN && (op & FUTEX_CMD_MASK) == FUTEX_CMP_REQUEUE) return 0;
  return r;
}

// A served count plus the kernel's part, or the kernel's error.
long AddForwarded(long total, long forwarded) {
  return forwarded < 0 ? forwarded : total + forwarded;
}

// ---------------------------------------------------------------------------
// The served operations. Arguments are checked. Each returns false, having
// done nothing, when the caller's memory faults: the call then goes to the
// kernel, whose answer (EFAULT) is the call's.

// A served wait past its first compare (Wait): the park. Out of line, as
// every operation's body is: the calls served without one (a wait on a
// word that differs) then run in a frame with nothing to save.
__attribute__((noinline)) bool ParkWait(uint32_t* uaddr, uint32_t val,
                                        const timespec* ts, bool relative,
                                        bool realtime, uint32_t bitset,
                                        long* result) {
  Deadline deadline = Deadline::Never();
  if (ts != nullptr) {
    if (relative) {
      // The kernel: an absolute CLOCK_MONOTONIC expiry taken at entry.
      // (kNever - 1 at most: a relative timeout is never "no deadline".)
      deadline = Deadline::InNanos(
          std::min(TimespecNanos(*ts), Deadline::kNever - 1));
    } else {
      deadline = Deadline::FromTimespec(
          *ts, realtime ? CLOCK_REALTIME : CLOCK_MONOTONIC);
    }
  }
  bool faulted = false;
  InterruptiblePark interruptible;
  const ParkResult r = Park(
      KeyOf(uaddr),
      [uaddr, val, &faulted] {
        uint32_t now;
        faulted = !ReadWord(uaddr, &now);
        return !faulted && now == val;
      },
      [] {}, [](uintptr_t, bool) {}, static_cast<ParkToken>(bitset), deadline);
  if (faulted) return false;
  switch (r.kind) {
    case ParkResult::kUnparked:
      *result = 0;
      return true;
    case ParkResult::kInvalid:
      *result = -EAGAIN;
      return true;
    case ParkResult::kTimedOut:
      *result = -ETIMEDOUT;
      return true;
    case ParkResult::kInterrupted:
      break;
  }
  *result = -EINTR;
  return true;
}

[[gnu::always_inline]] inline bool Wait(uint32_t* uaddr, uint32_t val,
                                       const timespec* ts, bool relative,
                                       bool realtime, uint32_t bitset,
                                       long* result) {
  // Read once before any bucket lock is taken: a bad word faults here, and
  // only a mapping changed since (another thread's munmap) can fault under
  // the lock, where the accessor's fault is as harmless. A word that
  // differs already is the kernel's EAGAIN: no lock, no clock, and no
  // re-entry check (the re-entry rule guards the lot's locks, and none is
  // held yet; a call from a handler the read interrupted may be served).
  uint32_t seen;
  if (!ReadWord(uaddr, &seen)) return false;
  if (seen != val) {
    *result = -EAGAIN;
    return true;
  }
  if (!MayServe(false)) return false;
  return ParkWait(uaddr, val, ts, relative, realtime, bitset,
                  result);
}

__attribute__((noinline)) long Wake(long uaddr, int op, int nr,
                                    uint32_t bitset) {
  const size_t limit = WakeLimit(nr);
  // Async-signal-safe, as the kernel's FUTEX_WAKE: from a handler that
  // interrupted this thread inside a lock section the lot's part is
  // deferred to the section's end and counts 0 here.
  const size_t woken =
      UnparkUpTo(KeyOf(Word(uaddr)), limit, static_cast<ParkToken>(bitset));
  long total = static_cast<long>(woken);
  if (woken < limit) {
    total = AddForwarded(
        total, Forward(uaddr, op, static_cast<long>(limit - woken), 0, 0, bitset));
  }
  return total;
}

__attribute__((noinline)) bool Requeue(long uaddr, int op, int nr_wake,
                                       int nr_requeue, long uaddr2,
                                       const uint32_t* cmpval, long* result) {
  uint32_t* from = Word(uaddr);
  // As in Wait: the first read outside the locks.
  uint32_t seen;
  if (cmpval != nullptr) {
    if (!ReadWord(from, &seen)) return false;
    if (seen != *cmpval) {
      *result = -EAGAIN;
      return true;
    }
  }
  bool faulted = false;
  const PairResult r = UnparkPair(
      KeyOf(from), KeyOf(Word(uaddr2)), [&](PairPlan* plan) {
        if (cmpval != nullptr) {
          faulted = !ReadWord(from, &seen);
          if (faulted || seen != *cmpval) return false;
        }
        plan->unpark_from = static_cast<size_t>(nr_wake);
        plan->requeue = static_cast<size_t>(nr_requeue);
        return true;
      });
  if (faulted) return false;
  if (r.aborted) {
    *result = -EAGAIN;
    return true;
  }
  long total = static_cast<long>(r.unparked_from + r.requeued);
  const long wake_left = nr_wake - static_cast<long>(r.unparked_from);
  const long requeue_left = nr_requeue - static_cast<long>(r.requeued);
  if (wake_left > 0 || requeue_left > 0) {
    total = AddForwarded(total, Forward(uaddr, op, wake_left, requeue_left,
                                        uaddr2, cmpval != nullptr ? *cmpval : 0));
  }
  *result = total;
  return true;
}

// FUTEX_WAKE_OP's encoding (linux/futex.h): bit 31 shift flag, bits 28-30
// op, 24-27 cmp, 12-23 oparg, 0-11 cmparg (both 12-bit signed).
struct WakeOpCode {
  int op;
  int cmp;
  int oparg;
  int cmparg;
};

int SignExtend12(uint32_t v) {
  return static_cast<int>(v << 20) >> 20;  // arithmetic shift
}

WakeOpCode Decode(uint32_t encoded) {
  WakeOpCode c;
  c.op = static_cast<int>((encoded >> 28) & 7);
  c.cmp = static_cast<int>((encoded >> 24) & 15);
  c.oparg = SignExtend12((encoded >> 12) & 0xfff);
  c.cmparg = SignExtend12(encoded & 0xfff);
  if (encoded & (static_cast<uint32_t>(FUTEX_OP_OPARG_SHIFT) << 28)) {
    // The kernel masks an out-of-range shift (and logs it).
    c.oparg = static_cast<int>(1u << (static_cast<unsigned>(c.oparg) & 31));
  }
  return c;
}

bool ValidWakeOp(const WakeOpCode& c) {
  return c.op >= FUTEX_OP_SET && c.op <= FUTEX_OP_XOR &&
         c.cmp >= FUTEX_OP_CMP_EQ && c.cmp <= FUTEX_OP_CMP_GE;
}

// FUTEX_WAKE_OP's new *uaddr2 from the old one.
uint32_t NewValue(int op, uint32_t old, int oparg) {
  const auto arg = static_cast<uint32_t>(oparg);
  switch (op) {
    case FUTEX_OP_SET:
      return arg;
    case FUTEX_OP_ADD:
      return old + arg;
    case FUTEX_OP_OR:
      return old | arg;
    case FUTEX_OP_ANDN:
      return old & ~arg;
    case FUTEX_OP_XOR:
      return old ^ arg;
  }
  return old;
}

bool Compare(int cmp, int oldval, int cmparg) {
  switch (cmp) {
    case FUTEX_OP_CMP_EQ:
      return oldval == cmparg;
    case FUTEX_OP_CMP_NE:
      return oldval != cmparg;
    case FUTEX_OP_CMP_LT:
      return oldval < cmparg;
    case FUTEX_OP_CMP_LE:
      return oldval <= cmparg;
    case FUTEX_OP_CMP_GT:
      return oldval > cmparg;
    case FUTEX_OP_CMP_GE:
      return oldval >= cmparg;
  }
  return false;
}

__attribute__((noinline)) bool WakeOp(long uaddr, int op, int nr_wake,
                                      int nr_wake2, long uaddr2,
                                      const WakeOpCode& code, long* result) {
  uint32_t* word2 = Word(uaddr2);
  // Writable? A compare-and-exchange is a write access whatever it finds,
  // and this one changes nothing (0 for 0, or no exchange). Outside the
  // locks, as in Wait.
  uint32_t old = 0;
  if (CasWord(word2, &old, old) < 0) return false;
  const size_t limit = WakeLimit(nr_wake);
  const size_t limit2 = WakeLimit(nr_wake2);
  bool cond = false;
  bool faulted = false;
  const PairResult r =
      UnparkPair(KeyOf(Word(uaddr)), KeyOf(word2), [&](PairPlan* plan) {
        // The atomic read-modify-write, as a compare-and-exchange loop (as
        // the kernel's for OR, ANDN and XOR).
        int c;
        do {  // on a difference `old` is the value found: again from it
          c = CasWord(word2, &old, NewValue(code.op, old, code.oparg));
        } while (c > 0);
        faulted = c < 0;
        if (faulted) return false;
        cond = Compare(code.cmp, static_cast<int>(old), code.cmparg);
        plan->unpark_from = limit;
        plan->unpark_to = cond ? limit2 : 0;
        return true;
      });
  if (faulted) return false;
  long total = static_cast<long>(r.unparked_from + r.unparked_to);
  const int wake = FUTEX_WAKE | (op & FUTEX_PRIVATE_FLAG);
  // The op is done whatever the kernel says, as in the kernel, whose wake
  // loops run after it and fail on a PI or requeue-PI waiter.
  if (r.unparked_from < limit) {
    total = AddForwarded(
        total, Forward(uaddr, wake, static_cast<long>(limit - r.unparked_from),
                       0, 0, 0));
  }
  if (cond && r.unparked_to < limit2 && total >= 0) {
    total = AddForwarded(
        total, Forward(uaddr2, wake, static_cast<long>(limit2 - r.unparked_to),
                       0, 0, 0));
  }
  *result = total;
  return true;
}

// ---------------------------------------------------------------------------
// PI operations on words the lot holds waiters on (futex_ops.h, PI rule).

pid_t (*g_current_tid)() = [] { return static_cast<pid_t>(gettid()); };

// Whether a served waiter is queued on `uaddr` now. Only for the rare PI
// calls: it registers the thread, as any unpark does.
bool HasServedWaiters(long uaddr) {
  if (!internal::LotInitialized()) return false;
  bool any = false;
  UnparkFilter(
      KeyOf(Word(uaddr)), [](ParkToken) { return FilterOp::kStop; },
      [&any](UnparkResult r) {
        any = r.have_more_threads;
        return kDefaultUnparkToken;
      });
  return any;
}

// A wait's timeout: false where the kernel fails the call on it (EFAULT:
// it reads the timespec before anything else; EINVAL: out of range).
__attribute__((noinline)) bool ReadTimeout(long utime, timespec* ts) {
  return TimespecAddressOk(utime) && ReadTimespec(utime, ts) &&
         ts->tv_sec >= 0 && ts->tv_nsec >= 0 && ts->tv_nsec < 1000000000;
}

// FUTEX_LOCK_PI, FUTEX_LOCK_PI2, FUTEX_TRYLOCK_PI, FUTEX_UNLOCK_PI: the
// kernel, finding a non-PI waiter on the word after its own checks,
// answers EINVAL (attach_to_pi_state; futex_unlock_pi). The lot's waiters
// are such waiters, which the kernel cannot see: EINVAL here, once every
// check the kernel makes before is passed; otherwise the kernel answers.
__attribute__((noinline)) bool PiOnServedWord(long uaddr, int cmd, long utime,
                                              long* result) {
  if (cmd == FUTEX_LOCK_PI || cmd == FUTEX_LOCK_PI2) {
    timespec ts;
    if (utime != 0 && !ReadTimeout(utime, &ts)) return false;
  }
  if (!HasServedWaiters(uaddr)) return false;
  uint32_t word;
  if (!ReadWord(Word(uaddr), &word)) return false;  // EFAULT
  const bool mine =
      (word & FUTEX_TID_MASK) == static_cast<uint32_t>(g_current_tid());
  // Locking: EDEADLK on a word this thread owns comes first. Unlocking:
  // EPERM unless it owns it.
  if (mine != (cmd == FUTEX_UNLOCK_PI)) return false;
  *result = -EINVAL;
  return true;
}

// FUTEX_CMP_REQUEUE_PI: past its argument checks and the compare, the
// kernel fails with EINVAL on a waiter on uaddr that is not a
// FUTEX_WAIT_REQUEUE_PI one (futex_proxy_trylock_atomic), as the lot's are.
__attribute__((noinline)) bool RequeuePiOnServedWord(long uaddr, long nr_wake,
                                                     long nr_requeue,
                                                     long uaddr2, long cmpval,
                                                     long* result) {
  if (static_cast<int>(nr_wake) != 1 || static_cast<int>(nr_requeue) < 0 ||
      uaddr == uaddr2 || !WordOk(uaddr2) || !HasServedWaiters(uaddr)) {
    return false;
  }
  uint32_t word;
  if (!ReadWord(Word(uaddr), &word) || word != static_cast<uint32_t>(cmpval)) {
    return false;  // EFAULT, EAGAIN
  }
  *result = -EINVAL;
  return true;
}

bool IsWake(int cmd) {
  return cmd == FUTEX_WAKE || cmd == FUTEX_WAKE_BITSET ||
         cmd == FUTEX_REQUEUE || cmd == FUTEX_CMP_REQUEUE ||
         cmd == FUTEX_WAKE_OP;
}

// The waiter's bitset of a FUTEX_WAIT or FUTEX_WAIT_BITSET the lot serves
// (private; FUTEX_CLOCK_REALTIME with FUTEX_WAIT_BITSET only, the kernel's
// ENOSYS on FUTEX_WAIT), else 0 (also the kernel's EINVAL for bitset 0).
[[gnu::always_inline]] inline uint32_t WaitBitset(int op, long val3) {
  if (op == (FUTEX_WAIT | FUTEX_PRIVATE_FLAG)) return FUTEX_BITSET_MATCH_ANY;
  if ((op & ~FUTEX_CLOCK_REALTIME) == (FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG)) {
    return static_cast<uint32_t>(val3);
  }
  return 0;
}

// Serves the call if it is one of ours with arguments the kernel accepts;
// returns false (and *result untouched) to send it to the kernel.
bool Serve(long uaddr, int op, long val, long utime, long uaddr2, long val3,
           long* result) {
  if ((op & FUTEX_PRIVATE_FLAG) == 0) return false;
  const int cmd = op & FUTEX_CMD_MASK;
  const bool realtime = (op & FUTEX_CLOCK_REALTIME) != 0;
  if (realtime && cmd != FUTEX_WAIT_BITSET && cmd != FUTEX_LOCK_PI2) {
    return false;  // the kernel: ENOSYS
  }
  if (!WordOk(uaddr)) return false;
  // The re-entry rule, checked by Wait itself past its first read.
  const bool wait = cmd == FUTEX_WAIT || cmd == FUTEX_WAIT_BITSET;
  if (!wait && !MayServe(IsWake(cmd))) return false;
  switch (cmd) {
    case FUTEX_WAIT:
    case FUTEX_WAIT_BITSET: {
      const uint32_t bitset = WaitBitset(op, val3);
      if (bitset == 0) return false;  // EINVAL
      timespec ts;
      const timespec* tsp = nullptr;
      if (utime != 0) {
        if (!ReadTimeout(utime, &ts)) return false;
        tsp = &ts;
      }
      return Wait(Word(uaddr), static_cast<uint32_t>(val), tsp,
                  cmd == FUTEX_WAIT, realtime, bitset, result);
    }
    case FUTEX_WAKE:
    case FUTEX_WAKE_BITSET: {
      const uint32_t bitset = cmd == FUTEX_WAKE ? FUTEX_BITSET_MATCH_ANY
                                                : static_cast<uint32_t>(val3);
      if (bitset == 0) return false;  // EINVAL
      *result = Wake(uaddr, op, static_cast<int>(val), bitset);
      return true;
    }
    case FUTEX_REQUEUE:
    case FUTEX_CMP_REQUEUE: {
      const int nr_wake = static_cast<int>(val);
      const int nr_requeue = static_cast<int>(utime);
      if (nr_wake < 0 || nr_requeue < 0 || !WordOk(uaddr2)) return false;
      const uint32_t cmpval = static_cast<uint32_t>(val3);
      return Requeue(uaddr, op, nr_wake, nr_requeue, uaddr2,
                     cmd == FUTEX_CMP_REQUEUE ? &cmpval : nullptr, result);
    }
    case FUTEX_WAKE_OP: {
      const WakeOpCode code = Decode(static_cast<uint32_t>(val3));
      if (!ValidWakeOp(code) || !WordOk(uaddr2)) return false;  // ENOSYS...
      return WakeOp(uaddr, op, static_cast<int>(val), static_cast<int>(utime),
                    uaddr2, code, result);
    }
    case FUTEX_LOCK_PI:
    case FUTEX_LOCK_PI2:
    case FUTEX_TRYLOCK_PI:
    case FUTEX_UNLOCK_PI:
      return PiOnServedWord(uaddr, cmd, utime, result);
    case FUTEX_CMP_REQUEUE_PI:
      return RequeuePiOnServedWord(uaddr, val, utime, uaddr2, val3, result);
    default:
      return false;
  }
}

// ---------------------------------------------------------------------------
// futex2 (futex_ops.h, futex2 rule). The words are the same private 32-bit
// futexes as SYS_futex's, with the same keys in the kernel, so a served
// call reuses the served ops above and forwards remainders as SYS_futex.

constexpr long kFutex2Private32 = 2 /* FUTEX2_SIZE_U32 */ | FUTEX_PRIVATE_FLAG;

int Futex2Index(long number) {
  switch (number) {
    case kSysFutexWaitv: return 0;
    case kSysFutexWake: return 1;
    case kSysFutexWait: return 2;
    case kSysFutexRequeue: return 3;
  }
  return -1;
}

// A 64-bit value the kernel requires to fit the 32-bit word (EINVAL).
bool Fits32(uint64_t v) { return v <= 0xffffffffu; }

// futex_wake(uaddr, mask, nr, flags).
bool ServeWake2(long uaddr, long mask, long nr, long flags, long* result) {
  const auto m = static_cast<uint64_t>(mask);
  // nr 0 wakes no one (FLAGS_STRICT): the kernel's own answer, 0 or its
  // error.
  if (flags != kFutex2Private32 || m == 0 || !Fits32(m) || !WordOk(uaddr) ||
      static_cast<int>(nr) == 0) {
    return false;
  }
  *result = Wake(uaddr, FUTEX_WAKE_BITSET | FUTEX_PRIVATE_FLAG,
                 static_cast<int>(nr), static_cast<uint32_t>(m));
  return true;
}

// futex_wait(uaddr, val, mask, flags, timeout, clockid): untimed only.
// A timed one is the kernel's: it restarts after an SA_RESTART handler
// (-ERESTARTSYS), where the lot's timed sleep would end with EINTR; served
// wakes reach it by the boundary rule.
bool ServeWait2(long uaddr, long val, long mask, long flags, long timeout,
                long* result) {
  const auto m = static_cast<uint64_t>(mask);
  if (flags != kFutex2Private32 || m == 0 || !Fits32(m) ||
      !Fits32(static_cast<uint64_t>(val)) || !WordOk(uaddr) || timeout != 0) {
    return false;
  }
  return Wait(Word(uaddr), static_cast<uint32_t>(val), nullptr, false, false,
              static_cast<uint32_t>(m), result);
}

// futex_requeue(waiters[2], flags, nr_wake, nr_requeue): FUTEX_CMP_REQUEUE
// from waiters[0].uaddr (compared with waiters[0].val) to waiters[1].uaddr.
bool ServeRequeue2(long waiters, long flags, long nr_wake, long nr_requeue,
                   long* result) {
  if (flags != 0 || static_cast<int>(nr_wake) < 0 ||
      static_cast<int>(nr_requeue) < 0 || waiters < 0 ||
      static_cast<uintptr_t>(waiters) < MinAddress()) {
    return false;
  }
  uint64_t w[6];  // {val, uaddr, flags | reserved << 32} twice
  for (int i = 0; i < 6; ++i) {
    if (parklot_user_load64(reinterpret_cast<const void*>(waiters + 8 * i),
                            &w[i]) != 0) {
      return false;  // EFAULT
    }
  }
  for (int i = 0; i < 2; ++i) {
    if (w[3 * i + 2] != static_cast<uint64_t>(kFutex2Private32) ||
        !Fits32(w[3 * i]) || !WordOk(static_cast<long>(w[3 * i + 1]))) {
      return false;
    }
  }
  const auto cmpval = static_cast<uint32_t>(w[0]);
  return Requeue(static_cast<long>(w[1]),
                 FUTEX_CMP_REQUEUE | FUTEX_PRIVATE_FLAG,
                 static_cast<int>(nr_wake), static_cast<int>(nr_requeue),
                 static_cast<long>(w[4]), &cmpval, result);
}

bool Serve2(long number, long a1, long a2, long a3, long a4, long a5,
            long* result) {
  if (number == kSysFutexWait) {
    return ServeWait2(a1, a2, a3, a4, a5, result);  // Wait: the re-entry rule
  }
  if (!MayServe(true)) return false;
  switch (number) {
    case kSysFutexWake:
      return ServeWake2(a1, a2, a3, a4, result);
    case kSysFutexRequeue:
      return ServeRequeue2(a1, a2, a3, a4, result);
  }
  return false;  // futex_waitv: the kernel's (many words; see futex_ops.h)
}

}  // namespace

bool IsFutex2(long number) { return Futex2Index(number) >= 0; }

long Futex2(long number, long a1, long a2, long a3, long a4, long a5,
            long a6) {
  long result;
  const int i = Futex2Index(number);
  if (Serve2(number, a1, a2, a3, a4, a5, &result)) {
    if (g_counting && i >= 0) g_served2[i].fetch_add(1, std::memory_order_relaxed);
    return result;
  }
  if (g_counting && i >= 0) g_kernel2[i].fetch_add(1, std::memory_order_relaxed);
  return RawSyscall6(number, a1, a2, a3, a4, a5, a6);
}

void SetCurrentTid(pid_t (*fn)()) { g_current_tid = fn; }

void Init() {
  int s = g_init_state.load(std::memory_order_acquire);
  if (s == 2) return;
  if (s != 0 || !g_init_state.compare_exchange_strong(s, 1)) {
    while (g_init_state.load(std::memory_order_acquire) != 2) sched_yield();
    return;
  }
  InstallFaultHandler();
  // The lowest address mmap may hand out; below it nothing is mapped.
  uintptr_t min = 4096;
  const int fd = open("/proc/sys/vm/mmap_min_addr", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char buf[32];
    const ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    uintptr_t v = 0;
    bool digits = n > 0;
    for (ssize_t i = 0; i < n && buf[i] != '\n'; ++i) {
      if (buf[i] < '0' || buf[i] > '9') {
        digits = false;
        break;
      }
      v = v * 10 + static_cast<uintptr_t>(buf[i] - '0');
    }
    if (digits && v > min) min = v;
  }
  g_min_address.store(min, std::memory_order_relaxed);
  g_init_state.store(2, std::memory_order_release);
}

namespace {

// Every call but Futex's early answer: served (Serve) or the kernel's.
__attribute__((noinline)) long ServeOrForward(long uaddr, long op, long val,
                                              long timeout_or_val2,
                                              long uaddr2, long val3) {
  const int iop = static_cast<int>(op);
  const int cmd = iop & FUTEX_CMD_MASK;
  long result;
  if (Serve(uaddr, iop, val, timeout_or_val2, uaddr2, val3, &result)) {
    Count(g_served, cmd);
    return result;
  }
  Count(g_kernel, cmd);
  return RawSyscall6(SYS_futex, uaddr, op, val, timeout_or_val2, uaddr2,
                     val3);
}

}  // namespace

long Futex(long uaddr, long op, long val, long timeout_or_val2, long uaddr2,
           long val3) {
  // op is an int in the kernel's prototype: the register's low half.
  const int iop = static_cast<int>(op);
  // An untimed served wait on a word that differs already: Wait's first
  // read and its EAGAIN, answered here, where no register needs saving
  // (everything else is out of line). A timed one reads its timeout first.
  uint32_t seen;
  if (timeout_or_val2 == 0 && WaitBitset(iop, val3) != 0 && WordOk(uaddr) &&
      ReadWord(Word(uaddr), &seen) && seen != static_cast<uint32_t>(val)) {
    Count(g_served, iop & FUTEX_CMD_MASK);
    return -EAGAIN;
  }
  return ServeOrForward(uaddr, op, val, timeout_or_val2, uaddr2, val3);
}

void EnableCounting() { g_counting = true; }

Counts GetCounts() {
  Counts c;
  for (int i = 0; i < kCommands; ++i) {
    c.served[i] = g_served[i].load(std::memory_order_relaxed);
    c.kernel[i] = g_kernel[i].load(std::memory_order_relaxed);
  }
  for (int i = 0; i < kFutex2Calls; ++i) {
    c.served2[i] = g_served2[i].load(std::memory_order_relaxed);
    c.kernel2[i] = g_kernel2[i].load(std::memory_order_relaxed);
  }
  c.forwarded = g_forwarded.load(std::memory_order_relaxed);
  c.forwarded_woken = g_forwarded_woken.load(std::memory_order_relaxed);
  return c;
}

const char* CommandName(int index) {
  static const char* const kNames[kCommands] = {
      "wait",          "wake",          "fd",           "requeue",
      "cmp_requeue",   "wake_op",       "lock_pi",      "unlock_pi",
      "trylock_pi",    "wait_bitset",   "wake_bitset",  "wait_requeue_pi",
      "cmp_requeue_pi", "lock_pi2",     "other"};
  return index >= 0 && index < kCommands ? kNames[index] : "?";
}

const char* Futex2Name(int index) {
  static const char* const kNames[kFutex2Calls] = {
      "futex_waitv", "futex_wake", "futex_wait", "futex_requeue"};
  return index >= 0 && index < kFutex2Calls ? kNames[index] : "?";
}

void FormatCounts(TextBuffer* out) {
  if (!g_counting) return;
  const Counts c = GetCounts();
  // Served commands, then every command for the kernel's side.
  static constexpr int kServed[] = {FUTEX_WAIT,        FUTEX_WAIT_BITSET,
                                    FUTEX_WAKE,        FUTEX_WAKE_BITSET,
                                    FUTEX_REQUEUE,     FUTEX_CMP_REQUEUE,
                                    FUTEX_WAKE_OP};
  out->Add("futex served by parklot:");
  for (int i : kServed) out->Add(" %s=%lu", CommandName(i), c.served[i]);
  for (int i = 1; i < kFutex2Calls; ++i) {  // futex_waitv is never served
    out->Add(" %s=%lu", Futex2Name(i), c.served2[i]);
  }
  out->Add("\nfutex passed to the kernel:");
  for (int i = 0; i < kCommands; ++i) {
    out->Add(" %s=%lu", CommandName(i), c.kernel[i]);
  }
  for (int i = 0; i < kFutex2Calls; ++i) {
    out->Add(" %s=%lu", Futex2Name(i), c.kernel2[i]);
  }
  out->Add("\nfutex wakes forwarded to the kernel: %lu calls, %lu threads\n",
           c.forwarded, c.forwarded_woken);
}

}  // namespace parklot::internal::futex
