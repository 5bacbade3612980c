// The shim's description of itself for debuggers (parklot_debug_info),
// read by the gdb extension `info parklot` (tools/gdb/parklot_gdb.py) in a
// live process or a core file, without the shim's debug information (an
// installed shim is stripped): where a thread's data lies in its TLS, how
// it leads to its queue record, and the offsets of the fields, the way
// glibc describes its thread descriptor to libthread_db (the _thread_db_*
// symbols), and by `parklot top` (tools/parklot_top.cc), which reads it from
// another process with process_vm_readv and, having no thread's %fs_base
// without ptrace, finds the threads through the registry it describes.
// Read-only for the program; one 96-byte object, written once at load.
// docs/design.md §5.17.
#include <stddef.h>
#include <stdint.h>

#include "runtime/registry.h"
#include "runtime/thread_data.h"
#include "sync/mutex.h"
#include "sync/shared_mutex.h"

namespace parklot::internal::preload {

struct DebugInfo {
  uint32_t magic;    // 'PKLT'
  uint32_t version;  // of this layout; a reader refuses others
  // The thread data's (ThreadData) address minus the thread pointer
  // (%fs_base), the same for every thread (static TLS); 0 until the shim's
  // constructor ran.
  int64_t data_tls_offset;
  // In the thread data: the address of the thread's queue record
  // (ParkRecord); where it is 0, the record is the one at
  // own_record_offset in the thread data (a thread that never parked
  // reads as not queued there).
  uint32_t record_pointer_offset;
  uint32_t key_offset;     // in the record, uintptr_t: the address waited on
  uint32_t parker_offset;  // in the record, uint32_t: kParkerQueued if queued
  uint32_t parker_queued;
  uint32_t slot_offset;    // in the thread data, uint32_t: the owner id
                           // locks record
  // A mutex the shim runs: its word (offset 0) in glibc's values, locked
  // while 1 or 2 (MutexCore); the holder's slot, uint32_t, at this offset
  // in the mutex (MutexMeta in __list; 0: none). Layout version 3; before
  // it the slot was in the word's high bits.
  uint32_t mutex_slot_offset;
  uint32_t mutex_locked_max;  // the largest locked value: 2
  // An rwlock word the shim runs (64 bits): writer bits, writer's slot <<
  // shift, in a field of so many bits. (The slot moved from the low to the
  // high half in layout version 1: a reader of the low half finds slot
  // 0, no holder, never a wrong one.)
  uint32_t rwlock_writer_bit;
  uint32_t rwlock_slot_shift;
  uint32_t rwlock_slot_bits;
  // In the thread data, int64_t: CLOCK_REALTIME_COARSE ns at the thread's
  // last queueing.
  uint32_t parked_since_offset;
  uint32_t own_record_offset;  // in the thread data
  // Layout version 3: the registry (runtime/registry.h registry::Layout),
  // addresses in this process: the array of chunk_count chunk pointers,
  // each chunk with chunk_slots ThreadData pointers at by_index_offset, and
  // the highest registry index handed out (uint32_t), after the 64 bytes
  // the gdb extension reads.
  uint64_t registry_chunks;
  uint64_t registry_highest;
  uint32_t registry_chunk_count;
  uint32_t registry_chunk_slots;
  uint32_t registry_by_index_offset;
  uint32_t reserved;
};
static_assert(sizeof(DebugInfo) == 96, "a fixed layout");

}  // namespace parklot::internal::preload

namespace {

// Offsets within ThreadData and ParkRecord: their members are plain fields
// and std::atomic of trivial types, laid out as a standard-layout struct
// would be.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
using parklot::internal::ParkRecord;
using parklot::internal::ThreadData;
constexpr uint32_t kRecordPointerOffset = offsetof(ThreadData, record);
constexpr uint32_t kOwnRecordOffset = offsetof(ThreadData, own_record);
constexpr uint32_t kMutexSlotOffset =
    offsetof(pthread_mutex_t, __data.__list) +
    offsetof(parklot::internal::MutexMeta, owner);
constexpr uint32_t kKeyOffset = offsetof(ParkRecord, waiter) +
                                offsetof(parklot::internal::Waiter, key);
constexpr uint32_t kParkerOffset = offsetof(ParkRecord, parker);
constexpr uint32_t kSlotOffset = offsetof(ThreadData, slot);
constexpr uint32_t kParkedSinceOffset = offsetof(ThreadData, parked_since_ns);
#pragma GCC diagnostic pop

}  // namespace

extern "C" {
__attribute__((visibility("default"), used))
parklot::internal::preload::DebugInfo parklot_debug_info = {
        0x544c4b50,  // "PKLT" little-endian
        3,
        0,
        kRecordPointerOffset,
        kKeyOffset,
        kParkerOffset,
        parklot::internal::kParkerQueued,
        kSlotOffset,
        kMutexSlotOffset,
        parklot::internal::MutexCore::kLockedParked,
        static_cast<uint32_t>(parklot::internal::SharedMutexCore::kWriter),
        parklot::internal::SharedMutexCore::kOwnerShift,
        static_cast<uint32_t>(__builtin_popcountll(
            parklot::internal::SharedMutexCore::kOwnerMask)),
        kParkedSinceOffset,
        kOwnRecordOffset,
        0, 0, 0, 0, 0, 0,  // the registry's, set below
};
}  // extern "C"

namespace {

// The TLS offset is known only once the process runs; %fs:0 holds the
// thread pointer itself on x86-64.
__attribute__((constructor)) void NoteRecordOffset() {
  uintptr_t tp;
  __asm__("movq %%fs:0, %0" : "=r"(tp));
  parklot_debug_info.data_tls_offset = static_cast<int64_t>(
      reinterpret_cast<uintptr_t>(&parklot::internal::t_data) - tp);
  const parklot::internal::registry::Layout r =
      parklot::internal::registry::DebugLayout();
  parklot_debug_info.registry_chunks = reinterpret_cast<uintptr_t>(r.chunks);
  parklot_debug_info.registry_highest = reinterpret_cast<uintptr_t>(r.highest);
  parklot_debug_info.registry_chunk_count = r.chunk_count;
  parklot_debug_info.registry_chunk_slots = r.chunk_slots;
  parklot_debug_info.registry_by_index_offset = r.by_index_offset;
}

}  // namespace
