#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "base/text.h"
#include "preload/own_libc.h"
#include "preload/shim.h"

namespace parklot::internal::preload {
namespace {

Glibc g_glibc;
std::atomic<bool> g_resolved{false};
// Byte offset of the tid in struct pthread; -1: unknown, use gettid.
std::atomic<long> g_tid_offset{-1};

pid_t TidAt(long offset) {
  return *reinterpret_cast<const pid_t*>(
      reinterpret_cast<uintptr_t>(pthread_self()) + offset);
}

// nptl_db's descriptor of struct pthread's tid: {bits, count, offset}.
void ResolveTidOffset() {
  const auto* desc = static_cast<const uint32_t*>(
      dlvsym(RTLD_NEXT, "_thread_db_pthread_tid", "GLIBC_PRIVATE"));
  if (desc == nullptr) {
    dlerror();  // the program's first dlerror() must not see this lookup
    return;
  }
  if (desc[0] != 8 * sizeof(pid_t) || desc[1] != 1) return;
  const long offset = desc[2];
  if (TidAt(offset) == gettid()) {
    g_tid_offset.store(offset, std::memory_order_relaxed);
    g_glibc_tid_offset = offset;
  }
}

template <typename F>
void Resolve(F* out, const char* name, const char* version) {
  // dlvsym, not dlsym: dlsym returns the oldest version, which for the
  // condvar is glibc 2.2.5's incompatible one.
  void* p = dlvsym(RTLD_NEXT, name, version);
  if (p == nullptr) {
    SayLine("parklot: glibc lacks %s@%s", name, version);
    abort();
  }
  *out = reinterpret_cast<F>(p);
}

}  // namespace

long g_glibc_tid_offset = -1;

const Glibc& RealGlibc() {
  if (g_resolved.load(std::memory_order_acquire)) return g_glibc;
  // Idempotent and racing resolvers write the same values.
  Glibc g = {};
  const bool aside = SteppingAside();
#define PARKLOT_RESOLVE(ret, name, params, args, version, needed) \
  if (needed || aside) Resolve(&g.name, #name, version);
#define PARKLOT_RESOLVE_V(ret, name, params, fparams, fargs, version, needed) \
  PARKLOT_RESOLVE(ret, name, params, fargs, version, needed)
  PARKLOT_SURFACE(PARKLOT_RESOLVE, PARKLOT_RESOLVE_V)
  PARKLOT_GLIBC_ALSO(PARKLOT_RESOLVE)
#undef PARKLOT_RESOLVE
#undef PARKLOT_RESOLVE_V
  g_glibc = g;
  ResolveTidOffset();
  g_resolved.store(true, std::memory_order_release);
  return g_glibc;
}

namespace {
using ClockGettime = int (*)(clockid_t, struct timespec*);
// Both null unless the program's clock_gettime is not glibc's.
ClockGettime g_program_clock;
ClockGettime g_kernel_clock;
void* g_program_clock_object;  // the base of the library that defines it
}  // namespace

void ResolveProgramClock() {
  // glibc's own, from libc's symbol table (RTLD_NEXT could find the faking
  // library; a dlopen of libc's handle allocated, in every process).
  auto kernel = reinterpret_cast<ClockGettime>(ParklotGlibcOwn("clock_gettime"));
  auto program =
      reinterpret_cast<ClockGettime>(dlsym(RTLD_DEFAULT, "clock_gettime"));
  // A failed lookup leaves no error for the program's first dlerror().
  if (program == nullptr) dlerror();
  if (program == nullptr || kernel == program) return;
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(program), &info) == 0) return;
  g_program_clock_object = info.dli_fbase;
  g_kernel_clock = kernel;
  g_program_clock = program;
}

Deadline ProgramDeadline(const struct timespec& ts, clockid_t clock,
                         const void* caller) {
  const Deadline d = Deadline::FromTimespec(ts, clock);
  if (g_program_clock == nullptr) return d;
  Dl_info info;
  if (caller != nullptr && dladdr(caller, &info) != 0 &&
      info.dli_fbase == g_program_clock_object) {
    return d;
  }
  struct timespec program, kernel;
  if (g_program_clock(clock, &program) != 0 || g_kernel_clock(clock, &kernel) != 0) return d;
  return d.Shifted(TimespecNanos(kernel) - TimespecNanos(program));
}

pid_t CurrentTid() {
  const long offset = g_tid_offset.load(std::memory_order_relaxed);
  return offset >= 0 ? TidAt(offset) : gettid();
}

}  // namespace parklot::internal::preload

using parklot::internal::preload::RealGlibc;

extern "C" {
int __pthread_mutex_init(pthread_mutex_t* m, const pthread_mutexattr_t* a) {
  return RealGlibc().pthread_mutex_init(m, a);
}
int __pthread_mutex_destroy(pthread_mutex_t* m) {
  return RealGlibc().pthread_mutex_destroy(m);
}
int __pthread_mutex_lock(pthread_mutex_t* m) {
  return RealGlibc().pthread_mutex_lock(m);
}
int __pthread_mutex_trylock(pthread_mutex_t* m) {
  return RealGlibc().pthread_mutex_trylock(m);
}
int __pthread_mutex_unlock(pthread_mutex_t* m) {
  return RealGlibc().pthread_mutex_unlock(m);
}
}
