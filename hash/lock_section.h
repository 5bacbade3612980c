// Lock sections: the span from before a task's first bucket-lock
// instruction to after its last unlock (docs/design.md sections 2.8 and
// 2.9), counted per task so that a signal handler can tell whether its
// thread may hold a bucket lock, and so that work due at the outermost
// section's end (the section-exit hook, a collision growth) runs there. Its
// own file: the runtime and its tests ask about sections without the
// table's interface, and the state is per task, not per table.
#ifndef PARKLOT_HASH_LOCK_SECTION_H_
#define PARKLOT_HASH_LOCK_SECTION_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "base/shared_tls.h"

namespace parklot::internal {

class BucketTable;

// A task's lock sections (InLockSection): how many it has
// open, whether a signal handler asked for the section-exit hook, and the
// table it asks to grow for collisions (nullptr: none due), from which
// size to which. Two flags, not one bit field: a handler sets hook_due
// while its thread may be setting grow_table.
// `busy`: the task is inside MaybeGrow, a growth, or a fork's lock-all,
// any of which a signal handler may have interrupted: a collision growth
// at a section's end waits. Per task, as the depth: a task on shared TLS
// must not raise or lower its TLS owner's (docs/design.md section 2.11).
// `deferred_signals`: the signals (bit sig - 1) a handler wrapper kept
// blocked for the section's end (DeferSignalToSectionEnd).
struct SectionState {
  uint32_t sections;
  bool hook_due;
  uint32_t busy;
  BucketTable* grow_table;
  size_t grow_from;
  size_t grow_to;
  uint64_t deferred_signals;
};
// The calling thread's (constinit, initial-exec: one %fs-relative access,
// no TLS wrapper, reachable from a signal handler).
extern constinit __attribute__((tls_model("initial-exec"))) thread_local
    SectionState t_section;
// A task on another task's TLS (base/shared_tls.h) keeps its own state:
// the owner gets t_section, any other task an entry of a small table by
// kernel thread id, which `claim` takes if it has none (nullptr otherwise).
SectionState* SharedTlsSections(bool claim);
// The calling task's section state.
inline SectionState* Sections(bool claim) {
  if (__builtin_expect(!TlsMayBeShared(), 1)) return &t_section;
  return SharedTlsSections(claim);
}
// What the outermost section's end runs when something is due: the hook,
// and a collision growth of `table` (the ReadSection's; nullptr for the
// sections of a growth or a fork).
void LeaveOutermostSection(SectionState* s, BucketTable* table);
// EnterSection and LeaveSection on a TLS that was shared: out of line.
void EnterSharedTlsSection();
void LeaveSharedTlsSection(BucketTable* table);
// In a fork child, before anything else of the lot runs there: the child's
// one thread takes over the section state of the task that forked
// (`forking_tid`: the TLS owner's own, or its entry of the foreign
// sections) as its t_section, every foreign entry is freed (their tasks
// stayed in the parent), and the TLS is the child's alone
// (ResetSharedTlsInChild). Only where the TLS was shared.
void AdoptSectionsInForkChild(int32_t forking_tid);
// Opens a lock section: before the first lock instruction, so that a
// handler arriving while the lock is being taken already sees it.
inline void EnterSection() {
  if (__builtin_expect(TlsMayBeShared(), 0)) return EnterSharedTlsSection();
  ++t_section.sections;
  std::atomic_signal_fence(std::memory_order_seq_cst);
}
// Closes one: after the unlock instruction. A handler arriving after the
// decrement sees no section and does its own work.
inline void LeaveSection(BucketTable* table) {
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (__builtin_expect(TlsMayBeShared(), 0)) return LeaveSharedTlsSection(table);
  if (--t_section.sections != 0) return;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (__builtin_expect(t_section.hook_due || t_section.grow_table != nullptr, 0)) {
    LeaveOutermostSection(&t_section, table);
  }
}

// Lock sections and signal handlers (docs/design.md section 6, invariant 6).
// A bucket table's ReadSection is the lock section; the thread's section
// depth is counted in thread-local storage from before the first lock
// instruction to after the last unlock. A signal handler that interrupts its
// thread inside a section must not take a bucket lock (the thread may hold
// the very bucket it needs): it asks InLockSection(), queues its work, and
// calls RequestSectionExitHook(); the hook then runs on the thread as soon as
// its outermost section closes (the kernel's wake queues defer wakes the
// same way). All three are async-signal-safe.

// True while the calling task is inside a lock section. Inline: one
// %fs-relative load where the TLS is the thread's own (the served futex
// path and the signal wrapper ask on every call).
bool InSharedTlsSection();
inline bool InLockSection() {
  if (__builtin_expect(TlsMayBeShared(), 0)) return InSharedTlsSection();
  return t_section.sections != 0;
}
// A lock section around more than a bucket lock: one of the lot's own locks
// that is not a bucket's (the registry's), start-up (the configuration, the
// first table), and an unpark's wakes after its bucket section (a handler
// that left by siglongjmp between the two would strand the threads taken
// off the queue). A signal arriving inside is deferred as in a bucket's.
// `table`: the table whose collision growth may run at the section's end,
// as for a ReadSection (nullptr: none).
class SectionScope {
 public:
  explicit SectionScope(BucketTable* table = nullptr) : table_(table) {
    EnterSection();
  }
  ~SectionScope() { LeaveSection(table_); }
  SectionScope(const SectionScope&) = delete;
  SectionScope& operator=(const SectionScope&) = delete;

 private:
  BucketTable* const table_;
};
// Called by a signal handler wrapper (the shim's) first: if its task is
// inside a lock section and the signal is asynchronous (not a fault the
// interrupted instruction raised), keeps the signal blocked past the
// handler's return (in `ucontext`'s mask, and at once, for SA_NODEFER),
// queues it again to the task as it came (rt_tgsigqueueinfo, the same
// siginfo) and returns true: the wrapper returns without running the
// program's handler, and the kernel delivers the signal again when the
// outermost section's end unblocks it (docs/design.md section 2.9). So a
// program's handler never runs inside a lock section and never waits for
// a lock its own thread holds. False (run the handler now) outside a
// section, for a fault, or if the kernel refuses the queueing (the
// process's RLIMIT_SIGPENDING reached). Async-signal-safe; raw system
// calls only.
bool DeferSignalToSectionEnd(int sig, const void* siginfo, void* ucontext);
// True if signal `sig` with `siginfo` (the kernel's siginfo_t) is a fault
// the interrupted instruction raised (SIGSEGV, SIGBUS, SIGILL, SIGFPE,
// SIGTRAP or SIGSYS with a positive si_code), which belongs to that
// instruction and is neither deferred nor moved. Async-signal-safe.
bool SignalIsFault(int sig, const void* siginfo);
// Installs the process's section-exit hook (once, at start-up; the
// runtime's deferred-unpark runner). Not async-signal-safe.
void SetSectionExitHook(void (*hook)());
// Makes the hook run when the calling thread's outermost lock section
// closes. Call only while InLockSection().
void RequestSectionExitHook();

}  // namespace parklot::internal

#endif  // PARKLOT_HASH_LOCK_SECTION_H_
