// Calling glibc so that it sees the program's caller: glibc's dlopen and
// dlsym read their return address to find the calling object. The shim
// calls them with a return address inside that object, a `ret` byte of its
// code (the return gadget), which returns to the shim. Used by deepbind.cc
// and lookup.cc; the gadget search and the trampoline are in call_as.cc.
#ifndef PARKLOT_PRELOAD_CALL_AS_H_
#define PARKLOT_PRELOAD_CALL_AS_H_

#include <link.h>
#include <stdint.h>

namespace parklot::internal::preload {

// A `ret` byte to return through, and where ParklotCallAs must store the
// callee-saved registers for a stack walk to pass it (`saves`: byte i, for
// rbx, r12, r13, r14, r15 in that order, is 0 or the slot k at which the
// gadget's unwind rules read the register, %rbp - 8k in ParklotCallAs's
// frame).
struct ReturnGadget {
  uintptr_t address = 0;
  uint64_t saves = 0;
};

// The return gadget in the code of the object loaded at `base` with these
// program headers: a `ret` byte where the object's unwind tables let a
// stack walk (backtrace(), gdb, C++ exceptions) step through to
// ParklotCallAs's caller, else its first `ret` byte (walks stop there), else
// address 0. Reads only the object's mapped segments; no allocation, no
// system call.
ReturnGadget FindReturnGadget(uintptr_t base, const ElfW(Phdr)* phdr,
                              int phnum);

}  // namespace parklot::internal::preload

extern "C" {
// Calls fn(a, b, c) with `gadget` (the address of a `ret` byte in the
// calling object) as its return address; the `ret` returns to the caller
// of ParklotCallAs. `saves` as ReturnGadget::saves.
__attribute__((visibility("hidden"))) void* ParklotCallAs(
    const void* fn, uintptr_t a, uintptr_t b, uintptr_t c, uintptr_t gadget,
    uint64_t saves);
// The shadow-stack pointer, 0 when shadow stacks are off (rdssp is a no-op
// then): with them on, a return to a gadget would fault.
__attribute__((visibility("hidden"))) uintptr_t ParklotShadowStack();
}

#endif  // PARKLOT_PRELOAD_CALL_AS_H_
