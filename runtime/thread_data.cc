#include "runtime/thread_data.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <new>

#include "base/anon_mmap.h"
#include "base/futex.h"
#include "base/shared_tls.h"
#include "runtime/fork.h"

namespace parklot::internal {
// Initial-exec TLS: the preload shim is loaded at start-up, so this lands
// in the static TLS block; no __tls_get_addr, no allocation on first touch.
constinit __attribute__((tls_model("initial-exec"))) thread_local ThreadData t_data;
constinit __attribute__((tls_model("initial-exec"))) thread_local bool t_registered;
constinit std::atomic<void (*)(ParkRecord*)> g_wake_duty_hook{nullptr};
// Guest records (GuestRecords).
constinit PARKLOT_LARGE_BSS GuestSlots g_guest_records;
constinit std::atomic<uint32_t> g_sched_generation{0};
namespace {

// The calling task's real-time priority: its sched_priority, which is
// 1..99 under SCHED_FIFO and SCHED_RR and 0 under every other policy
// (SCHED_DEADLINE included). A raw system call: no errno, and safe in a
// signal handler.
uint8_t OwnRealTimePriority() {
  struct sched_param param = {};
  const long rc = RawSyscall6(SYS_sched_getparam, 0,
                              reinterpret_cast<long>(&param), 0, 0, 0, 0);
  if (rc != 0 || param.sched_priority <= 0) return 0;
  return static_cast<uint8_t>(param.sched_priority > 255 ? 255
                                                         : param.sched_priority);
}

// Each guest record's robust list (WatchGuestLife): a head whose
// one entry names the record's key word, which holds the tid of the task
// that claimed the record. Filled at load time and never changed: a task
// whose list still names a record that another task claimed since dies
// without effect on it (the kernel marks the word only if it holds the
// dying task's tid).
struct GuestLife {
  struct robust_list_head head;
  struct robust_list entry;
};
GuestLife g_guest_life[kGuestRecords];

void InitGuestLives() {
  for (size_t i = 0; i < kGuestRecords; ++i) {
    GuestLife& l = g_guest_life[i];
    l.head.list.next = &l.entry;
    l.entry.next = &l.head.list;
    l.head.futex_offset =
        reinterpret_cast<char*>(&g_guest_records.KeyAt(i)) -
        reinterpret_cast<char*>(&l.entry);
    l.head.list_op_pending = nullptr;
  }
}

// The task that is forking, where the TLS was shared (ForkStep::kSharedTls).
// Written by the forking task only: glibc serializes forks' handlers.
int32_t g_forking_tid;

bool SharedTlsForkPrepare() {
  if (!TlsMayBeShared()) return false;
  g_forking_tid = CurrentTaskId();
  return true;
}

// The child's first step: its one thread owns the TLS from here on, with
// the forking task's own state (docs/design.md section 3.11).
void SharedTlsForkChild() {
  AdoptSectionsInForkChild(g_forking_tid);
  // A task that forked from a signal handler while it was parked on its
  // guest record comes back to a sleep on it: released, as the lot's fork
  // step releases t_data (registry::ResetInForkChild; the queues are
  // emptied), never to be woken otherwise.
  if (ThreadData* mine = g_guest_records.Find(g_forking_tid)) {
    ParkRecord* r = mine->Record();
    r->unpark_token = 0;  // kDefaultUnparkToken (parking_lot.h)
    r->wake_duty_count.store(0, std::memory_order_relaxed);
    r->parker.store(0, std::memory_order_relaxed);
  }
  // The tasks that held the others stayed in the parent.
  g_guest_records.ResetAll();
}

constexpr ForkHandlers kSharedTlsForkStep{SharedTlsForkPrepare, nullptr,
                                          SharedTlsForkChild};

// At load time: the fork step of tasks on a shared TLS, and the guest
// records' robust lists.
__attribute__((constructor)) void AtLoad() {
  RegisterForkStep(ForkStep::kSharedTls, &kSharedTlsForkStep);
  InitGuestLives();
}

}  // namespace

// A process that starts real-time (chrt, a real-time parent, posix_spawn
// with POSIX_SPAWN_SETSCHEDULER) queues by priority from its first park:
// one sched_getparam at load time, before main and any sandbox, the
// start-up exception of docs/design.md section 6, invariant 9. Its threads
// inherit the policy without a call the shim sees.
void ReadStartupScheduling() {
  const uint8_t priority = OwnRealTimePriority();
  if (priority == 0) return;
  uint32_t expected = 0;
  g_sched_generation.compare_exchange_strong(
      expected, 1, std::memory_order_release, std::memory_order_relaxed);
}

void ReleaseGuestData(ThreadData* td, int32_t tid) {
  g_guest_records.Release(td, tid);
}

uint8_t RefreshQueuePriority(ThreadData* td, uint32_t generation) {
  td->sched_priority = OwnRealTimePriority();
  td->sched_generation = generation;
  return td->sched_priority;
}

void SchedulingChanged(bool real_time) {
  uint32_t g = g_sched_generation.load(std::memory_order_relaxed);
  uint32_t next;
  do {
    // Nobody real-time yet, and nobody becoming so: nothing to re-read.
    if (g == 0 && !real_time) return;
    next = g + 1 == 0 ? 1 : g + 1;  // 0 stays "never real-time"
    // Release: a thread that sees the new generation reads its priority
    // after the change that bumped it.
  } while (!g_sched_generation.compare_exchange_weak(
      g, next, std::memory_order_release, std::memory_order_relaxed));
}

bool GuestTaskDied(const ParkRecord* r) {
  // The guest whose own_record `r` is.
  const size_t i = g_guest_records.IndexOf(r);
  return i < kGuestRecords &&
         (g_guest_records.KeyAt(i).load(std::memory_order_acquire) &
          FUTEX_OWNER_DIED) != 0;
}

void WatchGuestLife(size_t index) {
  struct robust_list_head* const mine = &g_guest_life[index].head;
  long head = 0;
  size_t len = 0;
  if (RawSyscall6(SYS_get_robust_list, 0, reinterpret_cast<long>(&head),
                  reinterpret_cast<long>(&len), 0, 0, 0) != 0) {
    return;
  }
  const auto* current = reinterpret_cast<const GuestLife*>(head);
  if (head == reinterpret_cast<long>(mine)) return;
  // A list this task set up itself (a raw clone child starts with none) is
  // the program's: replacing it would lose its robust futexes.
  if (head != 0 && (current < &g_guest_life[0] ||
                    current >= &g_guest_life[kGuestRecords])) {
    return;
  }
  RawSyscall6(SYS_set_robust_list, reinterpret_cast<long>(mine),
              sizeof(*mine), 0, 0, 0, 0);
}

ThreadData* FindGuestData(int32_t tid) { return g_guest_records.Find(tid); }

// Async-cancel-safe: atomics and the futex system call only.
__attribute__((noinline)) bool SleepOnParkerLoop(ThreadData* td,
                                                 ParkRecord* r,
                                                 const struct timespec* tsp,
                                                 int op);

bool SleepOnParker(ThreadData* td, ParkRecord* r, const Deadline& deadline) {
  td->interrupted = false;
  struct timespec ts;
  int op;
  const struct timespec* tsp = deadline.FutexWait(&ts, &op);
  int cancel_type = PTHREAD_CANCEL_DEFERRED;
  if (td->cancellation_point != 0) {
    // Acts at once on a pending cancel: the thread unwinds from here.
    pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &cancel_type);
  }
  const bool released = SleepOnParkerLoop(td, r, tsp, op);
  if (td->cancellation_point != 0) pthread_setcanceltype(cancel_type, nullptr);
  // Before anything else the released thread does: the threads it is to
  // wake wait on nothing but this.
  if (released) RunWakeDuty(r);
  return released;
}

bool SleepOnParkerLoop(ThreadData* td, ParkRecord* r,
                       const struct timespec* tsp, int op) {
  std::atomic<uint32_t>& parker = r->parker;
  for (;;) {
    uint32_t v = parker.load(std::memory_order_acquire);
    if (v == 0) return true;
    if ((v & kParkerAsleep) == 0) {
      // Tells unparkers to FUTEX_WAKE; fails if one (or a signal handler's
      // kParkerAway) changed the word meanwhile: look again.
      if (!parker.compare_exchange_strong(v, v | kParkerAsleep,
                                          std::memory_order_acquire)) {
        continue;
      }
      v |= kParkerAsleep;
    }
    long rc = RawFutex(&parker, op, v, tsp, nullptr, FUTEX_BITSET_MATCH_ANY);
    if (rc == -ETIMEDOUT) {
      return parker.load(std::memory_order_acquire) == 0;
    }
    if (rc == -EINTR && td->interruptible != 0) {
      // A handler ran and the kernel chose not to restart the sleep.
      td->interrupted = true;
      return parker.load(std::memory_order_acquire) == 0;
    }
    // 0 (woken, maybe spuriously), -EAGAIN (the word changed), -EINTR
    // (a signal handler ran): re-check the word.
  }
}

bool ReleaseParker(ParkRecord* r, uintptr_t token) {
  r->unpark_token = token;
  return (r->parker.exchange(0, std::memory_order_release) & kParkerAsleep) !=
         0;
}

bool ClaimParker(ParkRecord* r) {
  uint32_t v = r->parker.load(std::memory_order_relaxed);
  while ((v & kParkerAway) == 0) {
    if (r->parker.compare_exchange_weak(v, v | kParkerClaimed,
                                        std::memory_order_acq_rel,
                                        std::memory_order_relaxed)) {
      return true;
    }
  }
  return false;
}

void WakeParker(ParkRecord* r) { FutexWakePrivate(&r->parker, 1); }

void RunWakeDutySlow(ParkRecord* r) {
  const uint32_t n = r->wake_duty_count.load(std::memory_order_acquire);
  if (n == 0) return;
  if (auto* hook = g_wake_duty_hook.load(std::memory_order_relaxed)) {
    hook(r);
  }
  for (uint32_t i = 0; i < n && i < kWakeFanout; ++i) {
    FutexWakePrivate(r->wake_duty[i].load(std::memory_order_relaxed), 1);
  }
  // A handler that interrupted the loop above ran the whole duty itself
  // (and perhaps a new one, from a park inside it, which it also ran):
  // nothing is left either way.
  r->wake_duty_count.store(0, std::memory_order_relaxed);
}

}  // namespace parklot::internal
