#include "preload/futex_fault.h"

#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "base/futex.h"
#include "preload/futex_ops.h"
#include "preload/program_handler.h"

// The table of accessing instructions (futex_fault.h), from the linker.
extern "C" {
__attribute__((visibility("hidden"))) extern const int32_t
    __start_parklot_user_access[];
__attribute__((visibility("hidden"))) extern const int32_t
    __stop_parklot_user_access[];
}

// parklot_user_load64 and parklot_user_cmpxchg32; their entries resume at
// parklot_user_fault.
asm(R"(
  .text
  .p2align 4
  .globl parklot_user_load64
  .hidden parklot_user_load64
  .type parklot_user_load64, @function
parklot_user_load64:
  .cfi_startproc
1:
  mov (%rdi), %rax
)" PARKLOT_USER_ACCESS("1b", "parklot_user_fault") R"(
  mov %rax, (%rsi)
  xorl %eax, %eax
  ret
  .cfi_endproc
  .size parklot_user_load64, .-parklot_user_load64

  .p2align 4
  .globl parklot_user_cmpxchg32
  .hidden parklot_user_cmpxchg32
  .type parklot_user_cmpxchg32, @function
parklot_user_cmpxchg32:
  .cfi_startproc
  movl (%rsi), %eax
1:
  lock cmpxchgl %edx, (%rdi)
)" PARKLOT_USER_ACCESS("1b", "parklot_user_fault") R"(
  jne 1f
  xorl %eax, %eax
  ret
1:
  movl %eax, (%rsi)
  movl $1, %eax
  ret
  .cfi_endproc
  .size parklot_user_cmpxchg32, .-parklot_user_cmpxchg32

  .p2align 4
  .globl parklot_user_fault
  .hidden parklot_user_fault
  .type parklot_user_fault, @function
parklot_user_fault:
  .cfi_startproc
  movl $-14, %eax
  ret
  .cfi_endproc
  .size parklot_user_fault, .-parklot_user_fault
)");
static_assert(EFAULT == 14, "parklot_user_fault returns -EFAULT");

namespace parklot::internal::futex {
namespace {

// ---------------------------------------------------------------------------
// SIGSEGV and SIGBUS. A served call's access to a bad address faults at one
// of the accessors' instructions; the handler, installed in front of the
// program's action by Init(), resumes it where the table says. It needs no
// lock and never leaves by a jump, so a fault is harmless anywhere, a
// bucket lock held or not. Every other SIGSEGV and SIGBUS gets the
// program's action, as the kernel would have run it.
//
// From Init() on, the kernel holds our handler for the two signals, with
// the program's mask and flags, but SA_RESETHAND, which we honour (the
// kernel's reset would give our own faults the default action), and
// SA_NODEFER, which we always set: the signal stays unblocked while the
// handler runs, so that a served call made by another signal's handler
// that interrupts it, and faults, reaches this handler again instead of
// ending the process (the kernel's answer to a fault on a blocked
// SIGSEGV). The program's handler still runs with the signal blocked
// unless it asked for SA_NODEFER (OnFaultSignal blocks it). The program's
// handler and its SA_SIGINFO, SA_RESETHAND and SA_NODEFER choices are kept
// here. The shim's sigaction() and signal() family (signal_shim.cc) set and
// read them through ProgramSigaction, which reads the rest back from the
// kernel, so that the program sees the kernel's answer: the mask without
// SIGKILL and SIGSTOP, unknown flags dropped, glibc's restorer. (Programs
// reset SIGSEGV to SIG_DFL or install crash handlers; neither may take the
// served calls' faults.)

SigactionFn g_kernel_sigaction = ::sigaction;
std::atomic<bool> g_handling_faults{false};

int FaultIndex(int sig) { return sig == SIGSEGV ? 0 : sig == SIGBUS ? 1 : -1; }

// The program's handler per signal in one word, so that the handler (which
// may interrupt a writer, or run beside one) reads a consistent choice, and
// a reset is one compare-and-exchange. User-space addresses leave the top
// bits free.
constexpr uintptr_t kSigInfoBit = uintptr_t{1} << 63;
constexpr uintptr_t kResetBit = uintptr_t{1} << 62;
constexpr uintptr_t kNoDeferBit = uintptr_t{1} << 61;
constexpr uintptr_t kHandlerMask = ~(kSigInfoBit | kResetBit | kNoDeferBit);
std::atomic<uintptr_t> g_program[2];

uintptr_t ProgramWord(const struct sigaction& act) {
  return (reinterpret_cast<uintptr_t>(act.sa_handler) & kHandlerMask) |
         ((act.sa_flags & SA_SIGINFO) ? kSigInfoBit : 0) |
         ((act.sa_flags & SA_RESETHAND) ? kResetBit : 0) |
         ((act.sa_flags & SA_NODEFER) ? kNoDeferBit : 0);
}

// An action the kernel reported for our handler, as the program's `word`.
void ShowProgramAction(struct sigaction* act, uintptr_t word) {
  act->sa_handler = reinterpret_cast<void (*)(int)>(word & kHandlerMask);
  act->sa_flags &= ~(SA_SIGINFO | SA_RESETHAND | SA_NODEFER);
  if (word & kSigInfoBit) act->sa_flags |= SA_SIGINFO;
  if (word & kResetBit) act->sa_flags |= SA_RESETHAND;
  if (word & kNoDeferBit) act->sa_flags |= SA_NODEFER;
}

void OnFaultSignal(int sig, siginfo_t* info, void* context);

// Records `act` as the program's action and gives the kernel ours with
// act's mask and flags; `old` (if not null) receives the previous action as
// the program sees it. Returns sigaction's result.
int SetProgramAction(int sig, const struct sigaction& act,
                     struct sigaction* old) {
  const int index = FaultIndex(sig);
  const uintptr_t previous = g_program[index].exchange(ProgramWord(act));
  struct sigaction front = act;
  front.sa_sigaction = OnFaultSignal;
  front.sa_flags = (act.sa_flags & ~SA_RESETHAND) | SA_SIGINFO | SA_NODEFER;
  const int rc = g_kernel_sigaction(sig, &front, old);
  if (rc != 0) {
    g_program[index].store(previous);
  } else if (old != nullptr) {
    ShowProgramAction(old, previous);
  }
  return rc;
}

// Where a fault at `ip` resumes, if ip is an accessing instruction (a
// linear search: a handful of entries).
const char* ResumeAddress(const char* ip) {
  for (const int32_t* e = __start_parklot_user_access;
       e < __stop_parklot_user_access; e += 2) {
    const char* base = reinterpret_cast<const char*>(e);
    if (base + e[0] == ip) return base + 4 + e[1];
  }
  return nullptr;
}

// Kept small: it runs on the program's alternate signal stack (under 256
// bytes beyond glibc's handler call with the program's handler inside,
// docs/compatibility.md, "Reliability under the shim"), so no struct
// sigaction and no libc call on the way to the program's handler.
void OnFaultSignal(int sig, siginfo_t* info, void* context) {
  auto* uc = static_cast<ucontext_t*>(context);
  greg_t& ip = uc->uc_mcontext.gregs[REG_RIP];
  // si_code > 0: raised by the fault itself, not sent.
  if (info->si_code > 0) {
    if (const char* resume = ResumeAddress(reinterpret_cast<const char*>(ip))) {
      ip = reinterpret_cast<greg_t>(resume);
      return;
    }
  }
  std::atomic<uintptr_t>& program = g_program[FaultIndex(sig)];
  uintptr_t word = program.load(std::memory_order_acquire);
  uintptr_t handler = word & kHandlerMask;
  // SA_RESETHAND, as the kernel does it: the first delivery to reset the
  // action runs the handler; one that comes after gets the default.
  while (handler > reinterpret_cast<uintptr_t>(SIG_IGN) && (word & kResetBit) &&
         !program.compare_exchange_weak(word, word & ~kHandlerMask)) {
    handler = word & kHandlerMask;
  }
  if (handler == reinterpret_cast<uintptr_t>(SIG_IGN) && info->si_code <= 0) return;
  if (handler <= reinterpret_cast<uintptr_t>(SIG_IGN)) {
    // The default action, which the kernel also takes for a fault the
    // program ignores: the kernel gets the default back and the signal
    // comes again, a fault by running the instruction again, a sent signal
    // by sending it again. Raw system calls: the process is ending, and a
    // handler's stack is small.
    struct {
      uintptr_t handler, flags, restorer, mask;
    } dfl = {reinterpret_cast<uintptr_t>(SIG_DFL), 0, 0, 0};
    RawSyscall6(SYS_rt_sigaction, sig, reinterpret_cast<long>(&dfl), 0, 8, 0, 0);
    if (info->si_code <= 0) {
      RawSyscall6(SYS_tgkill, getpid(), RawSyscall6(SYS_gettid, 0, 0, 0, 0, 0, 0),
                  sig, 0, 0, 0);
    }
    return;
  }
  // The kernel did not block the signal (SA_NODEFER, above); the
  // program's handler runs with it blocked, as the kernel would run it,
  // unless it asked otherwise. sigreturn restores the interrupted mask.
  if ((word & kNoDeferBit) == 0) {
    const uint64_t block = uint64_t{1} << (sig - 1);
    RawSyscall6(SYS_rt_sigprocmask, SIG_BLOCK,
                reinterpret_cast<long>(&block), 0, sizeof block, 0, 0);
  }
  // As every program handler runs (signal_shim.cc).
  preload::RunProgramHandler(
      reinterpret_cast<void (*)(int, siginfo_t*, void*)>(handler), sig, info,
      context);
}

}  // namespace

// The actions set before Init() are read through sigaction(), the shim's
// own in the shim, so that one installed by then (by a library's
// constructor, before the shim's) is the program's handler, not the shim's
// wrapper that the kernel holds for it.
void InstallFaultHandler() {
  for (int sig : {SIGSEGV, SIGBUS}) {
    struct sigaction current;
    ::sigaction(sig, nullptr, &current);
    SetProgramAction(sig, current, nullptr);
  }
  g_handling_faults.store(true, std::memory_order_release);
}

void SetKernelSigaction(SigactionFn fn) { g_kernel_sigaction = fn; }

bool HandlesFaultSignals() {
  return g_handling_faults.load(std::memory_order_acquire);
}

int ProgramSigaction(int sig, const struct sigaction* act,
                     struct sigaction* old) {
  if (FaultIndex(sig) < 0 || !HandlesFaultSignals()) {
    return g_kernel_sigaction(sig, act, old);
  }
  if (act != nullptr && preload::TaskOwnsThreadState()) {
    return SetProgramAction(sig, *act, old);
  }
  // Read, or set by a task whose actions are its own (a vfork child;
  // task_model.h): the kernel's alone, the record only read.
  const uintptr_t word =
      g_program[FaultIndex(sig)].load(std::memory_order_acquire);
  const int rc = g_kernel_sigaction(sig, act, old);
  if (rc == 0 && old != nullptr && old->sa_sigaction == OnFaultSignal) {
    ShowProgramAction(old, word);
  }
  return rc;
}

}  // namespace parklot::internal::futex
