// The compat symbol versions glibc 2.36 defines for the served functions
// (exports.lds gives every served function its default version, as glibc:
// sem_wait@@GLIBC_2.34, pthread_cond_wait@@GLIBC_2.3.2, ...). Each entry
// exports the function under its compat version too (sem_wait@GLIBC_2.2.5),
// so dlsym, dlvsym (every version) and a program bound to either version
// all reach the shim. The condvars' GLIBC_2.2.5 (the old condvar ABI) is not
// defined: it stays glibc's.
//
// The mechanism is glibc's compat_symbol: a global alias of the definition
// (parklot_v_NAME_VERSION; exports.lds makes the name local) carries the
// .symver. It needs gold (the shim's linkopts): GNU ld drops the default
// version of a name that also has a .symver'd compat version. A .symver names
// a symbol of its own assembly file, so each group is written once, at file
// scope, in the file that defines the exported symbol: surface.cc for the
// served names (their exported stubs, surface.h), deepbind.cc for dlopen and
// dlmopen. The group comments say where each name is implemented.
// tests/preload/symbol_versions_test checks the result against libc.so.6.
#ifndef PARKLOT_PRELOAD_SYMBOL_VERSIONS_H_
#define PARKLOT_PRELOAD_SYMBOL_VERSIONS_H_

#define PARKLOT_COMPAT(name, tag, ver)                 \
  __asm__(".globl parklot_v_" #name "_" #tag "\n\t"    \
          ".set parklot_v_" #name "_" #tag ", " #name "\n\t" \
          ".symver parklot_v_" #name "_" #tag ", " #name "@" ver)
#define PARKLOT_V225(name) PARKLOT_COMPAT(name, 225, "GLIBC_2.2.5")
// glibc's __pthread_* names: compat-only (GLIBC_2.2.5) since 2.34, where
// libpthread merged into libc, and bound by binaries linked before it;
// each is an alias of the public function at one address in glibc, so the
// shim's is the public one too. Without them such a binary took glibc's
// lock on a mutex the shim's unlock released (an assertion in glibc).
#define PARKLOT_ALIAS225(alias, name)                          \
  __asm__(".globl parklot_v_" #alias "_225\n\t"               \
          ".set parklot_v_" #alias "_225, " #name "\n\t"      \
          ".symver parklot_v_" #alias "_225, " #alias "@GLIBC_2.2.5")
#define PARKLOT_V228(name) PARKLOT_COMPAT(name, 228, "GLIBC_2.28")
#define PARKLOT_V230(name) PARKLOT_COMPAT(name, 230, "GLIBC_2.30")

// mutex_shim.cc: the hooked names, defined there.
#define PARKLOT_VERSIONS_MUTEX_HOOKED                            \
  PARKLOT_ALIAS225(__pthread_mutex_lock, pthread_mutex_lock);    \
  PARKLOT_ALIAS225(__pthread_mutex_unlock, pthread_mutex_unlock)
// surface.cc (stubs; implementations in mutex_shim.cc)
#define PARKLOT_VERSIONS_MUTEX                           \
  PARKLOT_ALIAS225(__pthread_mutex_trylock, pthread_mutex_trylock); \
  PARKLOT_ALIAS225(__pthread_mutex_init, pthread_mutex_init);       \
  PARKLOT_ALIAS225(__pthread_mutex_destroy, pthread_mutex_destroy); \
  PARKLOT_V225(pthread_mutex_trylock);   \
  PARKLOT_V225(pthread_mutex_timedlock); \
  PARKLOT_V230(pthread_mutex_clocklock);  \
  PARKLOT_V228(mtx_init);                 \
  PARKLOT_V228(mtx_lock);                 \
  PARKLOT_V228(mtx_trylock);              \
  PARKLOT_V228(mtx_timedlock);            \
  PARKLOT_V228(mtx_unlock);               \
  PARKLOT_V228(mtx_destroy)

// cond_shim.cc
#define PARKLOT_VERSIONS_COND                           \
  PARKLOT_V230(pthread_cond_clockwait);  \
  PARKLOT_V228(cnd_init);                \
  PARKLOT_V228(cnd_wait);                \
  PARKLOT_V228(cnd_timedwait);           \
  PARKLOT_V228(cnd_signal);              \
  PARKLOT_V228(cnd_broadcast);           \
  PARKLOT_V228(cnd_destroy)

// surface.cc (stubs; implementations in rwlock_shim.cc, which reaches
// glibc's through RealGlibc() for the rwlocks glibc keeps)
#define PARKLOT_VERSIONS_RWLOCK                              \
  PARKLOT_ALIAS225(__pthread_rwlock_init, pthread_rwlock_init);         \
  PARKLOT_ALIAS225(__pthread_rwlock_destroy, pthread_rwlock_destroy);   \
  PARKLOT_ALIAS225(__pthread_rwlock_rdlock, pthread_rwlock_rdlock);     \
  PARKLOT_ALIAS225(__pthread_rwlock_wrlock, pthread_rwlock_wrlock);     \
  PARKLOT_ALIAS225(__pthread_rwlock_tryrdlock, pthread_rwlock_tryrdlock); \
  PARKLOT_ALIAS225(__pthread_rwlock_trywrlock, pthread_rwlock_trywrlock); \
  PARKLOT_ALIAS225(__pthread_rwlock_unlock, pthread_rwlock_unlock);     \
  PARKLOT_V225(pthread_rwlock_init);         \
  PARKLOT_V225(pthread_rwlock_destroy);      \
  PARKLOT_V225(pthread_rwlock_rdlock);       \
  PARKLOT_V225(pthread_rwlock_wrlock);       \
  PARKLOT_V225(pthread_rwlock_tryrdlock);    \
  PARKLOT_V225(pthread_rwlock_trywrlock);    \
  PARKLOT_V225(pthread_rwlock_timedrdlock);  \
  PARKLOT_V225(pthread_rwlock_timedwrlock);  \
  PARKLOT_V230(pthread_rwlock_clockrdlock);   \
  PARKLOT_V230(pthread_rwlock_clockwrlock);   \
  PARKLOT_V225(pthread_rwlock_unlock)

// barrier_shim.cc
#define PARKLOT_VERSIONS_BARRIER                        \
  PARKLOT_V225(pthread_barrier_init);   \
  PARKLOT_V225(pthread_barrier_wait);   \
  PARKLOT_V225(pthread_barrier_destroy)

// sem_shim.cc
#define PARKLOT_VERSIONS_SEM                      \
  PARKLOT_V225(sem_init);         \
  PARKLOT_V225(sem_destroy);      \
  PARKLOT_V225(sem_wait);         \
  PARKLOT_V225(sem_trywait);      \
  PARKLOT_V225(sem_timedwait);    \
  PARKLOT_V230(sem_clockwait);     \
  PARKLOT_V225(sem_post);         \
  PARKLOT_V225(sem_getvalue)

// once_shim.cc
#define PARKLOT_VERSIONS_ONCE                 \
  PARKLOT_ALIAS225(__pthread_once, pthread_once); \
  PARKLOT_V225(pthread_once); \
  PARKLOT_V228(call_once)

// sched_shim.cc (pthread_setschedprio's compat version is libpthread's,
// now in libc)
#define PARKLOT_VERSIONS_SCHED \
  PARKLOT_COMPAT(pthread_setschedprio, 234, "GLIBC_2.3.4")

// deepbind.cc (dlopen's compat version is libdl's, now in libc)
#define PARKLOT_VERSIONS_DEEPBIND       \
  PARKLOT_V225(dlopen); \
  PARKLOT_COMPAT(dlmopen, 234, "GLIBC_2.3.4")

// lookup.cc (dlsym's and dlvsym's compat version is libdl's, now in libc)
#define PARKLOT_VERSIONS_LOOKUP \
  PARKLOT_V225(dlsym);          \
  PARKLOT_V225(dlvsym)

#endif  // PARKLOT_PRELOAD_SYMBOL_VERSIONS_H_
