// Calling glibc so that it sees the program's caller (deepbind.cc's
// assembly): glibc's dlopen and dlsym read their return address to find
// the calling object. Used by deepbind.cc and lookup.cc.
#ifndef PARKLOT_PRELOAD_CALL_AS_H_
#define PARKLOT_PRELOAD_CALL_AS_H_

#include <stdint.h>

extern "C" {
// Calls fn(a, b, c) with `gadget` (the address of a `ret` byte in the
// calling object) as its return address; the `ret` returns to the caller
// of ParklotCallAs.
__attribute__((visibility("hidden"))) void* ParklotCallAs(const void* fn,
                                                          uintptr_t a,
                                                          uintptr_t b,
                                                          uintptr_t c,
                                                          uintptr_t gadget);
// The shadow-stack pointer, 0 when shadow stacks are off (rdssp is a no-op
// then): with them on, a return to a gadget would fault.
__attribute__((visibility("hidden"))) uintptr_t ParklotShadowStack();
}

#endif  // PARKLOT_PRELOAD_CALL_AS_H_
