// The interface between the shim and its diagnostics object,
// libparklot_diag.so: what the shim loads, with dlopen, only when a PARKLOT_*
// knob asks for a diagnostic that needs a symbolizer or a graph
// (PARKLOT_STATS names call sites, PARKLOT_DEADLOCK keeps a lock-order
// graph). The shim itself loads with libc alone (docs/design.md
// section 5.1); the diagnostics object links Abseil's shared libraries and
// libstdc++, which a plain run then never maps.
//
// One C entry point, parklot_diag_open, and two tables of function
// pointers: what the shim lends the object (DiagHost) and what the object
// gives back (DiagHooks). The object links none of the shim's code (a
// second copy of the lot would be a second lot); it reaches the shim's state
// through DiagHost alone, and has no thread-local storage of its own (a
// dlopen'ed object's TLS is allocated on each thread's first access, by
// malloc, inside a lock).
#ifndef PARKLOT_PRELOAD_DIAG_DIAG_H_
#define PARKLOT_PRELOAD_DIAG_DIAG_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace parklot::internal::preload {

// How a lock is held or wanted (the deadlock detector's modes).
enum class LockMode : uint8_t {
  kExclusive,   // a mutex
  kWrite,       // an rwlock's write lock
  kRead,        // a reader-preferring rwlock's read lock (waits for writers)
  kReadQueued,  // a writer-preferring rwlock's read lock (also waits behind
                // waiting writers, who wait for readers)
};

// Changed whenever either table changes: the shim refuses an object from
// another build.
inline constexpr uint32_t kDiagVersion = 2;

// The file's name; the shim loads it from its own directory (DiagPath).
inline constexpr char kDiagFileName[] = "libparklot_diag.so";

// The shim's services, valid for the life of the process.
struct DiagHost {
  // The calling thread's registry index and slot id (slot ids start at 1),
  // registering the thread as its first lot operation would; false once the
  // lot's exit hook has run for it (later destructors may still lock), and
  // for a thread that runs without a registry index (no memory for one).
  bool (*thread)(uint32_t* index, uint32_t* slot);
  // The calling thread's kernel tid, without a system call (CurrentTid).
  pid_t (*tid)();
  // Registers the deadlock graph's fork step (ForkStep::kDeadlockGraph).
  void (*fork_step)(bool (*prepare)(), void (*parent)(), void (*child)());
  // Writes a diagnostic report (Sink::kReport: PARKLOT_REPORT or stderr).
  void (*report)(const char* text, size_t size);
  // "FUNCTION+0xOFF (MODULE+0xADDR)" for a return address (report.h).
  void (*describe_call_site)(const void* pc, char* buf, size_t size);
  // The shim's load address (dladdr's dli_fbase): its frames are left out
  // of the stacks a report prints.
  const void* shim_base;
};

// The object's functions (deadlock.h says what each does).
struct DiagHooks {
  // The function containing `addr` (an instruction address), and `addr`'s
  // offset into it; false if no symbol table names it.
  bool (*symbolize)(uintptr_t addr, char* name, size_t size,
                    uintptr_t* offset);
  // Maps the detector's tables; false (said on the report sink) if it
  // cannot. `abort_on_deadlock`: PARKLOT_DEADLOCK=abort.
  bool (*deadlock_enable)(bool abort_on_deadlock);
  void (*before_lock)(const void* lock, LockMode mode, const void* site);
  void (*acquired)(const void* lock, LockMode mode, const void* site);
  const void* (*released)(const void* lock);
  void (*forget)(const void* lock);
  void (*waiting)(const void* lock, LockMode mode, const void* site);
  void (*check_wait)();
  // A lock in static storage named by its symbol ("hot_lock",
  // "table+0x40"); false elsewhere (heap, stack) or without a symbol.
  bool (*name_lock)(uintptr_t lock, char* buf, size_t size);
  // "file.c:123 function" for an instruction address (a return address
  // minus 1) where its module has DWARF line information; false otherwise.
  bool (*describe_line)(uintptr_t pc, char* buf, size_t size);
};

// Inside the object: deadlock.cc's part of DiagHooks.
void InstallDeadlockHooks(const DiagHost* host, DiagHooks* hooks);
// names.cc's part: name_lock and describe_line (elfutils' libdwfl).
void InstallNameHooks(DiagHooks* hooks);

}  // namespace parklot::internal::preload

// Fills `*hooks` and keeps `*host` (both outlive the call) if `version` is
// the object's kDiagVersion; returns 0, else -1 and fills nothing.
extern "C" int parklot_diag_open(uint32_t version,
                                 const parklot::internal::preload::DiagHost* host,
                                 parklot::internal::preload::DiagHooks* hooks);

#endif  // PARKLOT_PRELOAD_DIAG_DIAG_H_
