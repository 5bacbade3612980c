// Tasks that share a thread's TLS. A task created by clone(2) with CLONE_VM
// but without CLONE_SETTLS (not pthread_create: some runtimes, sandboxes and
// the kernel's own futex selftests make them) runs on its creator's
// thread-local storage, so every per-thread variable of the lot is shared
// by two tasks that run at once. glibc's locks keep their state in the
// object alone and work between such tasks; the lot must too. Its creator
// calls NoteTlsSharingTask first (the preload shim's clone() does); from
// then on the lot's per-thread state that correctness rests on is kept per
// task on that TLS: the lock-section depth (hash/lock_section.cc, SectionState)
// and the parking record (runtime/parking_lot.cc, guest records). What
// stays shared is only approximate state: the owner slot a lock records
// (as glibc's owner tid, which such tasks share too), statistics counters,
// the collision-growth bookkeeping, the served futex path's re-entry count
// (not read on a foreign task). Tasks made by a raw clone system call
// without the call share everything, as before.
#ifndef PARKLOT_BASE_SHARED_TLS_H_
#define PARKLOT_BASE_SHARED_TLS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>

namespace parklot::internal {

// The kernel thread id of the task that owns this TLS, once
// NoteTlsSharingTask ran on it; 0 before (the common case: nothing is
// checked).
extern constinit __attribute__((tls_model("initial-exec"))) thread_local int32_t
    t_tls_owner;

// Records the calling task as the owner of its TLS, which a task it is
// about to create will share. Call before creating it. A task that itself
// runs on another's TLS keeps that owner. Makes one gettid system call.
// Async-signal-safe.
void NoteTlsSharingTask();

// Whether this TLS was ever shared (NoteTlsSharingTask ran on it): one
// TLS load.
inline bool TlsMayBeShared() { return t_tls_owner != 0; }

// The kernel's id of the calling task (gettid): not the id glibc keeps in
// TLS, which a task on shared TLS reads as its owner's. Async-signal-safe.
int32_t CurrentTaskId();

// The calling task's kernel thread id if it runs on TLS another task owns,
// else 0. Inline, for the served futex calls' dispatch: one TLS load where
// the TLS was never shared, one gettid elsewhere. Async-signal-safe.
inline int32_t ForeignTaskId() {
  const int32_t owner = t_tls_owner;
  if (owner == 0) return 0;
  const int32_t tid = CurrentTaskId();
  return tid != owner ? tid : 0;
}
inline bool OnForeignTls() { return ForeignTaskId() != 0; }

// Whether task `tid`, which shared this process's memory, has exited (a
// zombie included) or is gone: false while it runs, and where it cannot be
// told (a sandbox that refuses the probe). One process_vm_readv of a byte
// of our own memory from the task: the kernel answers ESRCH once the task
// has no memory, from its exit on, and opens no descriptor. A task id
// reused since by another process may read as running. For the recovery
// paths only (a lock or entry a killed task never gave back).
// Async-signal-safe.
bool TaskExited(int32_t tid);

// N entries of per-task state for tasks on another task's TLS (the lock
// sections' and the parking records'), keyed by kernel thread id, 0 free.
// Lock-free and async-signal-safe: a handler on a task finds its task's
// entry. constinit-constructible when T is. An entry's key word is a futex
// word in the kernel's robust-futex sense (its tid bits, FUTEX_OWNER_DIED):
// the parking records make it the one entry of their task's robust list,
// so the kernel marks it when the task dies (docs/design.md section 2.11).
template <typename T, size_t N>
class TaskSlots {
 public:
  static constexpr size_t kSize = N;
  // The entry `tid` holds, or nullptr.
  T* Find(int32_t tid) {
    for (Slot& s : slots_) {
      if (s.tid.load(std::memory_order_acquire) == tid) return &s.value;
    }
    return nullptr;
  }
  // The entry `tid` holds, as it was left; else a free one, claimed for
  // `tid` and reset to T's default state; nullptr when every entry is
  // taken (the caller decides what to do then: it must not wait for an
  // entry that a waiting task holds).
  T* FindOrClaim(int32_t tid) {
    if (T* held = Find(tid)) return held;
    for (Slot& s : slots_) {
      int32_t free = 0;
      if (s.tid.compare_exchange_strong(free, tid, std::memory_order_acquire)) {
        new (&s.value) T();
        return &s.value;
      }
    }
    return nullptr;
  }
  // Frees `entry` if `tid` still holds it: a handler on the task may have
  // freed it already, and another task claimed it since.
  void Release(T* entry, int32_t tid) {
    const size_t i = IndexOf(entry);
    if (i == N) return;
    slots_[i].tid.compare_exchange_strong(tid, 0, std::memory_order_release);
  }
  // Entry i, and its key word, for the owner's own scans (reclaiming the
  // entries of tasks that died).
  T& At(size_t i) { return slots_[i].value; }
  std::atomic<int32_t>& KeyAt(size_t i) { return slots_[i].tid; }
  // Whether `p` points into one of the entries (or its key word).
  bool Contains(const void* p) const {
    const uintptr_t first = reinterpret_cast<uintptr_t>(&slots_[0]);
    return reinterpret_cast<uintptr_t>(p) - first < sizeof(slots_);
  }
  // The index of the entry `p` points into (the entry itself or one of its
  // members), or N if it is not in one of these.
  size_t IndexOf(const void* p) const {
    if (!Contains(p)) return N;
    return (reinterpret_cast<uintptr_t>(p) -
            reinterpret_cast<uintptr_t>(&slots_[0])) / sizeof(Slot);
  }
  // In a fork child: every entry free (the tasks that held them stayed in
  // the parent).
  void ResetAll() {
    for (Slot& s : slots_) s.tid.store(0, std::memory_order_relaxed);
  }

 private:
  struct Slot {
    std::atomic<int32_t> tid{0};
    T value{};
  };
  Slot slots_[N];
};

// After fork(), in the child: its one thread owns its TLS alone. Called
// first of the child's fork steps (runtime/fork.h kSharedTls), once the
// forking task's own per-task state was copied where the owner keeps its.
void ResetSharedTlsInChild();

// A yield for the short waits of a task on shared TLS (a lock section's
// entry, all taken): sched_yield, so that 200 such tasks on 2 CPUs do not
// spin away the time slices of the ones that hold the entries.
void YieldForSharedTls();

}  // namespace parklot::internal

#endif  // PARKLOT_BASE_SHARED_TLS_H_
