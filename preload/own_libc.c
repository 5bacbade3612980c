// glibc's own definitions for every libc function the shim calls
// (docs/design.md section 5.19, invariant 11).
//
// A call from a shared object to a libc function binds, through the
// loader's global scope, to the first definition of the name: the
// program's, if it exports one (Firefox's executable exports its own
// getenv, which locks a pthread mutex), or another preload's. Such a
// definition may lock, wait or call back into pthreads, so a shim that
// reached it during start-up or inside a lock section would wait on itself.
// Each function below is therefore defined in the shim, hidden: every call
// the shim's code makes (also the compiler's own memcpy and memset, and the
// pieces of Abseil and libsupc++ linked in) binds here at link time, and
// forwards to the definition libc itself exports, found once in libc's
// symbol table (ParklotGlibcOwn, lookup.cc). An indirect function (memcpy,
// strlen, ...) is resolved as the loader resolves it.
//
// What stays an import is listed, with the reason for each, in
// shim_imports.txt, which //tests/preload:shim_imports_test compares with
// the built shim: the allocator (malloc, realloc, free: memory the program's
// allocator may have to free, used only by diagnostics and dlopen
// bookkeeping, never at start-up or in a lock section), the loader's
// bootstrap (_dl_find_object, __tls_get_addr), the unwinder (libgcc_s, for
// cancellation) and data.
//
// Each forwarder costs what a call through the PLT costs: one load and an
// indirect jump. Resolution is lazy and idempotent: racing resolvers store
// the same pointer. C, not C++: glibc's headers declare the functions with
// exception specifications a C++ definition would have to repeat, and the
// C compiler checks each definition against the header's prototype.
#undef _FORTIFY_SOURCE
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HIDDEN \
  __attribute__((visibility("hidden"), no_sanitize("address", "undefined")))

HIDDEN void* ParklotGlibcOwn(const char* name);

// The pointer to glibc's `name`, resolved on first use.
#define OWN_FN(name)                                                   \
  static __typeof__(&name) Own_##name(void) {                          \
    static __typeof__(&name) fn;                                       \
    __typeof__(&name) f = __atomic_load_n(&fn, __ATOMIC_RELAXED);      \
    if (__builtin_expect(f == NULL, 0)) {                              \
      f = (__typeof__(&name))ParklotGlibcOwn(#name);                   \
      __atomic_store_n(&fn, f, __ATOMIC_RELAXED);                      \
    }                                                                  \
    return f;                                                          \
  }

// A forwarder for a function with a value: `params` as declared, `args`
// the names passed on.
#define OWN(ret, name, params, args) \
  OWN_FN(name)                       \
  HIDDEN ret name params { return Own_##name() args; }
#define OWN_VOID(name, params, args) \
  OWN_FN(name)                       \
  HIDDEN void name params { Own_##name() args; }

// Not declared by the public headers.
int __register_atfork(void (*prepare)(void), void (*parent)(void),
                      void (*child)(void), void* dso_handle);
int __cxa_atexit(void (*fn)(void*), void* arg, void* dso_handle);
void __stack_chk_fail(void) __attribute__((noreturn));
// pthread.h declares these only without _GNU_SOURCE.
void _pthread_cleanup_push(struct _pthread_cleanup_buffer* buffer,
                           void (*routine)(void*), void* arg);
void _pthread_cleanup_pop(struct _pthread_cleanup_buffer* buffer, int execute);

// The compiler emits memcpy, memset, memmove and memcmp for copies and
// zeroing, also in the code that finds libc's symbols: while one of them is
// being resolved, a call of any of them takes a plain loop (written so that
// the compiler does not turn it back into a call), so resolution never
// recurses.
static int g_resolving_mem;

#define NO_CALLS                                                \
  __attribute__((optimize("no-tree-loop-distribute-patterns"), \
                 no_sanitize("address", "undefined")))
NO_CALLS static void* CopyBytes(void* d, const void* s, size_t n) {
  unsigned char* to = d;
  const unsigned char* from = s;
  if (to < from) {
    for (size_t i = 0; i < n; ++i) to[i] = from[i];
  } else {
    for (size_t i = n; i > 0; --i) to[i - 1] = from[i - 1];
  }
  return d;
}
NO_CALLS static void* SetBytes(void* d, int c, size_t n) {
  unsigned char* to = d;
  for (size_t i = 0; i < n; ++i) to[i] = (unsigned char)c;
  return d;
}
NO_CALLS static int CompareBytes(const void* a, const void* b, size_t n) {
  const unsigned char *x = a, *y = b;
  for (size_t i = 0; i < n; ++i) {
    if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
  }
  return 0;
}

#define OWN_MEM(ret, name, params, args, fallback)                    \
  static __typeof__(&name) Own_##name(void) {                         \
    static __typeof__(&name) fn;                                      \
    __typeof__(&name) f = __atomic_load_n(&fn, __ATOMIC_RELAXED);     \
    if (__builtin_expect(f == NULL, 0)) {                             \
      if (__atomic_exchange_n(&g_resolving_mem, 1, __ATOMIC_ACQUIRE)) \
        return NULL;                                                  \
      f = (__typeof__(&name))ParklotGlibcOwn(#name);                  \
      __atomic_store_n(&fn, f, __ATOMIC_RELAXED);                     \
      __atomic_store_n(&g_resolving_mem, 0, __ATOMIC_RELEASE);        \
    }                                                                 \
    return f;                                                         \
  }                                                                   \
  HIDDEN ret name params {                                            \
    __typeof__(&name) f = Own_##name();                               \
    if (__builtin_expect(f == NULL, 0)) return fallback args;         \
    return f args;                                                    \
  }
#define OWN_NORETURN(name) \
  OWN_FN(name)             \
  HIDDEN void name(void) {  \
    Own_##name()();        \
    __builtin_unreachable(); \
  }

#include "preload/own_libc_functions.h"

// The variadic ones.
HIDDEN int snprintf(char* s, size_t n, const char* f, ...) {
  va_list ap;
  va_start(ap, f);
  const int r = vsnprintf(s, n, f, ap);
  va_end(ap);
  return r;
}
HIDDEN int sprintf(char* s, const char* f, ...) {
  va_list ap;
  va_start(ap, f);
  const int r = vsprintf(s, f, ap);
  va_end(ap);
  return r;
}
OWN_FN(open)
HIDDEN int open(const char* path, int flags, ...) {
  mode_t mode = 0;
  if ((flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE) {
    va_list ap;
    va_start(ap, flags);
    mode = va_arg(ap, mode_t);
    va_end(ap);
  }
  return Own_open()(path, flags, mode);
}

// Resolves every forwarder at once: called by the shim's constructor, so
// that no first call resolves later on a signal handler's (alternate)
// stack or inside a lock section, where the lookup's frames would add
// their depth. A call earlier than the constructor resolves on demand.
HIDDEN void ParklotResolveOwnLibc(void) {
#undef OWN
#undef OWN_VOID
#undef OWN_MEM
#undef OWN_NORETURN
#define OWN(ret, name, params, args) (void)Own_##name();
#define OWN_VOID(name, params, args) (void)Own_##name();
#define OWN_MEM(ret, name, params, args, fallback) (void)Own_##name();
#define OWN_NORETURN(name) (void)Own_##name();
#include "preload/own_libc_functions.h"
  (void)Own_open();
}
