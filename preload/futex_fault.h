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

// The caller's memory. Each access is one instruction that may fault,
// listed in the section parklot_user_access with where a fault there
// resumes (PARKLOT_USER_ACCESS); the fault handler (futex_fault.cc) finds
// it there and resumes it without having written anything, as the
// kernel's user accessors do (its exception table).
//   ReadUser32(addr, out)   *out = *(uint32_t*)addr, inline: false (and
//                           *out untouched) where it faulted
//   parklot_user_load64(addr, out)   *out = *(uint64_t*)addr (any alignment)
//   parklot_user_cmpxchg32(addr, expected, desired)
//       atomic compare-and-exchange (a write access even when it differs):
//       0 exchanged, 1 differed (*expected = the value found)
// The two functions return -EFAULT where they faulted: leaf functions that
// touch no stack, whose fault resumes at parklot_user_fault, which returns.

// One entry of the table, in the assembler: the faulting instruction's
// label and the resume address, as offsets from the entry (no relocation).
#define PARKLOT_USER_ACCESS(insn, resume)                  \
  ".pushsection parklot_user_access, \"a\"\n\t"            \
  ".balign 4\n\t"                                          \
  ".long " insn " - ., " resume " - .\n\t"                 \
  ".popsection\n\t"

extern "C" {
__attribute__((visibility("hidden"))) int parklot_user_load64(const void* addr,
                                                              uint64_t* out);
__attribute__((visibility("hidden"))) int parklot_user_cmpxchg32(
    void* addr, uint32_t* expected, uint32_t desired);
}

namespace parklot::internal::futex {

// Inline, for the served wait's first read (no call, no register saved
// around one): a fault resumes at the label `fault`.
[[gnu::always_inline]] inline bool ReadUser32(const uint32_t* addr,
                                              uint32_t* out) {
  uint32_t v;
  asm goto("1:\tmovl (%1), %0\n\t" PARKLOT_USER_ACCESS("1b", "%l[fault]")
           : "=r"(v)
           : "r"(addr), "m"(*addr)
           :
           : fault);
  *out = v;
  return true;
fault:
  return false;
}


// Puts the fault handler in front of the program's SIGSEGV and SIGBUS
// actions, which it keeps (ProgramSigaction). Once, from Init(), before the
// first served call.
void InstallFaultHandler();

}  // namespace parklot::internal::futex

#endif  // PARKLOT_PRELOAD_FUTEX_FAULT_H_
