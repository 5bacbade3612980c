#include "preload/futex_ops.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "hash/futex.h"
#include "runtime/deadline.h"
#include "runtime/parking_lot.h"
#include "runtime/thread_data.h"

namespace parklot::futex {
namespace {

// ---------------------------------------------------------------------------
// Counters (PARKLOT_STATS).

bool g_counting = false;
std::atomic<uint64_t> g_served[kCommands];
std::atomic<uint64_t> g_kernel[kCommands];
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

uintptr_t MinAddress() {
  uintptr_t m = g_min_address.load(std::memory_order_relaxed);
  if (m != 0) return m;
  Init();
  return g_min_address.load(std::memory_order_relaxed);
}

bool WordOk(long a) {
  const auto p = static_cast<uintptr_t>(a);
  return (p & 3) == 0 && p >= MinAddress() && p <= kUserTop - 4;
}

bool TimespecAddressOk(long a) {
  const auto p = static_cast<uintptr_t>(a);
  return p >= MinAddress() && p <= kUserTop - sizeof(timespec);
}

uint32_t Load(const uint32_t* word) {
  return __atomic_load_n(word, __ATOMIC_SEQ_CST);
}

// The kernel's wake loops stop after waking one once the count is reached,
// so 0 and negative counts wake one.
size_t WakeLimit(int nr) { return nr <= 0 ? 1 : static_cast<size_t>(nr); }

uint32_t* Word(long a) { return reinterpret_cast<uint32_t*>(a); }

// Inside a served call on this thread (a signal handler may re-enter).
__attribute__((tls_model("initial-exec"))) thread_local int t_depth = 0;

struct DepthScope {
  DepthScope() { ++t_depth; }
  ~DepthScope() { --t_depth; }
};

// Whether this thread is asleep in the parking lot, holding no bucket lock.
bool ParkedInLot() {
  ThreadData* td = CurrentThreadDataIfAny();
  return td != nullptr && registry::StateOf(td->slot) == ThreadState::kParked;
}

// ---------------------------------------------------------------------------
// The kernel's part of a served wake (the boundary rule, futex_ops.h).

long Forward(long uaddr, int op, long val, long val2, long uaddr2, long val3) {
  const long r = RawSyscall6(SYS_futex, uaddr, op, val, val2, uaddr2, val3);
  if (g_counting) {
    g_forwarded.fetch_add(1, std::memory_order_relaxed);
    if (r > 0) g_forwarded_woken.fetch_add(r, std::memory_order_relaxed);
  }
  return r > 0 ? r : 0;
}

// ---------------------------------------------------------------------------
// The served operations. Arguments are checked.

long Wait(uint32_t* uaddr, uint32_t val, const timespec* ts, bool relative,
          bool realtime, uint32_t bitset) {
  Deadline deadline = Deadline::Never();
  if (ts != nullptr) {
    if (relative) {
      // The kernel: an absolute CLOCK_MONOTONIC expiry taken at entry.
      deadline = Deadline::Monotonic(MonotonicNow() +
                                     absl::DurationFromTimespec(*ts));
    } else {
      deadline = Deadline::FromTimespec(
          *ts, realtime ? CLOCK_REALTIME : CLOCK_MONOTONIC);
    }
  }
  InterruptiblePark interruptible;
  const ParkResult r = Park(
      KeyOf(uaddr), [uaddr, val] { return Load(uaddr) == val; }, [] {},
      [](uintptr_t, bool) {}, static_cast<ParkToken>(bitset), deadline);
  switch (r.kind) {
    case ParkResult::kUnparked:
      return 0;
    case ParkResult::kInvalid:
      return -EAGAIN;
    case ParkResult::kTimedOut:
      return -ETIMEDOUT;
    case ParkResult::kInterrupted:
      return -EINTR;
  }
  return -EINTR;
}

long Wake(long uaddr, int op, int nr, uint32_t bitset) {
  const size_t limit = WakeLimit(nr);
  // Async-signal-safe, as the kernel's FUTEX_WAKE: from a handler that
  // interrupted this thread inside a lock section the lot's part is
  // deferred to the section's end and counts 0 here.
  const size_t woken =
      UnparkUpTo(KeyOf(Word(uaddr)), limit, static_cast<ParkToken>(bitset));
  long total = static_cast<long>(woken);
  if (woken < limit) {
    total += Forward(uaddr, op, static_cast<long>(limit - woken), 0, 0, bitset);
  }
  return total;
}

long Requeue(long uaddr, int op, int nr_wake, int nr_requeue, long uaddr2,
             const uint32_t* cmpval) {
  uint32_t* from = Word(uaddr);
  const PairResult r = UnparkPair(
      KeyOf(from), KeyOf(Word(uaddr2)), [&](PairPlan* plan) {
        if (cmpval != nullptr && Load(from) != *cmpval) return false;
        plan->unpark_from = static_cast<size_t>(nr_wake);
        plan->requeue = static_cast<size_t>(nr_requeue);
        return true;
      });
  if (r.aborted) return -EAGAIN;
  long total = static_cast<long>(r.unparked_from + r.requeued);
  const long wake_left = nr_wake - static_cast<long>(r.unparked_from);
  const long requeue_left = nr_requeue - static_cast<long>(r.requeued);
  if (wake_left > 0 || requeue_left > 0) {
    total += Forward(uaddr, op, wake_left, requeue_left, uaddr2,
                     cmpval != nullptr ? *cmpval : 0);
  }
  return total;
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

// The atomic read-modify-write of *uaddr2; returns the old value.
int ApplyOp(uint32_t* word, int op, int oparg) {
  const auto arg = static_cast<uint32_t>(oparg);
  uint32_t old = 0;
  switch (op) {
    case FUTEX_OP_SET:
      old = __atomic_exchange_n(word, arg, __ATOMIC_SEQ_CST);
      break;
    case FUTEX_OP_ADD:
      old = __atomic_fetch_add(word, arg, __ATOMIC_SEQ_CST);
      break;
    case FUTEX_OP_OR:
      old = __atomic_fetch_or(word, arg, __ATOMIC_SEQ_CST);
      break;
    case FUTEX_OP_ANDN:
      old = __atomic_fetch_and(word, ~arg, __ATOMIC_SEQ_CST);
      break;
    case FUTEX_OP_XOR:
      old = __atomic_fetch_xor(word, arg, __ATOMIC_SEQ_CST);
      break;
  }
  return static_cast<int>(old);
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

long WakeOp(long uaddr, int op, int nr_wake, int nr_wake2, long uaddr2,
            const WakeOpCode& code) {
  uint32_t* word2 = Word(uaddr2);
  const size_t limit = WakeLimit(nr_wake);
  const size_t limit2 = WakeLimit(nr_wake2);
  bool cond = false;
  const PairResult r =
      UnparkPair(KeyOf(Word(uaddr)), KeyOf(word2), [&](PairPlan* plan) {
        const int old = ApplyOp(word2, code.op, code.oparg);
        cond = Compare(code.cmp, old, code.cmparg);
        plan->unpark_from = limit;
        plan->unpark_to = cond ? limit2 : 0;
        return true;
      });
  long total = static_cast<long>(r.unparked_from + r.unparked_to);
  const int wake = FUTEX_WAKE | (op & FUTEX_PRIVATE_FLAG);
  if (r.unparked_from < limit) {
    total += Forward(uaddr, wake, static_cast<long>(limit - r.unparked_from),
                     0, 0, 0);
  }
  if (cond && r.unparked_to < limit2) {
    total += Forward(uaddr2, wake, static_cast<long>(limit2 - r.unparked_to),
                     0, 0, 0);
  }
  return total;
}

bool IsWake(int cmd) {
  return cmd == FUTEX_WAKE || cmd == FUTEX_WAKE_BITSET ||
         cmd == FUTEX_REQUEUE || cmd == FUTEX_CMP_REQUEUE ||
         cmd == FUTEX_WAKE_OP;
}

// Serves the call if it is one of ours with arguments the kernel accepts;
// returns false (and *result untouched) to send it to the kernel.
bool Serve(long uaddr, int op, long val, long utime, long uaddr2, long val3,
           long* result) {
  if ((op & FUTEX_PRIVATE_FLAG) == 0) return false;
  const int cmd = op & FUTEX_CMD_MASK;
  const bool realtime = (op & FUTEX_CLOCK_REALTIME) != 0;
  if (realtime && cmd != FUTEX_WAIT_BITSET) return false;  // the kernel: ENOSYS
  if (t_depth > 0 && !(IsWake(cmd) && ParkedInLot())) return false;
  if (!WordOk(uaddr)) return false;
  switch (cmd) {
    case FUTEX_WAIT:
    case FUTEX_WAIT_BITSET: {
      const uint32_t bitset = cmd == FUTEX_WAIT
                                  ? FUTEX_BITSET_MATCH_ANY
                                  : static_cast<uint32_t>(val3);
      if (bitset == 0) return false;  // EINVAL
      timespec ts;
      const timespec* tsp = nullptr;
      if (utime != 0) {
        if (!TimespecAddressOk(utime)) return false;  // EFAULT
        ts = *reinterpret_cast<const timespec*>(utime);
        if (ts.tv_sec < 0 || ts.tv_nsec < 0 || ts.tv_nsec >= 1000000000) {
          return false;  // EINVAL
        }
        tsp = &ts;
      }
      DepthScope depth;
      *result = Wait(Word(uaddr), static_cast<uint32_t>(val), tsp,
                     cmd == FUTEX_WAIT, realtime, bitset);
      return true;
    }
    case FUTEX_WAKE:
    case FUTEX_WAKE_BITSET: {
      const uint32_t bitset = cmd == FUTEX_WAKE ? FUTEX_BITSET_MATCH_ANY
                                                : static_cast<uint32_t>(val3);
      if (bitset == 0) return false;  // EINVAL
      DepthScope depth;
      *result = Wake(uaddr, op, static_cast<int>(val), bitset);
      return true;
    }
    case FUTEX_REQUEUE:
    case FUTEX_CMP_REQUEUE: {
      const int nr_wake = static_cast<int>(val);
      const int nr_requeue = static_cast<int>(utime);
      if (nr_wake < 0 || nr_requeue < 0 || !WordOk(uaddr2)) return false;
      const uint32_t cmpval = static_cast<uint32_t>(val3);
      DepthScope depth;
      *result = Requeue(uaddr, op, nr_wake, nr_requeue, uaddr2,
                        cmd == FUTEX_CMP_REQUEUE ? &cmpval : nullptr);
      return true;
    }
    case FUTEX_WAKE_OP: {
      const WakeOpCode code = Decode(static_cast<uint32_t>(val3));
      if (!ValidWakeOp(code) || !WordOk(uaddr2)) return false;  // ENOSYS...
      DepthScope depth;
      *result = WakeOp(uaddr, op, static_cast<int>(val),
                       static_cast<int>(utime), uaddr2, code);
      return true;
    }
    default:
      return false;
  }
}

}  // namespace

void Init() {
  if (g_min_address.load(std::memory_order_relaxed) != 0) return;
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
}

long Futex(long uaddr, long op, long val, long timeout_or_val2, long uaddr2,
           long val3) {
  // op is an int in the kernel's prototype: the register's low half.
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

void EnableCounting() { g_counting = true; }

Counts GetCounts() {
  Counts c;
  for (int i = 0; i < kCommands; ++i) {
    c.served[i] = g_served[i].load(std::memory_order_relaxed);
    c.kernel[i] = g_kernel[i].load(std::memory_order_relaxed);
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

std::string FormatCounts() {
  if (!g_counting) return "";
  const Counts c = GetCounts();
  // Served commands, then every command for the kernel's side.
  static constexpr int kServed[] = {FUTEX_WAIT,        FUTEX_WAIT_BITSET,
                                    FUTEX_WAKE,        FUTEX_WAKE_BITSET,
                                    FUTEX_REQUEUE,     FUTEX_CMP_REQUEUE,
                                    FUTEX_WAKE_OP};
  std::string out = "futex served by parklot:";
  for (int i : kServed) absl::StrAppend(&out, " ", CommandName(i), "=", c.served[i]);
  out += "\nfutex passed to the kernel:";
  for (int i = 0; i < kCommands; ++i) {
    absl::StrAppend(&out, " ", CommandName(i), "=", c.kernel[i]);
  }
  absl::StrAppend(&out, "\nfutex wakes forwarded to the kernel: ", c.forwarded,
                  " calls, ", c.forwarded_woken, " threads\n");
  return out;
}

}  // namespace parklot::futex
