// glibc's own definitions, found in libc's symbol table rather than through
// the loader's global scope, which the program or another preload can
// interpose (docs/design.md section 5.19, invariant 11).
#ifndef PARKLOT_PRELOAD_OWN_LIBC_H_
#define PARKLOT_PRELOAD_OWN_LIBC_H_

extern "C" {

// The address of libc's own definition of `name` at its default version
// (an indirect function resolved as the loader resolves it). Never fails
// on glibc 2.36 for the names the shim asks for; a name libc lacks ends
// the process with one line on stderr. Thread-safe and async-signal-safe:
// no lock, no allocation, no system call (lookup.cc).
void* ParklotGlibcOwn(const char* name);

// Resolves every libc function the shim calls (own_libc.c), at once: the
// shim's constructor calls it so that no first call resolves later on a
// signal handler's stack or inside a lock section. Thread-safe.
void ParklotResolveOwnLibc();

}  // extern "C"

#endif  // PARKLOT_PRELOAD_OWN_LIBC_H_
