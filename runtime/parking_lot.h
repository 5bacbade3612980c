// The parking lot: threads wait in user space, queued by the address (key)
// they wait on, and sleep on a private futex word of their own.
//
// The API follows WebKit's ParkingLot and Rust's parking_lot_core, in the
// field's terms: park, unpark, requeue, filter, tokens, eventual fairness.
// Every function is thread-safe and async-cancel-unsafe. None calls malloc
// itself, with one exception per thread: the first Park or unpark (but
// UnparkUpTo, which never registers) registers the calling thread
// (CurrentThreadData), and registration calls pthread_setspecific, which
// callocs when the program holds 32 or more pthread keys. Later calls on
// that thread do not
// allocate (a table growth, at a registration, maps memory: never malloc).
// Callbacks are absl::FunctionRef and run on the calling thread; those
// documented as running "under the bucket lock" must not park, unpark, or
// block, and should be short.
//
// Signal handlers (docs/design.md section 6, invariant 6). A handler may
// interrupt its thread anywhere, including inside a lock section (bucket locks
// held). From a handler, only these are allowed:
//   - UnparkUpTo: async-signal-safe at every instruction of every other
//     lot path. Inside a lock section it defers the unpark to the moment
//     the section closes, on the same thread, and returns 0.
//   - EnterSignalHandler / LeaveSignalHandler (the preload shim wraps every
//     handler in them).
// Park and the other unparks take bucket locks with callbacks that cannot
// be deferred: from a handler that interrupted a lock section they may
// deadlock on a bucket the thread holds; elsewhere in a handler they work
// (a Park there turns the interrupted code's own wait into a spurious
// wake-up), but they register the thread on first use, which allocates.
//
// Leaving a wait without the lot's help (siglongjmp out of a handler): the
// thread's queue record stays behind, marked by EnterSignalHandler. It is
// never handed a resource or a notification: an unparker that meets it
// removes it and wakes the next thread instead. The thread's next Park, or
// its exit, removes it if no unparker did. (Not its next unpark: Park's
// before_sleep, which runs while the thread is queued, may unpark, as a
// condvar wait unlocks its mutex there.)
//
// Queue order: the threads parked on one key are queued highest real-time
// priority first (SCHED_FIFO and SCHED_RR threads by their sched_priority,
// every other thread below them as one level) and first come first served
// among equals, as the kernel orders a futex's waiters; "first" below
// means first in that order. A thread's priority is taken when it queues
// (SchedulingChanged says how the lot learns of it); a requeued thread
// keeps it and takes its place by it among the new key's waiters.
//
// Invariant (docs/design.md section 6, invariant 1: no lost wake-up):
// `validate` runs with the key's bucket locked, and every unpark locks the same
// bucket, so a waker that changes the waited-on word and then unparks cannot
// miss a waiter that validated the old word.
#ifndef PARKLOT_RUNTIME_PARKING_LOT_H_
#define PARKLOT_RUNTIME_PARKING_LOT_H_

#include <cstddef>
#include <cstdint>

#include "absl/functional/function_ref.h"
#include "runtime/deadline.h"

namespace parklot::internal {

// Opaque values passed from a parker to an unparker's filter (ParkToken) and
// from an unparker to the woken thread (UnparkToken).
using ParkToken = uintptr_t;
using UnparkToken = uintptr_t;
inline constexpr ParkToken kDefaultParkToken = 0;
inline constexpr UnparkToken kDefaultUnparkToken = 0;
// As a token mask (UnparkUpTo): every parked thread, whatever its token.
inline constexpr ParkToken kAnyParkToken = ~ParkToken{0};

struct ParkResult {
  enum Kind {
    kUnparked,  // woken by an unpark; `token` is the unparker's token
    kInvalid,   // validate() returned false; the thread did not sleep
    kTimedOut,  // the deadline passed first; left_queue() was called
    // A signal handler interrupted the sleep inside an InterruptiblePark
    // scope; the thread left the queue as on a timeout (left_queue() was
    // called).
    kInterrupted,
  };
  Kind kind;
  UnparkToken token;  // meaningful for kUnparked only
  // kUnparked: the park token the thread had when it was released, which a
  // requeue may have changed (kRequeuedParkToken). Read from the record the
  // thread parked on, which on a shared TLS may be a guest record.
  ParkToken park_token = 0;

  bool unparked() const { return kind == kUnparked; }
  bool invalid() const { return kind == kInvalid; }
  bool timed_out() const { return kind == kTimedOut; }
  bool interrupted() const { return kind == kInterrupted; }
};

// What an unpark did, as its callback sees it (under the bucket lock).
struct UnparkResult {
  size_t unparked_threads = 0;
  size_t requeued_threads = 0;
  // Whether threads remain parked on the key after this operation (for
  // requeue: on the `from` key). Lets a lock clear its "parked" bit.
  bool have_more_threads = false;
  // The bucket's fairness timer fired: the caller should hand its resource
  // directly to the woken thread instead of releasing it for barging.
  bool be_fair = false;
};

// Parks the calling thread on `key` until unparked or `deadline`.
//
// With the key's bucket locked, calls `validate`; if it returns false the
// thread does not park and kInvalid is returned. Otherwise the thread is
// queued with `park_token`, the bucket unlocked,
// `before_sleep` called, and the thread sleeps. If the deadline passes
// first, the thread dequeues itself and calls `left_queue(key,
// was_last_thread)` under the bucket lock, where `key` is the key it was
// parked on at that moment (another one if UnparkRequeue moved it) and
// `was_last_thread` tells whether no other thread is parked on that key;
// kTimedOut is returned. `left_queue` runs the same way whenever the park
// ends without an unpark: on a timeout, an interruption (InterruptiblePark)
// and a cancellation (CancellationPoint); never when an unparker released
// the thread first. Signals and spurious futex returns never end the park
// early, except inside an InterruptiblePark scope (below).
ParkResult Park(uintptr_t key, absl::FunctionRef<bool()> validate,
                absl::FunctionRef<void()> before_sleep,
                absl::FunctionRef<void(uintptr_t key, bool was_last_thread)>
                    left_queue,
                ParkToken park_token, Deadline deadline);

// Park with no callbacks beyond `validate`, no token, no deadline.
ParkResult Park(uintptr_t key, absl::FunctionRef<bool()> validate);

// Unparks the first thread parked on `key`, if any. `callback` runs under
// the bucket lock before the thread is released, sees what happened
// (unparked_threads is 0 or 1) and returns the token the thread receives.
// It runs even when no thread was parked, so a lock can update its word
// atomically with respect to parkers. Returns what the callback saw.
UnparkResult UnparkOne(uintptr_t key,
                       absl::FunctionRef<UnparkToken(UnparkResult)> callback);

// Unparks every thread parked on `key`, each receiving `token`. Returns the
// number unparked. Every unpark that releases more than 32 threads at once
// (this one, UnparkUpTo, UnparkFilter, UnparkPair) releases them all under
// the bucket lock, as any unpark does, but makes only two of the wake
// system calls itself: each woken thread wakes up to two more before its
// Park returns (a wake tree; docs/design.md section 3.3.1).
size_t UnparkAll(uintptr_t key, UnparkToken token = kDefaultUnparkToken);

// Unparks up to `count` threads parked on `key`, in queue order, skipping
// those whose park token shares no bit with `token_mask` (kAnyParkToken:
// none skipped, so FUTEX_BITSET_MATCH_ANY wakes every served waiter); each
// receives
// kDefaultUnparkToken. Returns the number unparked. Async-signal-safe (see
// the top of this file): called from a handler that interrupted its thread
// inside a lock section, it queues the unpark, which that thread runs as
// soon as the section closes (as a kernel wake queue would), and returns 0.
// Never registers the calling thread. Used for sem_post and the served
// FUTEX_WAKE, which POSIX and the kernel allow in handlers.
size_t UnparkUpTo(uintptr_t key, size_t count,
                  ParkToken token_mask = kAnyParkToken);

// Whether a primitive's release path that may run in a signal handler
// (sem_post) must keep to UnparkUpTo now: the calling thread is inside a
// lock section (so this is a handler that interrupted it there), or it has
// not registered (the other unparks would register it, which is not
// async-signal-safe). Async-signal-safe; one thread-local load each.
bool OnlyUnparkUpToIsSafe();

enum class RequeueOp {
  kAbort,                 // do nothing
  kUnparkOneRequeueRest,  // wake the first, move the rest to `to`
  kRequeueAll,            // move all to `to`
  kUnparkOne,             // wake the first, leave the rest
  kRequeueOne,            // move only the first to `to`
  kUnparkAll,             // wake every thread on `from` (a wake tree above
                          // 32), move none
  kRequeueAllRetagged,    // as kRequeueAll; each moved thread's park token
                          // becomes kRequeuedParkToken
};

// The park token kRequeueAllRetagged gives the threads it moves: a thread
// that finds it in ParkRecord::park_token after its park knows it was
// moved as one of a crowd (CondVar: the first of a broadcast's crowd that
// the mutex's unlock wakes wakes the rest, sync/condvar.cc).
inline constexpr ParkToken kRequeuedParkToken = ~(~ParkToken{0} >> 1);

// An unpark of more than this many threads at once wakes them by a wake
// tree (UnparkAll): the unparker makes two of the wake calls, whatever the
// number. UnparkRequeue's counting `validate` sees the threads parked on
// `from` counted up to kWakeTreeMin.
inline constexpr size_t kWakeSerialMax = 32;
inline constexpr size_t kWakeTreeMin = kWakeSerialMax + 1;

// Moves threads parked on `from` to `to` (wait morphing: a condvar
// broadcast moves its waiters onto the mutex instead of waking them).
// `validate` runs with both buckets locked and chooses the operation;
// `callback(op, result)` runs still under the locks and returns the token
// for the unparked thread. Requeued threads join `to` behind the threads
// already parked there, keeping their order. Returns what was done.
UnparkResult UnparkRequeue(
    uintptr_t from, uintptr_t to, absl::FunctionRef<RequeueOp()> validate,
    absl::FunctionRef<UnparkToken(RequeueOp, UnparkResult)> callback);

// As UnparkRequeue, but `validate(parked)` also sees how many threads are
// parked on `from`, counted up to kWakeTreeMin (kWakeTreeMin: that many or
// more), so that it can choose between moving a crowd and waking it
// (CondVar's broadcast: docs/design.md section 4). Counting scans the
// bucket's queue until it has found kWakeTreeMin.
UnparkResult UnparkRequeueCounted(
    uintptr_t from, uintptr_t to,
    absl::FunctionRef<RequeueOp(size_t parked)> validate,
    absl::FunctionRef<UnparkToken(RequeueOp, UnparkResult)> callback);

enum class FilterOp { kUnpark, kSkip, kStop };

// Calls `filter(park_token)` for each thread parked on `key`, in queue
// order, under the bucket lock: kUnpark wakes it, kSkip leaves it, kStop
// ends the scan. `callback(result)` then runs under the lock and returns the
// token every woken thread receives. Returns the result.
UnparkResult UnparkFilter(
    uintptr_t key, absl::FunctionRef<FilterOp(ParkToken)> filter,
    absl::FunctionRef<UnparkToken(UnparkResult)> callback);

// Within its scope, the calling thread's parks are POSIX cancellation
// points (pthread_cond_wait, sem_wait, ...): while asleep the thread is in
// asynchronous cancellation mode. A cancelled park leaves the queue as a
// timed-out one would (its left_queue callback runs), records in
// ThreadData::unwound_unparked/unwound_token whether an unparker had
// released it first, and lets the cancellation unwind; the primitive's own
// unwinding cleanup then restores its invariants (re-locks the mutex, passes
// on a consumed notification). Not thread-safe across threads: per thread.
class CancellationPoint {
 public:
  CancellationPoint();
  ~CancellationPoint();
  CancellationPoint(const CancellationPoint&) = delete;
  CancellationPoint& operator=(const CancellationPoint&) = delete;
};

// Within its scope, the calling thread's parks can be interrupted by
// signals, with the kernel's own restart rules, as futex(2) waits are: the
// sleep is a FUTEX_WAIT_BITSET on the thread's parker, untimed for a park
// with no deadline (the kernel restarts it after an SA_RESTART handler, and
// ends it with EINTR after any other handler) and timed otherwise (ended
// with EINTR after any handler). A park so ended leaves the queue as a
// timed-out one would (its left_queue callback runs) and returns
// kInterrupted; one that an unparker released first returns kUnparked.
// Signals with no handler (ignored, or stop/continue) never end a park.
// Used by the preload shim to serve syscall(SYS_futex) waits. Per thread;
// scopes nest.
class InterruptiblePark {
 public:
  InterruptiblePark();
  ~InterruptiblePark();
  InterruptiblePark(const InterruptiblePark&) = delete;
  InterruptiblePark& operator=(const InterruptiblePark&) = delete;
};

// What UnparkPair should do, chosen by its `plan` callback under both
// bucket locks. Counts are upper bounds; 0 skips the step.
struct PairPlan {
  size_t unpark_from = 0;  // 1. wake up to this many threads parked on `from`
  size_t requeue = 0;      // 2. then move up to this many more to `to`
  size_t unpark_to = 0;    // 3. then wake up to this many parked on `to`
};

// What UnparkPair did.
struct PairResult {
  bool aborted = false;  // `plan` returned false: nothing was done
  size_t unparked_from = 0;
  size_t requeued = 0;
  size_t unparked_to = 0;
};

// The futex(2) operations on two keys (FUTEX_REQUEUE, FUTEX_CMP_REQUEUE,
// FUTEX_WAKE_OP) in one step: with the buckets of `from` and `to` both
// locked (once if they are the same bucket), calls `plan`, which may read
// and update words atomically with respect to parkers of either key and
// fills in the counts, or returns false to abort. Then, still under the
// locks, takes the threads to wake and requeue in queue order per key, in
// the order of PairPlan's fields (so with from == to, step 3 wakes threads
// beyond those of step 1; requeued threads join `to`'s queue by priority,
// behind those of their priority already parked there, and keep their park
// tokens). Woken threads
// receive `token`; no fairness is computed. `from` may equal `to`.
PairResult UnparkPair(uintptr_t from, uintptr_t to,
                      absl::FunctionRef<bool(PairPlan*)> plan,
                      UnparkToken token = kDefaultUnparkToken);

// Brackets a signal handler's run on its thread (the preload shim's
// handler wrapper calls them around every handler the program installs).
// If the thread is queued in a wait, EnterSignalHandler marks its record
// so that no unparker hands it a resource while the handler may leave by
// siglongjmp (see the top of this file); LeaveSignalHandler, run if the
// handler returns, clears the mark again. If the thread was just released
// as part of a wake tree (see UnparkAll) and still owes its share of the
// wake-ups, EnterSignalHandler makes them first. The record is the calling
// task's own: on a TLS that another task shares (below), a task other than
// the TLS's owner has the guest record it parks on, if any, never the
// owner's. Async-signal-safe; `scope` lives in the wrapper's frame. A
// program that links the library and has a handler that may leave by
// siglongjmp calls these itself.
struct ParkRecord;
struct SignalHandlerScope {
  ParkRecord* marked = nullptr;  // the record marked away, if any
};
void EnterSignalHandler(SignalHandlerScope* scope);
void LeaveSignalHandler(const SignalHandlerScope& scope);

// Tasks that share a thread's TLS (base/shared_tls.h): on a TLS where
// NoteTlsSharingTask ran, Park asks which task is parking, and a task
// other than the TLS's owner parks on a guest record of its own
// (AcquireGuestData), so two tasks never share one queue record.

// Tells the lot that a thread's scheduling policy or priority may have
// changed (sched_setscheduler, sched_setparam, pthread_setschedparam,
// pthread_setschedprio) or that real-time threads may be made (a
// SCHED_FIFO or SCHED_RR thread attribute); `real_time`: the new policy is
// SCHED_FIFO or SCHED_RR. Until a process started real-time or a call with
// `real_time` true, every thread queues as a non-real-time one and no park
// asks the kernel for a priority; from then on each thread reads its own
// priority again (one sched_getparam) at its first park after each call.
// The preload shim calls it from those functions; a program that links the
// library calls parklot::SchedulingChanged (sync/scheduling.h), which
// forwards here. Async-signal-safe; never blocks.
void SchedulingChanged(bool real_time);

// Helpers for keys: the address of the waited-on object.
inline uintptr_t KeyOf(const void* p) { return reinterpret_cast<uintptr_t>(p); }

}  // namespace parklot::internal

#endif  // PARKLOT_RUNTIME_PARKING_LOT_H_
