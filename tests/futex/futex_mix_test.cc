// Mixes on one word that the served path must answer as the kernel does
// (preload/futex_ops.h: the futex2 rule, the PI rule, forwarded errors):
// served waiters woken and requeued by futex2 calls and the reverse, PI and
// requeue-PI operations on words with served waiters, and served wakes that
// meet a kernel FUTEX_WAIT_REQUEUE_PI waiter.
//
// Each scenario runs once on the kernel (raw `syscall` instructions) and
// once on the served path, and the descriptions must be equal. Built twice:
//   futex_mix_test  (PARKLOT_FUTEX_LIBRARY) the served path is
//                   parklot::internal::futex::Futex/Futex2, linked in;
//   futex_mix_prog  glibc's syscall(), run under the shim with
//                   PARKLOT_SYSCALL_FUTEX=1 (futex_mix_shim_test).
// Waiters wait with timeouts (2 s), so a lost wake-up shows as ETIMEDOUT
// instead of a hang.
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/futex/futex_test_util.h"
#include "tests/util/watchdog.h"

#ifdef PARKLOT_FUTEX_LIBRARY
#include "preload/futex_ops.h"
#endif

namespace parklot::internal::futex_test {
namespace {

constexpr int P = FUTEX_PRIVATE_FLAG;
constexpr long kWaitv = 449, kWake2 = 454, kWait2 = 455, kRequeue2 = 456;
constexpr long kPriv32 = 2 /* FUTEX2_SIZE_U32 */ | 128 /* FUTEX2_PRIVATE */;
constexpr long kAll = 0xffffffffL;

// A system call by number: the kernel's or the served path's.
template <long N>
long Kernel(long a, long b, long c, long d, long e, long f) {
  return RawSyscall6(N, a, b, c, d, e, f);
}
template <long N>
long Served(long a, long b, long c, long d, long e, long f) {
#ifdef PARKLOT_FUTEX_LIBRARY
  if (N == SYS_futex) return parklot::internal::futex::Futex(a, b, c, d, e, f);
  return parklot::internal::futex::Futex2(N, a, b, c, d, e, f);
#else
  const long r = syscall(N, a, b, c, d, e, f);
  return r == -1 ? -errno : r;
#endif
}

struct Backend {
  FutexFn futex, wake2, wait2, requeue2, waitv;
};
constexpr Backend kKernel = {Kernel<SYS_futex>, Kernel<kWake2>, Kernel<kWait2>,
                             Kernel<kRequeue2>, Kernel<kWaitv>};
constexpr Backend kServed = {Served<SYS_futex>, Served<kWake2>, Served<kWait2>,
                             Served<kRequeue2>, Served<kWaitv>};

struct Waitv {
  uint64_t val, uaddr;
  uint32_t flags, reserved;
};

struct Words {
  alignas(64) uint32_t a = 0;
  alignas(64) uint32_t b = 0;
  alignas(64) uint32_t c = 0;
  Waitv v[2] = {};
};

// A relative 2 s timeout (FUTEX_WAIT) and an absolute one on
// CLOCK_MONOTONIC, 2 s from now (FUTEX_WAIT_REQUEUE_PI, futex_waitv).
const timespec kRel2s = {2, 0};
timespec Abs2s() { return TsFromNs(NowNs(CLOCK_MONOTONIC) + 2000000000); }

std::string R(long r) {
  if (r >= 0) return std::to_string(r);
  const char* n = strerrorname_np(static_cast<int>(-r));
  return n != nullptr ? n : absl::StrCat("errno", -r);
}

using Scenario = std::string (*)(const Backend& f);

void ExpectSame(const char* name, Scenario s) {
  parklot::internal::testing::Watchdog dog(absl::Seconds(40), name);
  const std::string kernel = s(kKernel);
  const std::string served = s(kServed);
  EXPECT_EQ(kernel, served) << name;
  printf("%-28s kernel: %s\n%-28s served: %s\n", name, kernel.c_str(), "",
         served.c_str());
}

// ---------------------------------------------------------------------------
// futex2 and SYS_futex on one word.

std::string Wake2WakesFutexWaiters(const Backend& f) {
  Words w;
  Callers c(f.futex);
  std::string out;
  for (int i = 0; i < 3; ++i) {
    if (!c.Start(A(&w.a), FUTEX_WAIT | P, 0, A(&kRel2s), 0, 0)) return "no block";
  }
  absl::StrAppend(&out, "wake2_1=", R(f.wake2(A(&w.a), kAll, 1, kPriv32, 0, 0)));
  absl::StrAppend(&out, " wake2_all=",
                  R(f.wake2(A(&w.a), kAll, INT_MAX, kPriv32, 0, 0)));
  absl::StrAppend(&out, " waiters=", c.Results());
  return out;
}

std::string Wake2Masks(const Backend& f) {
  Words w;
  Callers c(f.futex);
  std::string out;
  const timespec abs = Abs2s();
  if (!c.Start(A(&w.a), FUTEX_WAIT_BITSET | P, 0, A(&abs), 0, 1)) {
    return "no block";
  }
  absl::StrAppend(&out, "mask2=", R(f.wake2(A(&w.a), 2, 1, kPriv32, 0, 0)));
  absl::StrAppend(&out, " nr0=", R(f.wake2(A(&w.a), 1, 0, kPriv32, 0, 0)));
  absl::StrAppend(&out, " mask1=", R(f.wake2(A(&w.a), 1, 1, kPriv32, 0, 0)));
  absl::StrAppend(&out, " waiter=", c.Results());
  return out;
}

std::string Wait2WokenByFutexAndWake2(const Backend& f) {
  Words w;
  Callers c(f.wait2);
  std::string out;
  // Untimed futex_wait (served), then a timed one (the kernel's).
  const timespec abs = Abs2s();
  if (!c.Start(A(&w.a), 0, kAll, kPriv32, 0, 0)) return "no block";
  if (!c.Start(A(&w.a), 0, kAll, kPriv32, A(&abs), CLOCK_MONOTONIC)) {
    return "no block";
  }
  absl::StrAppend(&out, "mismatch=", R(f.wait2(A(&w.a), 1, kAll, kPriv32, 0, 0)));
  absl::StrAppend(&out, " val64=",
                  R(f.wait2(A(&w.a), 1L << 32, kAll, kPriv32, 0, 0)));
  absl::StrAppend(&out, " wake=", R(f.futex(A(&w.a), FUTEX_WAKE | P, 1, 0, 0, 0)));
  absl::StrAppend(&out, " wake2=", R(f.wake2(A(&w.a), kAll, 1, kPriv32, 0, 0)));
  absl::StrAppend(&out, " waiters=", c.Results());
  return out;
}

std::string Requeue2MovesFutexWaiters(const Backend& f) {
  Words w;
  Callers c(f.futex);
  std::string out;
  for (int i = 0; i < 2; ++i) {
    if (!c.Start(A(&w.a), FUTEX_WAIT | P, 0, A(&kRel2s), 0, 0)) return "no block";
  }
  w.v[0] = {0, static_cast<uint64_t>(A(&w.a)), kPriv32, 0};
  w.v[1] = {0, static_cast<uint64_t>(A(&w.b)), kPriv32, 0};
  w.v[0].val = 5;
  absl::StrAppend(&out, "mismatch=", R(f.requeue2(A(w.v), 0, 0, 2, 0, 0)));
  w.v[0].val = 0;
  absl::StrAppend(&out, " requeue=", R(f.requeue2(A(w.v), 0, 0, 2, 0, 0)));
  absl::StrAppend(&out, " wake_a=", R(f.futex(A(&w.a), FUTEX_WAKE | P, 9, 0, 0, 0)));
  absl::StrAppend(&out, " wake2_b=",
                  R(f.wake2(A(&w.b), kAll, INT_MAX, kPriv32, 0, 0)));
  absl::StrAppend(&out, " waiters=", c.Results());
  return out;
}

std::string FutexRequeueMovesWait2Waiters(const Backend& f) {
  Words w;
  Callers c(f.wait2);
  std::string out;
  for (int i = 0; i < 2; ++i) {
    if (!c.Start(A(&w.a), 0, kAll, kPriv32, 0, 0)) return "no block";
  }
  absl::StrAppend(&out, "cmp_requeue=",
                  R(f.futex(A(&w.a), FUTEX_CMP_REQUEUE | P, 1, 1, A(&w.b), 0)));
  absl::StrAppend(&out, " wake2_b=",
                  R(f.wake2(A(&w.b), kAll, INT_MAX, kPriv32, 0, 0)));
  absl::StrAppend(&out, " waiters=", c.Results());
  return out;
}

std::string WaitvWokenByServedWakes(const Backend& f) {
  Words w;
  Callers c(f.waitv);
  std::string out;
  w.v[0] = {0, static_cast<uint64_t>(A(&w.a)), kPriv32, 0};
  w.v[1] = {0, static_cast<uint64_t>(A(&w.b)), kPriv32, 0};
  const timespec abs = Abs2s();
  if (!c.Start(A(w.v), 2, 0, A(&abs), CLOCK_MONOTONIC, 0)) return "no block";
  absl::StrAppend(&out, "wake_b=", R(f.futex(A(&w.b), FUTEX_WAKE | P, 1, 0, 0, 0)));
  absl::StrAppend(&out, " waitv=", c.Results());  // index of the word woken
  return out;
}

// ---------------------------------------------------------------------------
// PI and requeue-PI operations on words with served waiters.

std::string PiOpsOnWaitedWord(const Backend& f) {
  Words w;
  Callers c(f.futex);
  std::string out;
  if (!c.Start(A(&w.a), FUTEX_WAIT | P, 0, A(&kRel2s), 0, 0)) return "no block";
  absl::StrAppend(&out, "lock_pi=", R(f.futex(A(&w.a), FUTEX_LOCK_PI | P, 0, 0, 0, 0)));
  absl::StrAppend(&out, " lock_pi2=",
                  R(f.futex(A(&w.a), FUTEX_LOCK_PI2 | P, 0, 0, 0, 0)));
  absl::StrAppend(&out, " trylock_pi=",
                  R(f.futex(A(&w.a), FUTEX_TRYLOCK_PI | P, 0, 0, 0, 0)));
  absl::StrAppend(&out, " unlock_pi_unowned=",
                  R(f.futex(A(&w.a), FUTEX_UNLOCK_PI | P, 0, 0, 0, 0)));
  absl::StrAppend(&out, " word=", w.a);
  absl::StrAppend(&out, " wake=", R(f.futex(A(&w.a), FUTEX_WAKE | P, 1, 0, 0, 0)));
  // A word this thread owns, with a waiter on it.
  const auto tid = static_cast<uint32_t>(Gettid());
  w.b = tid;
  if (!c.Start(A(&w.b), FUTEX_WAIT | P, tid, A(&kRel2s), 0, 0)) return "no block";
  absl::StrAppend(&out, " own_lock_pi=",
                  R(f.futex(A(&w.b), FUTEX_LOCK_PI | P, 0, 0, 0, 0)));
  absl::StrAppend(&out, " own_unlock_pi=",
                  R(f.futex(A(&w.b), FUTEX_UNLOCK_PI | P, 0, 0, 0, 0)));
  absl::StrAppend(&out, " own_word_is_tid=", w.b == tid);
  absl::StrAppend(&out, " wake_own=",
                  R(f.futex(A(&w.b), FUTEX_WAKE | P, 1, 0, 0, 0)));
  absl::StrAppend(&out, " waiters=", c.Results());
  return out;
}

// The kernel selftest futex_requeue_pi_mismatched_ops, with a timeout.
std::string CmpRequeuePiOnWaitedWord(const Backend& f) {
  Words w;
  Callers c(f.futex);
  std::string out;
  if (!c.Start(A(&w.a), FUTEX_WAIT | P, 0, A(&kRel2s), 0, 0)) return "no block";
  absl::StrAppend(&out, "mismatch=",
                  R(f.futex(A(&w.a), FUTEX_CMP_REQUEUE_PI | P, 1, 0, A(&w.b), 3)));
  absl::StrAppend(&out, " nr_wake2=",
                  R(f.futex(A(&w.a), FUTEX_CMP_REQUEUE_PI | P, 2, 0, A(&w.b), 0)));
  absl::StrAppend(&out, " requeue_pi=",
                  R(f.futex(A(&w.a), FUTEX_CMP_REQUEUE_PI | P, 1, 0, A(&w.b), 0)));
  absl::StrAppend(&out, " wake=", R(f.futex(A(&w.a), FUTEX_WAKE | P, 1, 0, 0, 0)));
  absl::StrAppend(&out, " waiter=", c.Results(), " b=", w.b);
  return out;
}

// A kernel FUTEX_WAIT_REQUEUE_PI waiter met by served wakes and requeues:
// the kernel's EINVAL reaches the caller; then the waiter is requeued to
// the PI word (and so acquires it) by FUTEX_CMP_REQUEUE_PI.
std::string ServedWakesMeetRequeuePiWaiter(const Backend& f) {
  Words w;
  Callers c(f.futex);
  std::string out;
  const timespec abs = Abs2s();
  if (!c.Start(A(&w.a), FUTEX_WAIT_REQUEUE_PI | P, 0, A(&abs), A(&w.b), 0)) {
    return "no block";
  }
  absl::StrAppend(&out, "wake=", R(f.futex(A(&w.a), FUTEX_WAKE | P, 1, 0, 0, 0)));
  absl::StrAppend(&out, " wake_bitset=",
                  R(f.futex(A(&w.a), FUTEX_WAKE_BITSET | P, 1, 0, 0, 1)));
  absl::StrAppend(&out, " cmp_requeue=",
                  R(f.futex(A(&w.a), FUTEX_CMP_REQUEUE | P, 1, 1, A(&w.c), 0)));
  absl::StrAppend(&out, " requeue=",
                  R(f.futex(A(&w.a), FUTEX_REQUEUE | P, 0, 1, A(&w.c), 0)));
  absl::StrAppend(&out, " wake2=", R(f.wake2(A(&w.a), kAll, 1, kPriv32, 0, 0)));
  absl::StrAppend(&out, " requeue_pi=",
                  R(f.futex(A(&w.a), FUTEX_CMP_REQUEUE_PI | P, 1, 0, A(&w.b), 0)));
  absl::StrAppend(&out, " waiter=", c.Results());
  absl::StrAppend(&out, " b_owned=", (w.b & FUTEX_TID_MASK) != 0);
  return out;
}

TEST(FutexMix, Wake2WakesFutexWaiters) {
  ExpectSame("wake2_wakes_futex_waiters", Wake2WakesFutexWaiters);
}
TEST(FutexMix, Wake2Masks) { ExpectSame("wake2_masks", Wake2Masks); }
TEST(FutexMix, Wait2WokenByFutexAndWake2) {
  ExpectSame("wait2_woken", Wait2WokenByFutexAndWake2);
}
TEST(FutexMix, Requeue2MovesFutexWaiters) {
  ExpectSame("requeue2_moves_futex_waiters", Requeue2MovesFutexWaiters);
}
TEST(FutexMix, FutexRequeueMovesWait2Waiters) {
  ExpectSame("requeue_moves_wait2_waiters", FutexRequeueMovesWait2Waiters);
}
TEST(FutexMix, WaitvWokenByServedWakes) {
  ExpectSame("waitv_woken_by_served_wake", WaitvWokenByServedWakes);
}
TEST(FutexMix, PiOpsOnWaitedWord) {
  ExpectSame("pi_ops_on_waited_word", PiOpsOnWaitedWord);
}
TEST(FutexMix, CmpRequeuePiOnWaitedWord) {
  ExpectSame("cmp_requeue_pi_on_waited_word", CmpRequeuePiOnWaitedWord);
}
TEST(FutexMix, ServedWakesMeetRequeuePiWaiter) {
  ExpectSame("served_wakes_meet_requeue_pi", ServedWakesMeetRequeuePiWaiter);
}

}  // namespace
}  // namespace parklot::internal::futex_test
