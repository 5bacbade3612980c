// The kernel-semantics table: every served futex operation and flag
// combination, and the ones passed through, run once against the kernel
// (the raw `syscall` instruction) and once through the served path,
// asserting identical return values, errno, word values and wake counts.
//
// Built twice from this file:
//   futex_semantics_test   (PARKLOT_FUTEX_LIBRARY) the served path is
//                          parklot::futex::Futex, linked in: no LD_PRELOAD,
//                          so it also runs under --config=tsan/asan;
//   futex_semantics_prog   the served path is glibc's syscall(), run by
//                          futex_semantics_shim_test.sh under LD_PRELOAD of
//                          the shim with PARKLOT_SYSCALL_FUTEX=1.
// Each scenario is a function of the backend that returns a description of
// everything observable; the two descriptions must be equal.
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/futex/futex_test_util.h"
#include "tests/util/watchdog.h"

#ifdef PARKLOT_FUTEX_LIBRARY
#include "preload/futex_ops.h"
#endif

namespace parklot::futex_test {
namespace {

constexpr int P = FUTEX_PRIVATE_FLAG;
constexpr long kMatchAny = static_cast<long>(FUTEX_BITSET_MATCH_ANY);

#ifdef PARKLOT_FUTEX_LIBRARY
long ServedFutex(long uaddr, long op, long val, long utime, long uaddr2,
                 long val3) {
  return parklot::futex::Futex(uaddr, op, val, utime, uaddr2, val3);
}
constexpr const char* kServedName = "parklot::futex::Futex";
#else
long ServedFutex(long uaddr, long op, long val, long utime, long uaddr2,
                 long val3) {
  return SyscallFutex(uaddr, op, val, utime, uaddr2, val3);
}
constexpr const char* kServedName = "syscall() under the shim";
#endif

// Two futex words on separate cache lines, fresh for every run.
struct Words {
  alignas(64) uint32_t a = 0;
  alignas(64) uint32_t b = 0;
  alignas(64) uint32_t c = 0;
};

using Scenario = std::string (*)(FutexFn fn);

void ExpectSame(const char* name, Scenario s) {
  parklot::testing::Watchdog dog(absl::Seconds(60), name);
  const std::string kernel = s(KernelFutex);
  const std::string served = s(ServedFutex);
  EXPECT_EQ(kernel, served) << name << ": kernel vs " << kServedName;
  // The table as the kernel gave it (long rows cut short).
  printf("%-24s %s%s\n", name, kernel.substr(0, 400).c_str(),
         kernel.size() > 400 ? " ..." : "");
}

std::string R(long r) {
  if (r >= 0) return std::to_string(r);
  const char* n = strerrorname_np(static_cast<int>(-r));
  return n != nullptr ? n : absl::StrCat("errno", -r);
}

// ---------------------------------------------------------------------------
// Calls that return at once.

std::string ImmediateWaits(FutexFn f) {
  Words w;
  w.a = 1;
  std::string out;
  timespec zero = {0, 0}, ms1 = {0, 1000000}, bad_ns = {0, 1000000000},
           neg_s = {-1, 0}, neg_ns = {0, -1};
  auto add = [&](const char* what, long r) {
    absl::StrAppend(&out, what, "=", R(r), " ");
  };
  add("wait_mismatch", f(A(&w.a), FUTEX_WAIT | P, 0, 0, 0, 0));
  add("wait_shared_mismatch", f(A(&w.a), FUTEX_WAIT, 0, 0, 0, 0));
  add("wait_timeout0", f(A(&w.a), FUTEX_WAIT | P, 1, A(&zero), 0, 0));
  add("wait_timeout1ms", f(A(&w.a), FUTEX_WAIT | P, 1, A(&ms1), 0, 0));
  add("wait_bad_ns", f(A(&w.a), FUTEX_WAIT | P, 1, A(&bad_ns), 0, 0));
  add("wait_neg_s", f(A(&w.a), FUTEX_WAIT | P, 1, A(&neg_s), 0, 0));
  add("wait_neg_ns", f(A(&w.a), FUTEX_WAIT | P, 1, A(&neg_ns), 0, 0));
  add("wait_bad_ns_mismatch", f(A(&w.a), FUTEX_WAIT | P, 0, A(&bad_ns), 0, 0));
  add("wait_misaligned", f(A(&w.a) + 1, FUTEX_WAIT | P, 1, 0, 0, 0));
  add("wait_null", f(0, FUTEX_WAIT | P, 0, 0, 0, 0));
  add("wait_low", f(0x10, FUTEX_WAIT | P, 0, 0, 0, 0));
  add("wait_kernel_addr",
      f(static_cast<long>(0xffff800000001000ul), FUTEX_WAIT | P, 0, 0, 0, 0));
  add("wait_timeout_ptr_low", f(A(&w.a), FUTEX_WAIT | P, 1, 0x8, 0, 0));
  add("wait_realtime_flag",
      f(A(&w.a), FUTEX_WAIT | P | FUTEX_CLOCK_REALTIME, 0, 0, 0, 0));
  add("wait_realtime_flag_timeout",
      f(A(&w.a), FUTEX_WAIT | P | FUTEX_CLOCK_REALTIME, 1, A(&zero), 0, 0));
  add("bitset0", f(A(&w.a), FUTEX_WAIT_BITSET | P, 1, 0, 0, 0));
  add("bitset0_mismatch", f(A(&w.a), FUTEX_WAIT_BITSET | P, 0, 0, 0, 0));
  add("bitset_mismatch", f(A(&w.a), FUTEX_WAIT_BITSET | P, 0, 0, 0, kMatchAny));
  add("bitset_abs0_mono", f(A(&w.a), FUTEX_WAIT_BITSET | P, 1, A(&zero), 0, 1));
  add("bitset_abs0_real",
      f(A(&w.a), FUTEX_WAIT_BITSET | P | FUTEX_CLOCK_REALTIME, 1, A(&zero), 0,
        1));
  const timespec mono_past = TsFromNs(NowNs(CLOCK_MONOTONIC) - 1000000);
  const timespec real_past = TsFromNs(NowNs(CLOCK_REALTIME) - 1000000);
  add("bitset_past_mono",
      f(A(&w.a), FUTEX_WAIT_BITSET | P, 1, A(&mono_past), 0, kMatchAny));
  add("bitset_past_real",
      f(A(&w.a), FUTEX_WAIT_BITSET | P | FUTEX_CLOCK_REALTIME, 1,
        A(&real_past), 0, kMatchAny));
  const timespec mono_soon = TsFromNs(NowNs(CLOCK_MONOTONIC) + 3000000);
  add("bitset_soon_mono",
      f(A(&w.a), FUTEX_WAIT_BITSET | P, 1, A(&mono_soon), 0, 4));
  const timespec real_soon = TsFromNs(NowNs(CLOCK_REALTIME) + 3000000);
  add("bitset_soon_real",
      f(A(&w.a), FUTEX_WAIT_BITSET | P | FUTEX_CLOCK_REALTIME, 1,
        A(&real_soon), 0, 4));
  add("bitset_bad_ns", f(A(&w.a), FUTEX_WAIT_BITSET | P, 1, A(&bad_ns), 0, 1));
  add("word_after", w.a);
  return out;
}

std::string ImmediateWakes(FutexFn f) {
  Words w;
  std::string out;
  auto add = [&](const char* what, long r) {
    absl::StrAppend(&out, what, "=", R(r), " ");
  };
  add("wake1", f(A(&w.a), FUTEX_WAKE | P, 1, 0, 0, 0));
  add("wake0", f(A(&w.a), FUTEX_WAKE | P, 0, 0, 0, 0));
  add("wake_neg", f(A(&w.a), FUTEX_WAKE | P, -1, 0, 0, 0));
  add("wake_max", f(A(&w.a), FUTEX_WAKE | P, INT_MAX, 0, 0, 0));
  add("wake_shared", f(A(&w.a), FUTEX_WAKE, 1, 0, 0, 0));
  add("wake_misaligned", f(A(&w.a) + 2, FUTEX_WAKE | P, 1, 0, 0, 0));
  add("wake_null", f(0, FUTEX_WAKE | P, 1, 0, 0, 0));
  add("wake_kernel_addr",
      f(static_cast<long>(0xffff800000001000ul), FUTEX_WAKE | P, 1, 0, 0, 0));
  add("wake_realtime_flag",
      f(A(&w.a), FUTEX_WAKE | P | FUTEX_CLOCK_REALTIME, 1, 0, 0, 0));
  add("wake_bitset0", f(A(&w.a), FUTEX_WAKE_BITSET | P, 1, 0, 0, 0));
  add("wake_bitset", f(A(&w.a), FUTEX_WAKE_BITSET | P, 1, 0, 0, 3));
  add("requeue_neg_wake", f(A(&w.a), FUTEX_REQUEUE | P, -1, 1, A(&w.b), 0));
  add("requeue_neg_requeue", f(A(&w.a), FUTEX_REQUEUE | P, 1, -1, A(&w.b), 0));
  add("requeue_misaligned2",
      f(A(&w.a), FUTEX_REQUEUE | P, 1, 1, A(&w.b) + 1, 0));
  add("requeue_empty", f(A(&w.a), FUTEX_REQUEUE | P, 1, 1, A(&w.b), 0));
  add("cmp_requeue_mismatch",
      f(A(&w.a), FUTEX_CMP_REQUEUE | P, 1, 1, A(&w.b), 7));
  add("cmp_requeue_match", f(A(&w.a), FUTEX_CMP_REQUEUE | P, 1, 1, A(&w.b), 0));
  add("cmp_requeue_null2", f(A(&w.a), FUTEX_CMP_REQUEUE | P, 1, 1, 0, 0));
  add("cmd14", f(A(&w.a), 14 | P, 1, 0, 0, 0));
  add("cmd99", f(A(&w.a), 99 | P, 1, 0, 0, 0));
  add("futex_fd", f(A(&w.a), FUTEX_FD | P, 1, 0, 0, 0));
  add("wait_requeue_pi_same",
      f(A(&w.a), FUTEX_WAIT_REQUEUE_PI | P, 0, 0, A(&w.a), 0));
  // PI operations go to the kernel: lock, try again, unlock.
  add("lock_pi", f(A(&w.c), FUTEX_LOCK_PI | P, 0, 0, 0, 0));
  add("lock_pi_word_is_tid", w.c == static_cast<uint32_t>(Gettid()));
  add("trylock_pi_again", f(A(&w.c), FUTEX_TRYLOCK_PI | P, 0, 0, 0, 0));
  add("unlock_pi", f(A(&w.c), FUTEX_UNLOCK_PI | P, 0, 0, 0, 0));
  add("pi_word_after", w.c);
  add("unlock_pi_unowned", f(A(&w.c), FUTEX_UNLOCK_PI | P, 0, 0, 0, 0));
  add("words", w.a * 1000 + w.b);
  return out;
}

uint32_t Encode(int op, bool shift, int oparg, int cmp, int cmparg) {
  return (static_cast<uint32_t>(op | (shift ? FUTEX_OP_OPARG_SHIFT : 0))
          << 28) |
         (static_cast<uint32_t>(cmp & 15) << 24) |
         (static_cast<uint32_t>(oparg & 0xfff) << 12) |
         static_cast<uint32_t>(cmparg & 0xfff);
}

// Every op, cmp and shift encoding with several old values and arguments,
// no waiters: the return value and the new *uaddr2.
std::string WakeOpEncodings(FutexFn f) {
  std::string out;
  const uint32_t olds[] = {0, 5, 0xfffffff0u, 0x80000000u};
  const int opargs[] = {0, 3, -2, 2047, -2048, 31, 40};
  const int cmpargs[] = {0, 5, -16, 2047, -2048};
  for (int op = 0; op < 8; ++op) {
    for (int shift = 0; shift < 2; ++shift) {
      for (int cmp = 0; cmp < 8; ++cmp) {
        for (uint32_t old : olds) {
          for (int oparg : opargs) {
            for (int cmparg : cmpargs) {
              // Invalid ops and cmps once per op/cmp pair is enough.
              if ((op > 4 || cmp > 5) && (old != 5 || oparg != 3 || cmparg != 5)) {
                continue;
              }
              Words w;
              w.b = old;
              const long r = f(A(&w.a), FUTEX_WAKE_OP | P, 1, 1, A(&w.b),
                               Encode(op, shift, oparg, cmp, cmparg));
              absl::StrAppend(&out, R(r), ":", w.b, " ");
            }
          }
        }
      }
    }
  }
  // A cmp field of 15 and the top bits of oparg/cmparg.
  for (uint32_t enc : {0x0f000000u, 0x7fffffffu, 0x8fffffffu, 0xffffffffu,
                       0x40fff001u}) {
    Words w;
    w.b = 9;
    const long r = f(A(&w.a), FUTEX_WAKE_OP | P, 1, 1, A(&w.b), enc);
    absl::StrAppend(&out, R(r), ":", w.b, " ");
  }
  {
    Words w;
    absl::StrAppend(
        &out, "misaligned2=",
        R(f(A(&w.a), FUTEX_WAKE_OP | P, 1, 1, A(&w.b) + 1, Encode(0, 0, 1, 0, 0))),
        " null2=", R(f(A(&w.a), FUTEX_WAKE_OP | P, 1, 1, 0, Encode(0, 0, 1, 0, 0))),
        " shared=",
        R(f(A(&w.a), FUTEX_WAKE_OP, 1, 1, A(&w.b), Encode(1, 0, 1, 0, 0))),
        ":", w.b);
  }
  return out;
}

// ---------------------------------------------------------------------------
// Calls that wake or requeue sleeping threads.

std::string WakeCounts(FutexFn f) {
  Words w;
  Callers c(f);
  std::string out;
  for (int i = 0; i < 4; ++i) {
    if (!c.Start(A(&w.a), FUTEX_WAIT | P, 0, 0, 0, 0)) return "not blocked";
  }
  long r = f(A(&w.a), FUTEX_WAKE | P, 1, 0, 0, 0);
  absl::StrAppend(&out, "wake1=", R(r), " done=", c.SettleDone(1));
  r = f(A(&w.a), FUTEX_WAKE | P, 0, 0, 0, 0);
  absl::StrAppend(&out, " wake0=", R(r), " done=", c.SettleDone(2));
  r = f(A(&w.a), FUTEX_WAKE | P, -5, 0, 0, 0);
  absl::StrAppend(&out, " wake-5=", R(r), " done=", c.SettleDone(3));
  r = f(A(&w.a), FUTEX_WAKE | P, INT_MAX, 0, 0, 0);
  absl::StrAppend(&out, " wake_max=", R(r), " done=", c.SettleDone(4));
  r = f(A(&w.a), FUTEX_WAKE | P, INT_MAX, 0, 0, 0);
  absl::StrAppend(&out, " wake_none=", R(r), " results=", c.Results());
  return out;
}

// Wakes of more than the lot's serial maximum (32; the served wake goes
// out as a wake tree): counts, which waiters (FIFO, by bitset),
// the remainder.
std::string ManyWakes(FutexFn f) {
  Words w;
  Callers c(f);
  std::string out;
  for (int i = 0; i < 90; ++i) {
    if (!c.Start(A(&w.a), FUTEX_WAIT_BITSET | P, 0, 0, 0, i % 2 ? 2 : 1)) {
      return "not blocked";
    }
  }
  long r = f(A(&w.a), FUTEX_WAKE_BITSET | P, 40, 0, 0, 1);
  absl::StrAppend(&out, "bits1x40=", R(r), " ", (c.SettleDone(40), c.DoneSet()));
  r = f(A(&w.a), FUTEX_WAKE | P, 36, 0, 0, 0);
  absl::StrAppend(&out, " wake36=", R(r), " ", (c.SettleDone(76), c.DoneSet()));
  r = f(A(&w.a), FUTEX_WAKE | P, INT_MAX, 0, 0, 0);
  absl::StrAppend(&out, " wake_rest=", R(r), " results=", c.Results());
  return out;
}

std::string WakeBitsets(FutexFn f) {
  Words w;
  Callers c(f);
  std::string out;
  // Bitsets 1, 2, 3, 4, then a plain FUTEX_WAIT (all bits) and a timed
  // bitset wait.
  for (long bits : {1, 2, 3, 4}) {
    if (!c.Start(A(&w.a), FUTEX_WAIT_BITSET | P, 0, 0, 0, bits)) return "nb";
  }
  if (!c.Start(A(&w.a), FUTEX_WAIT | P, 0, 0, 0, 0)) return "nb";
  static const timespec far = TsFromNs(NowNs(CLOCK_MONOTONIC) + 60000000000);
  if (!c.Start(A(&w.a), FUTEX_WAIT_BITSET | P, 0, A(&far), 0, 8)) return "nb";
  long r = f(A(&w.a), FUTEX_WAKE_BITSET | P, INT_MAX, 0, 0, 2);
  absl::StrAppend(&out, "bits2=", R(r), " ", (c.SettleDone(3), c.DoneSet()));
  r = f(A(&w.a), FUTEX_WAKE_BITSET | P, 1, 0, 0, 0x10);
  absl::StrAppend(&out, " bits0x10=", R(r), " ", (c.SettleDone(3), c.DoneSet()));
  r = f(A(&w.a), FUTEX_WAKE_BITSET | P, 5, 0, 0, 1 | 8);
  absl::StrAppend(&out, " bits9=", R(r), " ", (c.SettleDone(5), c.DoneSet()));
  r = f(A(&w.a), FUTEX_WAKE | P, INT_MAX, 0, 0, 0);
  absl::StrAppend(&out, " wake_rest=", R(r), " results=", c.Results());
  return out;
}

std::string Requeues(FutexFn f) {
  Words w;
  Callers c(f);
  std::string out;
  for (long bits : {1, 2, 1, 2, 1}) {
    if (!c.Start(A(&w.a), FUTEX_WAIT_BITSET | P, 0, 0, 0, bits)) return "nb";
  }
  long r = f(A(&w.a), FUTEX_REQUEUE | P, 1, 2, A(&w.b), 0);
  absl::StrAppend(&out, "requeue1,2=", R(r), " ", (c.SettleDone(1), c.DoneSet()));
  r = f(A(&w.a), FUTEX_REQUEUE | P, 0, 0, A(&w.b), 0);
  absl::StrAppend(&out, " requeue0,0=", R(r));
  r = f(A(&w.a), FUTEX_CMP_REQUEUE | P, 1, 1, A(&w.b), 3);
  absl::StrAppend(&out, " cmp_mismatch=", R(r), " ", (c.SettleDone(1), c.DoneSet()));
  r = f(A(&w.a), FUTEX_CMP_REQUEUE | P, 0, INT_MAX, A(&w.b), 0);
  absl::StrAppend(&out, " cmp0,max=", R(r), " ", (c.SettleDone(1), c.DoneSet()));
  // On b now: waiters 2 and 3 (bitsets 2, 1), then 4 and 5 (2, 1): requeued
  // waiters keep their bitsets.
  r = f(A(&w.b), FUTEX_WAKE_BITSET | P, INT_MAX, 0, 0, 2);
  absl::StrAppend(&out, " b_bits2=", R(r), " ", (c.SettleDone(3), c.DoneSet()));
  r = f(A(&w.a), FUTEX_WAKE | P, INT_MAX, 0, 0, 0);
  absl::StrAppend(&out, " a_rest=", R(r));
  // Requeue onto the same word, then wake-and-requeue from b back to a.
  r = f(A(&w.b), FUTEX_REQUEUE | P, 0, INT_MAX, A(&w.b), 0);
  absl::StrAppend(&out, " b_to_b=", R(r), " ", (c.SettleDone(3), c.DoneSet()));
  r = f(A(&w.b), FUTEX_CMP_REQUEUE | P, 1, 5, A(&w.a), 0);
  absl::StrAppend(&out, " b_to_a=", R(r), " ", (c.SettleDone(4), c.DoneSet()));
  r = f(A(&w.a), FUTEX_WAKE | P, INT_MAX, 0, 0, 0);
  absl::StrAppend(&out, " a_all=", R(r), " results=", c.Results());
  return out;
}

// FUTEX_WAKE_OP with one waiter on each word, for every op and cmp (cond
// true and false), and with counts 0.
std::string WakeOpWaiters(FutexFn f) {
  std::string out;
  for (int op = 0; op < 5; ++op) {
    for (int cmp = 0; cmp < 6; ++cmp) {
      for (int cmparg : {1, 2}) {
        Words w;
        w.b = 1;
        Callers c(f);
        if (!c.Start(A(&w.a), FUTEX_WAIT | P, 0, 0, 0, 0) ||
            !c.Start(A(&w.b), FUTEX_WAIT | P, 1, 0, 0, 0)) {
          return "nb";
        }
        const long r = f(A(&w.a), FUTEX_WAKE_OP | P, 1, 1, A(&w.b),
                         Encode(op, cmp % 2 == 0, 1, cmp, cmparg));
        c.SettleDone(static_cast<size_t>(r > 0 ? r : 0));
        absl::StrAppend(&out, R(r), ":", w.b, ":", c.DoneSet());
        const long rest_a = f(A(&w.a), FUTEX_WAKE | P, INT_MAX, 0, 0, 0);
        const long rest_b = f(A(&w.b), FUTEX_WAKE | P, INT_MAX, 0, 0, 0);
        absl::StrAppend(&out, ":", rest_a, rest_b, ":", c.Results(), " ");
      }
    }
  }
  {
    // Counts 0 (and negative) wake one on each word; a == b.
    Words w;
    Callers c(f);
    for (int i = 0; i < 3; ++i) {
      if (!c.Start(A(&w.a), FUTEX_WAIT | P, 0, 0, 0, 0)) return "nb";
    }
    for (int i = 0; i < 3; ++i) {
      if (!c.Start(A(&w.b), FUTEX_WAIT | P, 0, 0, 0, 0)) return "nb";
    }
    long r = f(A(&w.a), FUTEX_WAKE_OP | P, 0, 0, A(&w.b),
               Encode(FUTEX_OP_ADD, false, 0, FUTEX_OP_CMP_EQ, 0));
    absl::StrAppend(&out, "zero_counts=", R(r), ":",
                    (c.SettleDone(2), c.DoneSet()));
    r = f(A(&w.a), FUTEX_WAKE_OP | P, -1, -7, A(&w.b),
          Encode(FUTEX_OP_ADD, false, 0, FUTEX_OP_CMP_NE, 0));
    absl::StrAppend(&out, " neg_counts=", R(r), ":",
                    (c.SettleDone(3), c.DoneSet()));
    r = f(A(&w.b), FUTEX_WAKE_OP | P, 1, 1, A(&w.b),
          Encode(FUTEX_OP_SET, false, 0, FUTEX_OP_CMP_EQ, 0));
    absl::StrAppend(&out, " same_word=", R(r), ":",
                    (c.SettleDone(5), c.DoneSet()));
    r = f(A(&w.a), FUTEX_WAKE | P, INT_MAX, 0, 0, 0);
    absl::StrAppend(&out, " rest=", R(r), " results=", c.Results());
  }
  return out;
}

// Timed waits that run out, both clocks, relative and absolute.
std::string Timeouts(FutexFn f) {
  Words w;
  std::string out;
  const int64_t kNs = 30000000;
  timespec rel = TsFromNs(kNs);
  int64_t t0 = NowNs(CLOCK_MONOTONIC);
  long r = f(A(&w.a), FUTEX_WAIT | P, 0, A(&rel), 0, 0);
  absl::StrAppend(&out, "relative=", R(r),
                  NowNs(CLOCK_MONOTONIC) - t0 >= kNs ? " late_enough" : " early");
  for (int realtime = 0; realtime < 2; ++realtime) {
    const clockid_t clock = realtime ? CLOCK_REALTIME : CLOCK_MONOTONIC;
    const timespec abs = TsFromNs(NowNs(clock) + kNs);
    r = f(A(&w.a), FUTEX_WAIT_BITSET | P | (realtime ? FUTEX_CLOCK_REALTIME : 0),
          0, A(&abs), 0, kMatchAny);
    absl::StrAppend(&out, realtime ? " realtime=" : " monotonic=", R(r),
                    NowNs(clock) >= int64_t{abs.tv_sec} * 1000000000 + abs.tv_nsec
                        ? " late_enough"
                        : " early");
  }
  // A timed waiter woken before its deadline returns 0.
  Callers c(f);
  static const timespec rel10s = {10, 0};
  if (!c.Start(A(&w.a), FUTEX_WAIT | P, 0, A(&rel10s), 0, 0)) return "nb";
  const timespec abs10s = TsFromNs(NowNs(CLOCK_REALTIME) + 10000000000);
  if (!c.Start(A(&w.a), FUTEX_WAIT_BITSET | P | FUTEX_CLOCK_REALTIME, 0,
               A(&abs10s), 0, kMatchAny)) {
    return "nb";
  }
  r = f(A(&w.a), FUTEX_WAKE | P, INT_MAX, 0, 0, 0);
  absl::StrAppend(&out, " woken=", R(r), " results=", c.Results());
  return out;
}

// ---------------------------------------------------------------------------
// Signals: EINTR after a handler, unless the kernel restarts the call
// (SA_RESTART and no timeout).

std::atomic<int> g_handled{0};
void Handler(int) { g_handled.fetch_add(1, std::memory_order_relaxed); }

void Install(int sig, bool restart) {
  struct sigaction sa = {};
  sa.sa_handler = Handler;
  sa.sa_flags = restart ? SA_RESTART : 0;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, nullptr);
}

// Starts a waiter with the given call, signals it, and reports whether the
// call returned (and with what) or kept waiting until woken.
std::string SignalCase(FutexFn f, bool restart, int op, const timespec* ts,
                       long val3) {
  Words w;
  Install(SIGUSR1, restart);
  Callers c(f);
  if (!c.Start(A(&w.a), op, 0, A(ts), 0, val3)) return "nb";
  const int before = g_handled.load();
  pthread_kill(c.handle(0), SIGUSR1);
  for (int i = 0; i < 5000 && g_handled.load() == before; ++i) SleepMs(1);
  const bool handled = g_handled.load() != before;
  // A call that the kernel ends returns at once after the handler; give it
  // 200 ms before calling it restarted.
  for (int i = 0; i < 200 && !c.done(0); ++i) SleepMs(1);
  const bool returned = c.done(0);
  // If it kept waiting, it must still be woken by a wake.
  const long r = f(A(&w.a), FUTEX_WAKE | P, INT_MAX, 0, 0, 0);
  return absl::StrCat(handled ? "handled" : "not-handled",
                      returned ? " returned" : " kept-waiting", " wake=", R(r),
                      " result=", R((c.JoinAll(), c.result(0))));
}

std::string Signals(FutexFn f) {
  // Deadlines for this run (a slow run, as under TSan, may take longer than
  // 30 s, and the served run comes after the kernel's).
  const timespec rel = {30, 0};
  const timespec abs_mono = TsFromNs(NowNs(CLOCK_MONOTONIC) + 30000000000);
  const timespec abs_real = TsFromNs(NowNs(CLOCK_REALTIME) + 30000000000);
  std::string out;
  for (int restart = 0; restart < 2; ++restart) {
    // One call per statement: argument evaluation order is unspecified.
    absl::StrAppend(&out, restart ? "SA_RESTART: " : "no SA_RESTART: ");
    absl::StrAppend(&out, "wait[",
                    SignalCase(f, restart, FUTEX_WAIT | P, nullptr, 0), "] ");
    absl::StrAppend(&out, "bitset[",
                    SignalCase(f, restart, FUTEX_WAIT_BITSET | P, nullptr, 6),
                    "] ");
    absl::StrAppend(&out, "wait_timed[",
                    SignalCase(f, restart, FUTEX_WAIT | P, &rel, 0), "] ");
    absl::StrAppend(&out, "bitset_mono[",
                    SignalCase(f, restart, FUTEX_WAIT_BITSET | P, &abs_mono, 6),
                    "] ");
    absl::StrAppend(&out, "bitset_real[",
                    SignalCase(f, restart,
                               FUTEX_WAIT_BITSET | P | FUTEX_CLOCK_REALTIME,
                               &abs_real, kMatchAny),
                    "] ");
  }
  // A signal the process ignores is never delivered.
  signal(SIGUSR2, SIG_IGN);
  Words w;
  Callers c(f);
  if (!c.Start(A(&w.a), FUTEX_WAIT | P, 0, 0, 0, 0)) return "nb";
  pthread_kill(c.handle(0), SIGUSR2);
  SleepMs(30);
  absl::StrAppend(&out, "ignored: ", c.done(0) ? "returned" : "kept-waiting");
  const long r = f(A(&w.a), FUTEX_WAKE | P, 1, 0, 0, 0);
  absl::StrAppend(&out, " wake=", R(r), " result=", c.Results());
  signal(SIGUSR1, SIG_DFL);
  return out;
}

// ---------------------------------------------------------------------------
// Bad memory: words and timespecs the kernel answers EFAULT for (or reads,
// or never touches), in every served operation. The kernel reads the
// timespec first (EFAULT before any EINVAL or ENOSYS), checks alignment
// before the address, reads *uaddr for the waits and FUTEX_CMP_REQUEUE,
// writes *uaddr2 for FUTEX_WAKE_OP (EFAULT on a read-only page), and never
// touches a private word to wake or requeue.

// Pages fresh for each run: a readable-writable one, a PROT_NONE one, a
// read-only one, an unmapped address, and shared and private mappings of a
// file truncated to nothing (SIGBUS on access).
struct BadPages {
  long pg = sysconf(_SC_PAGESIZE);
  char* base = nullptr;  // 3 pages: rw, PROT_NONE, read-only
  int fd = -1;
  void* trunc_shared = MAP_FAILED;
  void* trunc_private = MAP_FAILED;
  std::string error;  // why the layout could not be made

  BadPages() {
    base = static_cast<char*>(mmap(nullptr, 3 * pg, PROT_READ | PROT_WRITE,
                                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (base == MAP_FAILED) {
      base = nullptr;
      error = "mmap";
      return;
    }
    *ro() = 7;
    *ro_timeout() = timespec{0, 1000000};
    *straddle_timeout() = 0;
    if (mprotect(none(), pg, PROT_NONE) != 0 ||
        mprotect(ro(), pg, PROT_READ) != 0) {
      error = "mprotect";
    }
    // Below every mapping the kernel chooses itself, above mmap_min_addr.
    unsigned char vec;
    if (mincore(unmapped(), pg, &vec) == 0 || errno != ENOMEM) {
      error = "the unmapped page is mapped";
    }
    fd = memfd_create("futex_bad_pages", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, pg) != 0) {
      error = "memfd";
      return;
    }
    trunc_shared = mmap(nullptr, pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    trunc_private =
        mmap(nullptr, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (trunc_shared == MAP_FAILED || trunc_private == MAP_FAILED ||
        ftruncate(fd, 0) != 0) {
      error = "file mapping";
    }
  }
  ~BadPages() {
    if (base != nullptr) munmap(base, 3 * pg);
    if (trunc_shared != MAP_FAILED) munmap(trunc_shared, pg);
    if (trunc_private != MAP_FAILED) munmap(trunc_private, pg);
    if (fd >= 0) close(fd);
  }

  uint32_t* ok() const { return reinterpret_cast<uint32_t*>(base); }
  uint32_t* ok2() const { return reinterpret_cast<uint32_t*>(base + 64); }
  // A valid timespec at an odd address.
  void* odd_timeout() const { return base + 129; }
  // Its first half on the rw page, the second on the PROT_NONE page.
  uint64_t* straddle_timeout() const {
    return reinterpret_cast<uint64_t*>(base + pg - 8);
  }
  char* none() const { return base + pg; }
  uint32_t* ro() const { return reinterpret_cast<uint32_t*>(base + 2 * pg); }
  timespec* ro_timeout() const {
    return reinterpret_cast<timespec*>(base + 2 * pg + 16);
  }
  static char* unmapped() { return reinterpret_cast<char*>(0x100000); }
};

std::string BadMemoryCalls(FutexFn f) {
  BadPages m;
  if (!m.error.empty()) return "setup failed: " + m.error;
  const timespec odd = {0, 1000000};
  memcpy(m.odd_timeout(), &odd, sizeof odd);  // misaligned: no typed store
  std::string out;
  auto add = [&](const char* what, long r) {
    absl::StrAppend(&out, what, "=", R(r), " ");
  };
  const long ok = A(m.ok()), ok2 = A(m.ok2()), none = A(m.none()),
             ro = A(m.ro()), unm = A(BadPages::unmapped()),
             tsh = A(m.trunc_shared), tpr = A(m.trunc_private);
  static const timespec ms1 = {0, 1000000}, bad_ns = {0, 1000000000};
  const long T = A(&ms1);
  const timespec soon = TsFromNs(NowNs(CLOCK_MONOTONIC) + 1000000);
  const long abs_t = A(&soon);
  struct Word {
    const char* name;
    long addr;
  };
  const Word bad_words[] = {{"unmapped", unm},       {"prot_none", none},
                            {"trunc_shared", tsh},   {"trunc_private", tpr},
                            {"unmapped+1", unm + 1}, {"prot_none+2", none + 2}};
  const Word bad_timeouts[] = {{"unmapped", unm},
                               {"prot_none", none},
                               {"trunc_shared", tsh},
                               {"straddling", A(m.straddle_timeout())}};

  // The waits: a bad word, with and without a timeout.
  for (const Word& w : bad_words) {
    for (int bitset = 0; bitset < 2; ++bitset) {
      const int op = (bitset ? FUTEX_WAIT_BITSET : FUTEX_WAIT) | P;
      absl::StrAppend(&out, bitset ? "wait_bitset" : "wait", "(", w.name, ")[");
      add("untimed", f(w.addr, op, 0, 0, 0, kMatchAny));
      add("timed", f(w.addr, op, 0, bitset ? abs_t : T, 0, kMatchAny));
      add("bitset0", f(w.addr, FUTEX_WAIT_BITSET | P, 0, 0, 0, 0));
      add("bad_ns", f(w.addr, op, 0, A(&bad_ns), 0, kMatchAny));
      add("realtime", f(w.addr, op | FUTEX_CLOCK_REALTIME, 0, 0, 0, kMatchAny));
      add("shared", f(w.addr, bitset ? FUTEX_WAIT_BITSET : FUTEX_WAIT, 0, 0, 0,
                      kMatchAny));
      out += "] ";
    }
  }
  // A read-only word is readable.
  add("wait(ro,match)", f(ro, FUTEX_WAIT | P, 7, T, 0, 0));
  add("wait(ro,mismatch)", f(ro, FUTEX_WAIT | P, 0, T, 0, 0));
  add("wait_bitset(ro,match)", f(ro, FUTEX_WAIT_BITSET | P, 7, abs_t, 0, 3));
  // A bad timespec: EFAULT before the word, the bitset and the command are
  // looked at.
  for (const Word& t : bad_timeouts) {
    absl::StrAppend(&out, "timeout(", t.name, ")[");
    add("wait", f(ok, FUTEX_WAIT | P, 0, t.addr, 0, 0));
    add("wait_mismatch", f(ok, FUTEX_WAIT | P, 1, t.addr, 0, 0));
    add("wait_bitset", f(ok, FUTEX_WAIT_BITSET | P, 0, t.addr, 0, kMatchAny));
    add("wait_bitset_rt", f(ok, FUTEX_WAIT_BITSET | P | FUTEX_CLOCK_REALTIME,
                            0, t.addr, 0, kMatchAny));
    add("bad_word", f(none, FUTEX_WAIT | P, 0, t.addr, 0, 0));
    add("misaligned_word", f(ok + 1, FUTEX_WAIT | P, 0, t.addr, 0, 0));
    add("bitset0", f(ok, FUTEX_WAIT_BITSET | P, 0, t.addr, 0, 0));
    add("wait_realtime", f(ok, FUTEX_WAIT | P | FUTEX_CLOCK_REALTIME, 0,
                           t.addr, 0, 0));
    // Commands without a timeout ignore the argument.
    add("wake", f(ok, FUTEX_WAKE | P, 1, t.addr, 0, 0));
    out += "] ";
  }
  // Readable timespecs in odd places.
  add("timeout(ro)", f(ok, FUTEX_WAIT | P, 0, A(m.ro_timeout()), 0, 0));
  add("timeout(odd)", f(ok, FUTEX_WAIT | P, 0, A(m.odd_timeout()), 0, 0));

  // Wakes and requeues never touch a private word.
  for (const Word& w : bad_words) {
    absl::StrAppend(&out, "wake(", w.name, ")[");
    add("wake", f(w.addr, FUTEX_WAKE | P, 1, 0, 0, 0));
    add("wake_bitset", f(w.addr, FUTEX_WAKE_BITSET | P, 1, 0, 0, 5));
    add("wake_bitset0", f(w.addr, FUTEX_WAKE_BITSET | P, 1, 0, 0, 0));
    add("requeue_from", f(w.addr, FUTEX_REQUEUE | P, 1, 1, ok2, 0));
    add("requeue_to", f(ok, FUTEX_REQUEUE | P, 1, 1, w.addr, 0));
    add("requeue_neg", f(w.addr, FUTEX_REQUEUE | P, -1, 1, ok2, 0));
    out += "] ";
  }
  add("wake(ro)", f(ro, FUTEX_WAKE | P, 1, 0, 0, 0));

  // FUTEX_CMP_REQUEUE reads *uaddr, never *uaddr2.
  for (const Word& w : bad_words) {
    absl::StrAppend(&out, "cmp_requeue(", w.name, ")[");
    add("from", f(w.addr, FUTEX_CMP_REQUEUE | P, 1, 1, ok2, 0));
    add("from_mismatch", f(w.addr, FUTEX_CMP_REQUEUE | P, 1, 1, ok2, 5));
    add("from_neg", f(w.addr, FUTEX_CMP_REQUEUE | P, 1, -1, ok2, 0));
    add("from_misaligned_to", f(w.addr, FUTEX_CMP_REQUEUE | P, 1, 1, ok2 + 2, 0));
    add("to", f(ok, FUTEX_CMP_REQUEUE | P, 1, 1, w.addr, 0));
    add("to_mismatch", f(ok, FUTEX_CMP_REQUEUE | P, 1, 1, w.addr, 5));
    add("both", f(w.addr, FUTEX_CMP_REQUEUE | P, 1, 1, w.addr, 0));
    out += "] ";
  }
  add("cmp_requeue(ro,match)", f(ro, FUTEX_CMP_REQUEUE | P, 1, 1, ok2, 7));
  add("cmp_requeue(ro,mismatch)", f(ro, FUTEX_CMP_REQUEUE | P, 1, 1, ok2, 0));

  // FUTEX_WAKE_OP writes *uaddr2: a read-only page faults too; *uaddr is
  // never touched.
  const uint32_t add1 = Encode(FUTEX_OP_ADD, false, 1, FUTEX_OP_CMP_EQ, 0);
  const Word bad_words2[] = {{"unmapped", unm},         {"prot_none", none},
                             {"read_only", ro},         {"trunc_shared", tsh},
                             {"trunc_private", tpr},    {"unmapped+1", unm + 1},
                             {"read_only+2", ro + 2}};
  for (const Word& w : bad_words2) {
    absl::StrAppend(&out, "wake_op(", w.name, ")[");
    add("word2", f(ok, FUTEX_WAKE_OP | P, 1, 1, w.addr, add1));
    add("both", f(w.addr, FUTEX_WAKE_OP | P, 1, 1, w.addr, add1));
    add("bad_op", f(ok, FUTEX_WAKE_OP | P, 1, 1, w.addr,
                    Encode(7, false, 1, FUTEX_OP_CMP_EQ, 0)));
    add("bad_cmp", f(ok, FUTEX_WAKE_OP | P, 1, 1, w.addr,
                     Encode(FUTEX_OP_SET, false, 1, 9, 0)));
    add("misaligned_word1", f(ok + 1, FUTEX_WAKE_OP | P, 1, 1, w.addr, add1));
    add("word1", f(w.addr, FUTEX_WAKE_OP | P, 1, 1, ok2, add1));
    out += "] ";
  }
  absl::StrAppend(&out, "ro_word=", *m.ro(), " ok2=", *m.ok2(),
                  " ok=", *m.ok());
  return out;
}

// Waiters on a word whose page then becomes inaccessible: the calls that
// read or write it fail with EFAULT and wake nobody; wakes still reach them.
std::string BadMemoryWithWaiters(FutexFn f) {
  BadPages m;
  if (!m.error.empty()) return "setup failed: " + m.error;
  // The words: one on the page that will be PROT_NONE, one that stays.
  if (mprotect(m.none(), m.pg, PROT_READ | PROT_WRITE) != 0) return "mprotect";
  uint32_t* word = reinterpret_cast<uint32_t*>(m.none());
  uint32_t* other = m.ok();
  *word = 0;
  std::string out;
  Callers c(f);
  for (int i = 0; i < 2; ++i) {
    if (!c.Start(A(word), FUTEX_WAIT | P, 0, 0, 0, 0)) return "nb";
  }
  if (!c.Start(A(other), FUTEX_WAIT | P, 0, 0, 0, 0)) return "nb";
  if (mprotect(m.none(), m.pg, PROT_NONE) != 0) return "mprotect";
  long r = f(A(word), FUTEX_CMP_REQUEUE | P, 1, 1, A(other), 0);
  absl::StrAppend(&out, "cmp_requeue=", R(r));
  r = f(A(other), FUTEX_WAKE_OP | P, 1, 1, A(word),
        Encode(FUTEX_OP_SET, false, 1, FUTEX_OP_CMP_EQ, 0));
  absl::StrAppend(&out, " wake_op=", R(r));
  timespec ms1 = {0, 1000000};
  r = f(A(word), FUTEX_WAIT | P, 0, A(&ms1), 0, 0);
  absl::StrAppend(&out, " wait=", R(r), " ", (c.SettleDone(0), c.DoneSet()));
  r = f(A(word), FUTEX_REQUEUE | P, 1, 1, A(other), 0);
  absl::StrAppend(&out, " requeue=", R(r), " ", (c.SettleDone(1), c.DoneSet()));
  r = f(A(other), FUTEX_WAKE | P, INT_MAX, 0, 0, 0);
  absl::StrAppend(&out, " wake_other=", R(r), " results=", c.Results());
  return out;
}

TEST(FutexSemantics, BackendIsTheServedOne) {
#ifndef PARKLOT_FUTEX_LIBRARY
  ASSERT_TRUE(ShimLoaded()) << "run under LD_PRELOAD of the shim";
  const char* v = getenv("PARKLOT_SYSCALL_FUTEX");
  ASSERT_TRUE(v != nullptr && v[0] == '1') << "PARKLOT_SYSCALL_FUTEX=1 unset";
#endif
}

TEST(FutexSemantics, ImmediateWaits) { ExpectSame("immediate waits", ImmediateWaits); }
TEST(FutexSemantics, ImmediateWakes) { ExpectSame("immediate wakes", ImmediateWakes); }
TEST(FutexSemantics, WakeOpEncodings) { ExpectSame("wake_op encodings", WakeOpEncodings); }
TEST(FutexSemantics, WakeCounts) { ExpectSame("wake counts", WakeCounts); }
TEST(FutexSemantics, WakeBitsets) { ExpectSame("wake bitsets", WakeBitsets); }
TEST(FutexSemantics, ManyWakes) { ExpectSame("many wakes", ManyWakes); }
TEST(FutexSemantics, Requeues) { ExpectSame("requeues", Requeues); }
TEST(FutexSemantics, WakeOpWaiters) { ExpectSame("wake_op with waiters", WakeOpWaiters); }
TEST(FutexSemantics, Timeouts) { ExpectSame("timeouts", Timeouts); }
TEST(FutexSemantics, Signals) { ExpectSame("signals", Signals); }
TEST(FutexSemantics, BadMemory) { ExpectSame("bad memory", BadMemoryCalls); }
TEST(FutexSemantics, BadMemoryWithWaiters) {
  ExpectSame("bad memory, waiters", BadMemoryWithWaiters);
}

// ---------------------------------------------------------------------------
// SIGSEGV and SIGBUS: the served calls' faults never reach the program, and
// the program's own faults reach it as they would without the shim.

// How a child that makes one bad access (or is sent the signal) ends:
// "signal N", or "exit N" if it survived or a sanitizer's own handler
// (which the shim's runs, as it was the action before) reported the fault.
std::string ChildEnd(void (*child)(const BadPages&), const BadPages& m) {
  fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    child(m);
    RawSyscall6(SYS_exit_group, 0, 0, 0, 0, 0, 0);
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid) return "fork failed";
  return WIFSIGNALED(st) ? absl::StrCat("signal ", WTERMSIG(st))
                         : absl::StrCat("exit ", WEXITSTATUS(st));
}

// Whether a sanitizer's runtime is in the process: linked in (the
// in-process test under --config=asan/tsan), or preloaded ahead of the shim
// into this program, which is built without sanitizers (//:sanitizers.bzl).
// Its SIGSEGV/SIGBUS handler ends the process its own way.
bool SanitizerRuntimeLoaded() {
  return dlsym(RTLD_DEFAULT, "__asan_init") != nullptr ||
         dlsym(RTLD_DEFAULT, "__tsan_init") != nullptr;
}
#define EXPECT_ENDED_BY(sig, end)                                   \
  do {                                                              \
    const std::string end_ = (end);                                 \
    if (SanitizerRuntimeLoaded()) {                                 \
      EXPECT_NE(end_, "exit 0");                                    \
    } else {                                                        \
      EXPECT_EQ(end_, absl::StrCat("signal ", sig));                \
    }                                                               \
  } while (0)

TEST(FaultSignals, ProgramFaultsStillEndIt) {
  parklot::testing::Watchdog dog(absl::Seconds(60), "program faults");
  BadPages m;
  ASSERT_EQ(m.error, "");
  // The served path is set up (its handler installed).
  EXPECT_EQ(ServedFutex(A(m.none()), FUTEX_WAIT | P, 0, 0, 0, 0), -EFAULT);
  EXPECT_ENDED_BY(SIGSEGV, ChildEnd([](const BadPages& b) {
                    (void)*reinterpret_cast<volatile uint32_t*>(b.none());
                  }, m));
  EXPECT_ENDED_BY(SIGSEGV, ChildEnd([](const BadPages& b) {
                    *reinterpret_cast<volatile uint32_t*>(b.ro()) = 1;
                  }, m));
  EXPECT_ENDED_BY(SIGSEGV, ChildEnd([](const BadPages&) {
                    (void)*reinterpret_cast<volatile uint32_t*>(
                        BadPages::unmapped());
                  }, m));
  EXPECT_ENDED_BY(SIGBUS, ChildEnd([](const BadPages& b) {
                    (void)*static_cast<volatile uint32_t*>(b.trunc_shared);
                  }, m));
  EXPECT_ENDED_BY(SIGSEGV,
                  ChildEnd([](const BadPages&) { raise(SIGSEGV); }, m));
  EXPECT_ENDED_BY(SIGBUS, ChildEnd([](const BadPages&) { raise(SIGBUS); }, m));
  // A signal the program ignores stays ignored when sent, and a fault
  // still ends it.
  EXPECT_EQ(ChildEnd([](const BadPages& b) {
              signal(SIGSEGV, SIG_IGN);
              raise(SIGSEGV);
              (void)*reinterpret_cast<volatile uint32_t*>(b.none());
            }, m), "signal 11");
}

#ifndef PARKLOT_FUTEX_LIBRARY
sigjmp_buf g_fault_jmp;
std::atomic<int> g_faults{0};
void* g_fault_addr = nullptr;
int g_fault_code = 0;
void ProgramFaultHandler(int sig, siginfo_t* info, void*) {
  g_faults.fetch_add(1);
  g_fault_addr = info->si_addr;
  g_fault_code = info->si_code;
  siglongjmp(g_fault_jmp, sig);
}
void ProgramPlainHandler(int) {}
#endif

// The program resets SIGSEGV and SIGBUS to the default (as a child about to
// crash on purpose does) or installs its own handler: served calls on bad
// memory still return EFAULT, the program sees its own actions, and its own
// faults run its handler.
TEST(FaultSignals, ProgramActions) {
#ifdef PARKLOT_FUTEX_LIBRARY
  GTEST_SKIP() << "the program's actions are tracked by the shim's sigaction "
                  "and signal (futex_shim.cc); linked in, nothing is interposed";
#else
  parklot::testing::Watchdog dog(absl::Seconds(60), "program actions");
  BadPages m;
  ASSERT_EQ(m.error, "");
  auto bad_calls = [&m] {
    std::string out;
    absl::StrAppend(
        &out, R(ServedFutex(A(m.none()), FUTEX_WAIT | P, 0, 0, 0, 0)), " ",
        R(ServedFutex(A(m.trunc_shared), FUTEX_WAIT_BITSET | P, 0, 0, 0, 1)), " ",
        R(ServedFutex(A(m.ok()), FUTEX_WAKE_OP | P, 1, 1, A(m.ro()),
                      Encode(FUTEX_OP_ADD, false, 1, FUTEX_OP_CMP_EQ, 0))), " ",
        R(ServedFutex(A(BadPages::unmapped()), FUTEX_CMP_REQUEUE | P, 1, 1,
                      A(m.ok()), 0)), " ",
        R(ServedFutex(A(m.ok()), FUTEX_WAIT | P, 0, A(m.none()), 0, 0)));
    return out;
  };
  const std::string efault = "EFAULT EFAULT EFAULT EFAULT EFAULT";
  struct sigaction saved_segv, saved_bus;
  ASSERT_EQ(sigaction(SIGSEGV, nullptr, &saved_segv), 0);
  ASSERT_EQ(sigaction(SIGBUS, nullptr, &saved_bus), 0);

  // Defaults, set with signal().
  EXPECT_NE(signal(SIGSEGV, SIG_DFL), SIG_ERR);
  EXPECT_NE(signal(SIGBUS, SIG_DFL), SIG_ERR);
  EXPECT_EQ(bad_calls(), efault);
  EXPECT_EQ(signal(SIGSEGV, ProgramPlainHandler), SIG_DFL);
  EXPECT_EQ(signal(SIGSEGV, SIG_DFL), ProgramPlainHandler);
  struct sigaction now;
  ASSERT_EQ(sigaction(SIGSEGV, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_DFL);

  // The program's own handler, with sigaction().
  struct sigaction sa = {};
  sa.sa_sigaction = ProgramFaultHandler;
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGUSR2);
  ASSERT_EQ(sigaction(SIGSEGV, &sa, nullptr), 0);
  sa.sa_flags = SA_SIGINFO;
  ASSERT_EQ(sigaction(SIGBUS, &sa, nullptr), 0);
  EXPECT_EQ(bad_calls(), efault);
  EXPECT_EQ(g_faults.load(), 0);
  ASSERT_EQ(sigaction(SIGSEGV, nullptr, &now), 0);
  EXPECT_EQ(now.sa_sigaction, ProgramFaultHandler);
  EXPECT_EQ(now.sa_flags & (SA_SIGINFO | SA_RESETHAND), SA_SIGINFO | SA_RESETHAND);
  EXPECT_TRUE(sigismember(&now.sa_mask, SIGUSR2));
  // Its own faults run it (and SA_RESETHAND resets SIGSEGV's action).
  int sig = sigsetjmp(g_fault_jmp, 1);
  if (sig == 0) (void)*reinterpret_cast<volatile uint32_t*>(m.none());
  EXPECT_EQ(sig, SIGSEGV);
  EXPECT_EQ(g_fault_addr, m.none());
  EXPECT_EQ(g_fault_code, SEGV_ACCERR);
  sig = sigsetjmp(g_fault_jmp, 1);
  if (sig == 0) (void)*static_cast<volatile uint32_t*>(m.trunc_private);
  EXPECT_EQ(sig, SIGBUS);
  EXPECT_EQ(g_faults.load(), 2);
  ASSERT_EQ(sigaction(SIGSEGV, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
  EXPECT_EQ(bad_calls(), efault);
  EXPECT_EQ(g_faults.load(), 2);

  // The other setters glibc has (each sets the action through glibc's
  // internal sigaction, so each is the shim's for these two signals).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  EXPECT_EQ(sysv_signal(SIGSEGV, ProgramPlainHandler), SIG_DFL);
  ASSERT_EQ(sigaction(SIGSEGV, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, ProgramPlainHandler);
  EXPECT_EQ(now.sa_flags & (SA_RESETHAND | SA_NODEFER | SA_RESTART),
            SA_RESETHAND | SA_NODEFER);
  EXPECT_EQ(ssignal(SIGSEGV, SIG_DFL), ProgramPlainHandler);
  EXPECT_EQ(sigignore(SIGBUS), 0);
  EXPECT_EQ(sigset(SIGBUS, SIG_DFL), SIG_IGN);
  EXPECT_EQ(sigset(SIGBUS, SIG_HOLD), SIG_DFL);
  EXPECT_EQ(sigset(SIGBUS, SIG_DFL), SIG_HOLD);
#pragma GCC diagnostic pop
  ASSERT_EQ(sigaction(SIGBUS, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
  EXPECT_EQ(bad_calls(), efault);

  ASSERT_EQ(sigaction(SIGSEGV, &saved_segv, nullptr), 0);
  ASSERT_EQ(sigaction(SIGBUS, &saved_bus, nullptr), 0);
#endif
}

// The boundary rule (futex_ops.h, rule 2): a served wake reaches a waiter
// that went to the kernel directly, after the lot's own waiters.
TEST(FutexBoundary, ServedWakesReachKernelWaiters) {
  parklot::testing::Watchdog dog(absl::Seconds(60), "boundary");
  Words w;
  Callers kernel(KernelFutex);
  Callers served(ServedFutex);
  ASSERT_TRUE(kernel.Start(A(&w.a), FUTEX_WAIT | P, 0, 0, 0, 0));
  ASSERT_TRUE(served.Start(A(&w.a), FUTEX_WAIT | P, 0, 0, 0, 0));
  ASSERT_TRUE(kernel.Start(A(&w.a), FUTEX_WAIT_BITSET | P, 0, 0, 0, 1));
  // One wake: the lot's waiter; the next two: the kernel's.
  EXPECT_EQ(ServedFutex(A(&w.a), FUTEX_WAKE | P, 1, 0, 0, 0), 1);
  EXPECT_EQ(served.SettleDone(1), 1u);
  EXPECT_EQ(kernel.DoneCount(), 0u);
  EXPECT_EQ(ServedFutex(A(&w.a), FUTEX_WAKE_BITSET | P, 5, 0, 0, 3), 2);
  EXPECT_EQ(kernel.SettleDone(2), 2u);
  EXPECT_EQ(kernel.Results(), "0,0");
  EXPECT_EQ(served.Results(), "0");

  // Requeue: the kernel's waiter moves in the kernel, and a served wake on
  // the target word still finds it; FUTEX_WAKE_OP's wakes go on too.
  Callers k2(KernelFutex);
  ASSERT_TRUE(k2.Start(A(&w.b), FUTEX_WAIT | P, 0, 0, 0, 0));
  ASSERT_TRUE(k2.Start(A(&w.b), FUTEX_WAIT | P, 0, 0, 0, 0));
  EXPECT_EQ(ServedFutex(A(&w.b), FUTEX_CMP_REQUEUE | P, 0, 1, A(&w.c), 0), 1);
  EXPECT_EQ(ServedFutex(A(&w.c), FUTEX_WAKE | P, 1, 0, 0, 0), 1);
  EXPECT_EQ(ServedFutex(A(&w.a), FUTEX_WAKE_OP | P, 1, 1, A(&w.b),
                        Encode(FUTEX_OP_SET, false, 0, FUTEX_OP_CMP_EQ, 0)),
            1);
  EXPECT_EQ(k2.SettleDone(2), 2u);
  EXPECT_EQ(k2.Results(), "0,0");
}

}  // namespace
}  // namespace parklot::futex_test
