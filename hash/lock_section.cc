#include "hash/lock_section.h"

#include <signal.h>
#include <sys/syscall.h>
#include <ucontext.h>

#include <atomic>

#include "base/futex.h"
#include "base/shared_tls.h"
#include "hash/bucket_table.h"

namespace parklot::internal {

constinit __attribute__((tls_model("initial-exec"))) thread_local SectionState
    t_section;

namespace {
std::atomic<void (*)()> g_section_exit_hook{nullptr};

// The section states of tasks on another task's TLS (base/shared_tls.h), which
// must not count in their TLS owner's, each held from the task's outermost
// section entry to its exit.
constinit TaskSlots<SectionState, 32> g_foreign_sections;
}  // namespace

SectionState* SharedTlsSections(bool claim) {
  const int32_t tid = ForeignTaskId();
  if (tid == 0) return &t_section;
  if (!claim) return g_foreign_sections.Find(tid);
  // All taken: a section holds no wait, and its entry is given back at its
  // end, so one comes free soon; yield (not spin) meanwhile, so that the
  // tasks holding them run (hundreds of such tasks on two CPUs). A task
  // killed inside a section never gives its entry back: every 64th yield
  // frees the entries of tasks that exited (TaskExited, one system call
  // each; docs/design.md section 2.11).
  for (uint32_t tries = 1;; ++tries) {
    if (SectionState* s = g_foreign_sections.FindOrClaim(tid)) return s;
    if (tries % 64 == 0) {
      for (size_t i = 0; i < decltype(g_foreign_sections)::kSize; ++i) {
        int32_t holder = g_foreign_sections.KeyAt(i).load(std::memory_order_acquire);
        if (holder != 0 && TaskExited(holder)) {
          g_foreign_sections.KeyAt(i).compare_exchange_strong(
              holder, 0, std::memory_order_release, std::memory_order_relaxed);
        }
      }
    }
    YieldForSharedTls();
  }
}

void EnterSharedTlsSection() {
  ++SharedTlsSections(/*claim=*/true)->sections;
  std::atomic_signal_fence(std::memory_order_seq_cst);
}

void LeaveSharedTlsSection(BucketTable* table) {
  const int32_t tid = ForeignTaskId();
  SectionState* s = tid == 0 ? &t_section : g_foreign_sections.Find(tid);
  if (--s->sections != 0) return;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (s->hook_due || s->grow_table != nullptr) LeaveOutermostSection(s, table);
  // A foreign task gives its entry back.
  if (tid != 0) g_foreign_sections.Release(s, tid);
}

void LeaveOutermostSection(SectionState* s, BucketTable* table) {
  if (s->hook_due) {
    s->hook_due = false;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (auto hook = g_section_exit_hook.load(std::memory_order_acquire)) hook();
  }
  // Signals a handler wrapper kept for the section's end: unblocked, the
  // kernel delivers them now, as it would have a few instructions ago.
  if (s->deferred_signals != 0) {
    uint64_t mask = __atomic_exchange_n(&s->deferred_signals, 0, __ATOMIC_RELAXED);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    RawSyscall6(SYS_rt_sigprocmask, SIG_UNBLOCK, reinterpret_cast<long>(&mask),
                0, sizeof(mask), 0, 0);
  }
  // A collision growth this task asked for (SampleCollision), unless the
  // task is inside a growth or a fork's lock-all (a handler may be running
  // on it), where it waits for the next outermost section's end. A request
  // for another table than this section's is dropped: that table may be
  // gone (the process has one table; tests make and destroy several).
  // A task on shared TLS (s is not t_section) drops it: a growth marks
  // the task busy and would run under its owner's t_section (BusyScope).
  if (s->grow_table != nullptr && s->busy == 0) {
    BucketTable* due = s->grow_table;
    s->grow_table = nullptr;
    if (due == table && s == &t_section) {
      table->GrowForCollisions(s->grow_from, s->grow_to);
    }
  }
}

void AdoptSectionsInForkChild(int32_t forking_tid) {
  // The forking task entered a section in LockAllForFork: a task on the
  // owner's TLS has an entry; the owner keeps t_section. The copy of the
  // owner's t_section the child got is the owner's, not the forker's.
  if (forking_tid != t_tls_owner) {
    if (SectionState* mine = g_foreign_sections.Find(forking_tid)) {
      t_section = *mine;
    } else {
      t_section = SectionState{};
    }
  }
  g_foreign_sections.ResetAll();
  ResetSharedTlsInChild();
}

bool SignalIsFault(int sig, const void* siginfo) {
  return (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE ||
          sig == SIGTRAP || sig == SIGSYS) &&
         static_cast<const siginfo_t*>(siginfo)->si_code > 0;
}

bool DeferSignalToSectionEnd(int sig, const void* siginfo, void* ucontext) {
  SectionState* s = Sections(/*claim=*/false);
  if (s == nullptr || s->sections == 0 || sig <= 0 || sig > 64) return false;
  // A fault belongs to the instruction that raised it: it cannot wait.
  if (SignalIsFault(sig, siginfo)) return false;
  uint64_t bit = uint64_t{1} << (sig - 1);
  // Blocked now (an SA_NODEFER action would take it again at once) and
  // after the handler returns (the kernel restores the mask from the
  // context). The bit was clear: the signal was just delivered.
  RawSyscall6(SYS_rt_sigprocmask, SIG_BLOCK, reinterpret_cast<long>(&bit), 0,
              sizeof(bit), 0, 0);
  const long pid = RawSyscall6(SYS_getpid, 0, 0, 0, 0, 0, 0);
  const long tid = RawSyscall6(SYS_gettid, 0, 0, 0, 0, 0, 0);
  // The kernel accepts any si_code for a signal a task queues to itself.
  if (RawSyscall6(SYS_rt_tgsigqueueinfo, pid, tid, sig,
                  reinterpret_cast<long>(siginfo), 0, 0) != 0) {
    RawSyscall6(SYS_rt_sigprocmask, SIG_UNBLOCK, reinterpret_cast<long>(&bit),
                0, sizeof(bit), 0, 0);
    return false;
  }
  auto* uc = static_cast<ucontext_t*>(ucontext);
  reinterpret_cast<uint64_t*>(&uc->uc_sigmask)[0] |= bit;
  __atomic_fetch_or(&s->deferred_signals, bit, __ATOMIC_RELAXED);
  s->hook_due = true;  // LeaveSection then calls LeaveOutermostSection
  std::atomic_signal_fence(std::memory_order_seq_cst);
  return true;
}

bool InSharedTlsSection() {
  const SectionState* s = SharedTlsSections(/*claim=*/false);
  return s != nullptr && s->sections != 0;
}

void SetSectionExitHook(void (*hook)()) {
  g_section_exit_hook.store(hook, std::memory_order_release);
}

void RequestSectionExitHook() {
  Sections(/*claim=*/false)->hook_due = true;
  std::atomic_signal_fence(std::memory_order_seq_cst);
}

}  // namespace parklot::internal
