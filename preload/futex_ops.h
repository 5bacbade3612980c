// futex(2) served by the parking lot: what the preload shim's syscall()
// does with SYS_futex when PARKLOT_SYSCALL_FUTEX=1 (preload/futex_shim.cc).
//
// Served in user space, keyed by address, for FUTEX_PRIVATE_FLAG operations
// whose arguments the kernel would accept:
//   FUTEX_WAIT          relative timeout on CLOCK_MONOTONIC
//   FUTEX_WAIT_BITSET   absolute timeout, CLOCK_MONOTONIC or, with
//                       FUTEX_CLOCK_REALTIME, CLOCK_REALTIME; the bitset is
//                       the waiter's park token
//   FUTEX_WAKE, FUTEX_WAKE_BITSET (waiters whose bitset shares a bit)
//   FUTEX_REQUEUE, FUTEX_CMP_REQUEUE (EAGAIN when *uaddr != val3)
//   FUTEX_WAKE_OP       every op (SET ADD OR ANDN XOR, with or without
//                       FUTEX_OP_OPARG_SHIFT) and cmp (EQ NE LT LE GT GE);
//                       the op on *uaddr2 runs under both buckets' locks,
//                       as the kernel runs it under both hash locks
// Results are the kernel's: the same counts, and the same errors (EAGAIN,
// ETIMEDOUT, EINTR). Every other call goes to the kernel untouched: shared
// futexes, PI operations (but see the PI rule below), FUTEX_WAIT_REQUEUE_PI/CMP_REQUEUE_PI, unknown
// commands, and any call the kernel would fail before touching a waiter
// (a misaligned or out-of-range address, bitset 0, a malformed timespec,
// negative requeue counts, FUTEX_CLOCK_REALTIME on another command, an
// unknown FUTEX_WAKE_OP op or cmp), so the kernel returns its own error.
// Addresses below the lowest mappable one (vm.mmap_min_addr; NULL) go there
// too, for the kernel's EFAULT.
//
// Bad memory: a served call reads and writes the caller's memory as the
// kernel does (the timespec first, then *uaddr for the waits and
// FUTEX_CMP_REQUEUE; *uaddr2 for FUTEX_WAKE_OP, a write access even on a
// read-only page; a private word is never touched to wake or requeue),
// through accessors that cannot crash. Where one faults (unmapped,
// PROT_NONE, read-only for the write, a file mapping past its end) the
// call, having done nothing, goes to the kernel whole, which answers
// EFAULT (or serves it, if the page came back meanwhile). The valid path
// costs no system call. Each access is made first before any bucket lock
// is taken (a word that already differs is EAGAIN there, without the
// lock); the one under the lock faults only if another thread changed the
// mapping since, and that fault is as harmless. The accessors need the
// shim's SIGSEGV/SIGBUS handler (Init), which keeps the program's actions
// for those signals itself (ProgramSigaction) and runs them for every
// other fault. It cannot help where the kernel does not run it: in a
// thread that blocks SIGSEGV or SIGBUS (the kernel then ends the process,
// as for any fault there), or once an action is set by a raw rt_sigaction
// system call, which bypasses the shim. Being caught, the two signals
// reach an exec'd program with their default action even where this one
// ignored them.
//
// The kernel's quirks are kept: FUTEX_WAKE and FUTEX_WAKE_OP wake one
// waiter when asked for 0 or a negative number; FUTEX_REQUEUE returns woken
// plus requeued; FUTEX_WAKE_OP masks an out-of-range shift to 0..31.
//
// Signals: a served wait is a park in an InterruptiblePark scope, whose
// sleep is a futex wait of the same kind as the caller's (untimed or
// timed), so the kernel's restart rules are the same: an untimed wait is
// restarted after an SA_RESTART handler and fails with EINTR after any
// other; a timed wait fails with EINTR after any handler. Unlike the
// kernel's restart, a restarted served wait does not compare *uaddr again:
// it keeps waiting for a wake (a handler that changes the word and does not
// wake it leaves the waiter asleep).
//
// The boundary rule (code that bypasses syscall(): glibc's inline futex
// calls, raw `syscall` instructions, io_uring, the kernel itself):
//   1. Served waiters wait in the parking lot only; a private wake that
//      bypasses the shim does not reach them. Nothing in glibc or the kernel
//      does that to a word a program waits on through syscall(): glibc's
//      inline futex calls are on glibc's own objects, and the kernel's
//      thread-exit wake (CLONE_CHILD_CLEARTID, what pthread_join waits for)
//      is a shared futex wake, which never reached private waiters anyway;
//      shared waits go to the kernel.
//   2. Served wakes reach waiters that bypassed the shim: a served wake that
//      woke (or requeued) fewer threads than it was allowed from the lot
//      passes the remainder on to the kernel, as the same operation (the
//      kernel compares val3 again for FUTEX_CMP_REQUEUE; FUTEX_WAKE_OP's
//      remainders go as FUTEX_WAKE on each word, the op already done). The
//      counts add up. A process may thus mix served and kernel waiters on
//      one word, as long as its wakes go through syscall().
//   3. A call that re-enters the shim from a signal handler on a thread
//      already inside a served futex call's use of the lot (a wait past its
//      first read of the word, a wake, a requeue) goes to the kernel,
//      except a wake (any of the wake and requeue commands) while that
//      thread is asleep in the lot, which is served: elsewhere the thread
//      may hold a bucket lock. By rule 2 a kernel wait made so is still
//      woken by served wakes.
//      "Thread" is a task: one running on another task's TLS
//      (base/shared_tls.h) is never taken for a re-entry of its owner's.
//
// Forwarded errors. A remainder the kernel fails (EINVAL on a
// FUTEX_WAIT_REQUEUE_PI or PI waiter it meets, as it fails the call after
// waking the waiters before that one) makes the call fail with the
// kernel's error, though the lot's part is done, as the kernel's wakes
// before the failing waiter are. One exception: FUTEX_CMP_REQUEUE's
// remainder compares *uaddr again, and its EAGAIN counts as 0 woken, since
// the call's compare was the lot's and passed.
//
// PI rule. PI operations are the kernel's, but the kernel, finding a
// waiter that is not a PI one on the word, fails with EINVAL, and the
// lot's waiters are such waiters it cannot see. So where the lot holds a
// waiter on uaddr (checked at the call; a waiter that arrives after is as
// one that arrived after the kernel's check), and the kernel's earlier
// checks pass (argument and timeout checks, EFAULT, then EDEADLK for a
// lock on a word this thread owns, EPERM for an unlock of a word it does
// not, EAGAIN for FUTEX_CMP_REQUEUE_PI's compare), FUTEX_LOCK_PI,
// FUTEX_LOCK_PI2, FUTEX_TRYLOCK_PI, FUTEX_UNLOCK_PI and (waiters on uaddr,
// the requeue source) FUTEX_CMP_REQUEUE_PI return EINVAL without reaching
// the kernel; in every other case the kernel answers. FUTEX_WAIT_REQUEUE_PI
// always goes to the kernel (it fails on no other waiter), and the
// kernel's EINVAL when a served wake's remainder meets it reaches the
// caller (Forwarded errors). Not covered: served waiters on
// FUTEX_CMP_REQUEUE_PI's target word uaddr2.
//
// futex2 (futex_waitv 449, futex_wake 454, futex_wait 455, futex_requeue
// 456, through syscall()). Served only for one private 32-bit word
// (flags == FUTEX2_SIZE_U32 | FUTEX2_PRIVATE, mask and val fitting 32
// bits); everything else goes to the kernel as given:
//   futex_wake     served as FUTEX_WAKE_BITSET (the mask): the lot's
//                  waiters first, the remainder forwarded (rule 2); nr 0
//                  goes to the kernel (it wakes no one there, FLAGS_STRICT)
//   futex_wait     served when untimed, as FUTEX_WAIT_BITSET with the mask;
//                  a timed one goes to the kernel, whose -ERESTARTSYS
//                  restarts it after an SA_RESTART handler (the lot's timed
//                  sleep would end with EINTR); served wakes of either kind
//                  reach it by rule 2
//   futex_requeue  served as FUTEX_CMP_REQUEUE from waiters[0] (compared
//                  with waiters[0].val) to waiters[1], both private 32-bit;
//                  the remainder forwarded as FUTEX_CMP_REQUEUE (the same
//                  kernel keys)
//   futex_waitv    always the kernel's (a wait on many words at once is
//                  not a park); served wakes and requeues reach its
//                  waiters by rule 2
// So the lot's waiters are reached by every wake and requeue through
// syscall(), SYS_futex or futex2, and the kernel's by the remainders.
#ifndef PARKLOT_PRELOAD_FUTEX_OPS_H_
#define PARKLOT_PRELOAD_FUTEX_OPS_H_

#include <signal.h>
#include <sys/types.h>

#include <cstdint>

#include "base/text.h"

namespace parklot::internal::futex {

// futex(2) with syscall()'s six argument registers: serves the calls above
// from the parking lot and passes the rest to the kernel. Returns >= 0 or
// -errno, as the kernel does. Thread-safe; never allocates.
long Futex(long uaddr, long op, long val, long timeout_or_val2, long uaddr2,
           long val3);

// The futex2 system calls (x86-64 numbers; glibc 2.36's headers lack them).
inline constexpr long kSysFutexWaitv = 449;
inline constexpr long kSysFutexWake = 454;
inline constexpr long kSysFutexWait = 455;
inline constexpr long kSysFutexRequeue = 456;
bool IsFutex2(long number);

// A futex2 call with syscall()'s registers: served or passed on as above.
// Returns >= 0 or -errno. Thread-safe; never allocates.
long Futex2(long number, long a1, long a2, long a3, long a4, long a5, long a6);

// The calling thread's kernel thread id, for the PI rule's owner checks
// (default: gettid). The shim sets its CurrentTid, which makes no system
// call. Not thread-safe: call before Init().
void SetCurrentTid(pid_t (*fn)());

// Reads what the first served call would otherwise read on its own (the
// lowest mappable address), and installs the SIGSEGV/SIGBUS handler in
// front of the program's current actions. Idempotent and thread-safe;
// called by the shim's constructor (and by the first served call if not).
void Init();

// SIGSEGV and SIGBUS, once Init() has installed the handler. The handler
// turns a served call's fault into EFAULT and runs the program's action for
// every other one, as the kernel would: its handler (SA_SIGINFO or not,
// SA_RESETHAND honoured; the kernel applies its mask, SA_ONSTACK,
// SA_RESTART and SA_NODEFER, which the handler's own action carries), or
// the default (the process ends by that signal) or ignoring it (a fault
// that is ignored ends the process too, as in the kernel).
using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);

// The sigaction that reaches the kernel (default: ::sigaction). The shim
// sets glibc's __sigaction before Init(), its own sigaction being the
// interposer below. Not thread-safe: call before Init().
void SetKernelSigaction(SigactionFn fn);

// Whether the handler is installed. Thread-safe.
bool HandlesFaultSignals();

// sigaction(2) as the program sees it: for SIGSEGV and SIGBUS once
// HandlesFaultSignals(), `act` becomes the program's action (the handler
// stays in the kernel, with act's mask and flags) and `old` receives the
// previous one as glibc alone would report it (the kernel's mask, flags
// and restorer, the program's handler); returns sigaction's result. Any other signal, or before Init(), goes to the
// kernel's sigaction: its result. Async-signal-safe and thread-safe, as
// sigaction is; never allocates.
int ProgramSigaction(int sig, const struct sigaction* act,
                     struct sigaction* old);

// Counting, for PARKLOT_STATS: off until enabled, and only then do calls
// touch the counters.
void EnableCounting();

// Commands 0..13 by name (FUTEX_WAIT ... FUTEX_LOCK_PI2), index 14 for any
// other command.
inline constexpr int kCommands = 15;
// futex2 calls by index: futex_waitv, futex_wake, futex_wait, futex_requeue.
inline constexpr int kFutex2Calls = 4;
struct Counts {
  uint64_t served[kCommands] = {};
  uint64_t kernel[kCommands] = {};
  uint64_t served2[kFutex2Calls] = {};
  uint64_t kernel2[kFutex2Calls] = {};
  uint64_t forwarded = 0;         // served wakes that passed a remainder on
  uint64_t forwarded_woken = 0;   // threads the kernel woke or requeued so
};
Counts GetCounts();
const char* CommandName(int index);
const char* Futex2Name(int index);

// The report's lines, e.g.
//   futex served by parklot: wait=10 wait_bitset=0 wake=12 ... futex_wake=0 ...
//   futex passed to the kernel: wait=0 ... other=0 futex_waitv=0 ...
//   futex wakes forwarded to the kernel: 3 calls, 1 threads
// Appended to `out` (nothing unless counting is on); no allocation.
void FormatCounts(TextBuffer* out);

}  // namespace parklot::internal::futex

#endif  // PARKLOT_PRELOAD_FUTEX_OPS_H_
