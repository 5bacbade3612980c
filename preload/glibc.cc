#include <dlfcn.h>

#include "absl/base/internal/raw_logging.h"
#include "preload/shim.h"

namespace parklot::preload {
namespace {

Glibc g_glibc;
std::atomic<bool> g_resolved{false};

template <typename F>
void Resolve(F* out, const char* name, const char* version) {
  // dlvsym, not dlsym: dlsym returns the oldest version, which for the
  // condvar is glibc 2.2.5's incompatible one.
  void* p = dlvsym(RTLD_NEXT, name, version);
  if (p == nullptr) {
    ABSL_RAW_LOG(FATAL, "parklot: glibc lacks %s@%s", name, version);
  }
  *out = reinterpret_cast<F>(p);
}

}  // namespace

const Glibc& RealGlibc() {
  if (g_resolved.load(std::memory_order_acquire)) return g_glibc;
  // Idempotent and racing resolvers write the same values.
  Glibc g;
  Resolve(&g.mutex_init, "pthread_mutex_init", "GLIBC_2.2.5");
  Resolve(&g.mutex_destroy, "pthread_mutex_destroy", "GLIBC_2.2.5");
  Resolve(&g.mutex_lock, "pthread_mutex_lock", "GLIBC_2.2.5");
  Resolve(&g.mutex_trylock, "pthread_mutex_trylock", "GLIBC_2.2.5");
  Resolve(&g.mutex_unlock, "pthread_mutex_unlock", "GLIBC_2.2.5");
  Resolve(&g.mutex_timedlock, "pthread_mutex_timedlock", "GLIBC_2.2.5");
  Resolve(&g.mutex_clocklock, "pthread_mutex_clocklock", "GLIBC_2.30");
  Resolve(&g.cond_init, "pthread_cond_init", "GLIBC_2.3.2");
  Resolve(&g.cond_destroy, "pthread_cond_destroy", "GLIBC_2.3.2");
  Resolve(&g.cond_wait, "pthread_cond_wait", "GLIBC_2.3.2");
  Resolve(&g.cond_timedwait, "pthread_cond_timedwait", "GLIBC_2.3.2");
  Resolve(&g.cond_clockwait, "pthread_cond_clockwait", "GLIBC_2.30");
  Resolve(&g.cond_signal, "pthread_cond_signal", "GLIBC_2.3.2");
  Resolve(&g.cond_broadcast, "pthread_cond_broadcast", "GLIBC_2.3.2");
  Resolve(&g.rwlock_timedrdlock, "pthread_rwlock_timedrdlock", "GLIBC_2.2.5");
  Resolve(&g.rwlock_timedwrlock, "pthread_rwlock_timedwrlock", "GLIBC_2.2.5");
  Resolve(&g.rwlock_clockrdlock, "pthread_rwlock_clockrdlock", "GLIBC_2.30");
  Resolve(&g.rwlock_clockwrlock, "pthread_rwlock_clockwrlock", "GLIBC_2.30");
  Resolve(&g.sem_init, "sem_init", "GLIBC_2.2.5");
  Resolve(&g.sem_destroy, "sem_destroy", "GLIBC_2.2.5");
  Resolve(&g.sem_wait, "sem_wait", "GLIBC_2.2.5");
  Resolve(&g.sem_trywait, "sem_trywait", "GLIBC_2.2.5");
  Resolve(&g.sem_timedwait, "sem_timedwait", "GLIBC_2.2.5");
  Resolve(&g.sem_clockwait, "sem_clockwait", "GLIBC_2.30");
  Resolve(&g.sem_post, "sem_post", "GLIBC_2.2.5");
  Resolve(&g.sem_getvalue, "sem_getvalue", "GLIBC_2.2.5");
  Resolve(&g.barrier_init, "pthread_barrier_init", "GLIBC_2.2.5");
  Resolve(&g.barrier_destroy, "pthread_barrier_destroy", "GLIBC_2.2.5");
  Resolve(&g.barrier_wait, "pthread_barrier_wait", "GLIBC_2.2.5");
  Resolve(&g.sigaction, "sigaction", "GLIBC_2.2.5");
  Resolve(&g.dlopen, "dlopen", "GLIBC_2.34");
  g_glibc = g;
  g_resolved.store(true, std::memory_order_release);
  return g_glibc;
}

}  // namespace parklot::preload

using parklot::preload::RealGlibc;

extern "C" {
int __pthread_mutex_init(pthread_mutex_t* m, const pthread_mutexattr_t* a) {
  return RealGlibc().mutex_init(m, a);
}
int __pthread_mutex_destroy(pthread_mutex_t* m) {
  return RealGlibc().mutex_destroy(m);
}
int __pthread_mutex_lock(pthread_mutex_t* m) {
  return RealGlibc().mutex_lock(m);
}
int __pthread_mutex_trylock(pthread_mutex_t* m) {
  return RealGlibc().mutex_trylock(m);
}
int __pthread_mutex_unlock(pthread_mutex_t* m) {
  return RealGlibc().mutex_unlock(m);
}
}
