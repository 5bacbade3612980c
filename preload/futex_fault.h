// SIGSEGV and SIGBUS for the served futex path (docs/design.md section
// 5.7): the accessors through which a served call touches the caller's
// memory, and the handler that turns their faults into -EFAULT while every
// other fault gets the program's own action. Apart from futex_ops.cc's
// operations because it is a subsystem of its own: it owns the process's
// two fault actions (ProgramSigaction, futex_ops.h), whatever the
// operations do.
#ifndef PARKLOT_PRELOAD_FUTEX_FAULT_H_
#define PARKLOT_PRELOAD_FUTEX_FAULT_H_

#include <cstdint>

// The caller's memory. Each access is one instruction that may fault; the
// fault handler (futex_fault.cc) resumes a faulting one at
// parklot_user_fault, which returns -EFAULT having written nothing, as the
// kernel's user accessors do. Leaf functions that touch no stack, so
// resuming there returns to the caller.
//   parklot_user_load32(addr, out)   *out = *(uint32_t*)addr
//   parklot_user_load64(addr, out)   *out = *(uint64_t*)addr (any alignment)
//   parklot_user_cmpxchg32(addr, expected, desired)
//       atomic compare-and-exchange (a write access even when it differs):
//       0 exchanged, 1 differed (*expected = the value found)
extern "C" {
__attribute__((visibility("hidden"))) int parklot_user_load32(const void* addr,
                                                              uint32_t* out);
__attribute__((visibility("hidden"))) int parklot_user_load64(const void* addr,
                                                              uint64_t* out);
__attribute__((visibility("hidden"))) int parklot_user_cmpxchg32(
    void* addr, uint32_t* expected, uint32_t desired);
}

namespace parklot::internal::futex {

// Puts the fault handler in front of the program's SIGSEGV and SIGBUS
// actions, which it keeps (ProgramSigaction). Once, from Init(), before the
// first served call.
void InstallFaultHandler();

}  // namespace parklot::internal::futex

#endif  // PARKLOT_PRELOAD_FUTEX_FAULT_H_
