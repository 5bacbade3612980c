// The shim's interposition surface in one table: every function it exports
// under a glibc name, with the version of glibc's own that it resolves.
//
// Under Valgrind the shim steps aside: every exported name runs glibc's own
// function, so that helgrind and DRD, which intercept glibc's functions by
// their soname, see every call (docs/design.md section 5.14 says why rather
// than client requests). The decision is taken once, at load, before any
// code of the shim or of the libraries it needs runs (surface.cc), and is
// the bit kHookStepAside of g_lock_hooks (shim.h).
//
// From the table:
//   - `Glibc`, glibc's implementations (RealGlibc(), shim.h), resolved by
//     dlvsym at the listed version (glibc.cc);
//   - for the rows of PARKLOT_SURFACE_STUBBED, the exported function itself
//     (surface.cc): three instructions, a test of the step-aside bit and a
//     jump to the shim's implementation, or to a forwarder to glibc's
//     function (jumps: both see the caller's frame and return address, as
//     if called directly);
//   - for PARKLOT_SURFACE_HOOKED, the uncontended mutex lock and unlock,
//     nothing: those functions are exported as the shim's code, whose fast
//     path already tests g_lock_hooks for the statistics and deadlock hooks;
//     the step-aside bit sends them to their slow path, which goes to glibc
//     (mutex_shim.cc), so the fast path has not one more instruction.
//
// The implementations of the stubbed names keep their glibc names in the
// source; this header gives each the assembler name parklot_serve_NAME, so
// that the exported NAME is free for the stub, and the shim's own calls
// (mtx_lock to pthread_mutex_trylock, ...) go straight to its code. Every
// file that defines or calls a served function includes it (through
// shim.h).
//
// Rows: F(return type, name, parameters, arguments, version, needed), or,
// for the one variadic function, V(return type, name, parameters,
// forwarder's parameters, forwarder's arguments, version, needed).
// `version` is the one dlvsym asks for: glibc 2.36 defines every version of
// a served name (sem_wait@GLIBC_2.2.5 and @GLIBC_2.34, ...) at one address
// (tests/preload:symbol_versions_test checks), so this is the function a
// program bound to any of them calls. `needed`: 1 where the shim calls
// glibc's function in every process (objects glibc keeps: process-shared,
// robust, priority; the signal calls), 0 where only the step-aside
// forwarder does, resolved only under Valgrind (each dlvsym is about half a
// microsecond of every process's start).
//
// The condvars' GLIBC_2.2.5 (the old condvar ABI) is not exported and stays
// glibc's; symbol_versions.h adds the compat versions, exports.lds the
// default ones.
#ifndef PARKLOT_PRELOAD_SURFACE_H_
#define PARKLOT_PRELOAD_SURFACE_H_

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

// clang-format off
#define PARKLOT_SURFACE_HOOKED(F)                                              \
  F(int, pthread_mutex_lock, (pthread_mutex_t* m), (m), "GLIBC_2.2.5", 1)      \
  F(int, pthread_mutex_unlock, (pthread_mutex_t* m), (m), "GLIBC_2.2.5", 1)

#define PARKLOT_SURFACE_STUBBED(F, V)                                          \
  F(int, pthread_mutex_init, (pthread_mutex_t* m, const pthread_mutexattr_t* a), (m, a), "GLIBC_2.2.5", 1) \
  F(int, pthread_mutex_destroy, (pthread_mutex_t* m), (m), "GLIBC_2.2.5", 1)   \
  F(int, pthread_mutex_trylock, (pthread_mutex_t* m), (m), "GLIBC_2.34", 1)    \
  F(int, pthread_mutex_timedlock, (pthread_mutex_t* m, const struct timespec* t), (m, t), "GLIBC_2.34", 1) \
  F(int, pthread_mutex_clocklock, (pthread_mutex_t* m, clockid_t k, const struct timespec* t), (m, k, t), "GLIBC_2.34", 1) \
  F(int, pthread_cond_init, (pthread_cond_t* c, const pthread_condattr_t* a), (c, a), "GLIBC_2.3.2", 1) \
  F(int, pthread_cond_destroy, (pthread_cond_t* c), (c), "GLIBC_2.3.2", 1)     \
  F(int, pthread_cond_wait, (pthread_cond_t* c, pthread_mutex_t* m), (c, m), "GLIBC_2.3.2", 1) \
  F(int, pthread_cond_timedwait, (pthread_cond_t* c, pthread_mutex_t* m, const struct timespec* t), (c, m, t), "GLIBC_2.3.2", 1) \
  F(int, pthread_cond_clockwait, (pthread_cond_t* c, pthread_mutex_t* m, clockid_t k, const struct timespec* t), (c, m, k, t), "GLIBC_2.34", 1) \
  F(int, pthread_cond_signal, (pthread_cond_t* c), (c), "GLIBC_2.3.2", 1)      \
  F(int, pthread_cond_broadcast, (pthread_cond_t* c), (c), "GLIBC_2.3.2", 1)   \
  F(int, pthread_rwlock_init, (pthread_rwlock_t* rw, const pthread_rwlockattr_t* a), (rw, a), "GLIBC_2.34", 1) \
  F(int, pthread_rwlock_destroy, (pthread_rwlock_t* rw), (rw), "GLIBC_2.34", 1) \
  F(int, pthread_rwlock_rdlock, (pthread_rwlock_t* rw), (rw), "GLIBC_2.34", 1) \
  F(int, pthread_rwlock_wrlock, (pthread_rwlock_t* rw), (rw), "GLIBC_2.34", 1) \
  F(int, pthread_rwlock_tryrdlock, (pthread_rwlock_t* rw), (rw), "GLIBC_2.34", 1) \
  F(int, pthread_rwlock_trywrlock, (pthread_rwlock_t* rw), (rw), "GLIBC_2.34", 1) \
  F(int, pthread_rwlock_timedrdlock, (pthread_rwlock_t* rw, const struct timespec* t), (rw, t), "GLIBC_2.34", 1) \
  F(int, pthread_rwlock_timedwrlock, (pthread_rwlock_t* rw, const struct timespec* t), (rw, t), "GLIBC_2.34", 1) \
  F(int, pthread_rwlock_clockrdlock, (pthread_rwlock_t* rw, clockid_t k, const struct timespec* t), (rw, k, t), "GLIBC_2.34", 1) \
  F(int, pthread_rwlock_clockwrlock, (pthread_rwlock_t* rw, clockid_t k, const struct timespec* t), (rw, k, t), "GLIBC_2.34", 1) \
  F(int, pthread_rwlock_unlock, (pthread_rwlock_t* rw), (rw), "GLIBC_2.34", 1) \
  F(int, pthread_barrier_init, (pthread_barrier_t* b, const pthread_barrierattr_t* a, unsigned n), (b, a, n), "GLIBC_2.34", 1) \
  F(int, pthread_barrier_destroy, (pthread_barrier_t* b), (b), "GLIBC_2.34", 1) \
  F(int, pthread_barrier_wait, (pthread_barrier_t* b), (b), "GLIBC_2.34", 1)   \
  F(int, pthread_once, (pthread_once_t* o, void (*init)(void)), (o, init), "GLIBC_2.34", 0) \
  F(void, call_once, (once_flag* o, void (*init)(void)), (o, init), "GLIBC_2.34", 0) \
  F(int, sem_init, (sem_t* s, int pshared, unsigned value), (s, pshared, value), "GLIBC_2.34", 1) \
  F(int, sem_destroy, (sem_t* s), (s), "GLIBC_2.34", 1)                        \
  F(int, sem_wait, (sem_t* s), (s), "GLIBC_2.34", 1)                           \
  F(int, sem_trywait, (sem_t* s), (s), "GLIBC_2.34", 1)                        \
  F(int, sem_timedwait, (sem_t* __restrict s, const struct timespec* __restrict t), (s, t), "GLIBC_2.34", 1) \
  F(int, sem_clockwait, (sem_t* __restrict s, clockid_t k, const struct timespec* __restrict t), (s, k, t), "GLIBC_2.34", 1) \
  F(int, sem_post, (sem_t* s), (s), "GLIBC_2.34", 1)                           \
  F(int, sem_getvalue, (sem_t* __restrict s, int* __restrict v), (s, v), "GLIBC_2.34", 1) \
  F(int, mtx_init, (mtx_t* m, int type), (m, type), "GLIBC_2.34", 0)           \
  F(int, mtx_lock, (mtx_t* m), (m), "GLIBC_2.34", 0)                           \
  F(int, mtx_trylock, (mtx_t* m), (m), "GLIBC_2.34", 0)                        \
  F(int, mtx_timedlock, (mtx_t* __restrict m, const struct timespec* __restrict t), (m, t), "GLIBC_2.34", 0) \
  F(int, mtx_unlock, (mtx_t* m), (m), "GLIBC_2.34", 0)                         \
  F(void, mtx_destroy, (mtx_t* m), (m), "GLIBC_2.34", 0)                       \
  F(int, cnd_init, (cnd_t* c), (c), "GLIBC_2.34", 0)                           \
  F(int, cnd_wait, (cnd_t* c, mtx_t* m), (c, m), "GLIBC_2.34", 0)              \
  F(int, cnd_timedwait, (cnd_t* __restrict c, mtx_t* __restrict m, const struct timespec* __restrict t), (c, m, t), "GLIBC_2.34", 0) \
  F(int, cnd_signal, (cnd_t* c), (c), "GLIBC_2.34", 0)                         \
  F(int, cnd_broadcast, (cnd_t* c), (c), "GLIBC_2.34", 0)                      \
  F(void, cnd_destroy, (cnd_t* c), (c), "GLIBC_2.34", 0)                       \
  F(void, _exit, (int status), (status), "GLIBC_2.2.5", 0)                     \
  V(long, syscall, (long number, ...), (long number, long a1, long a2, long a3, long a4, long a5, long a6), (number, a1, a2, a3, a4, a5, a6), "GLIBC_2.2.5", 0) \
  V(int, clone, (int (*fn)(void*), void* stack, int flags, void* arg, ...), (int (*fn)(void*), void* stack, int flags, void* arg, pid_t* ptid, void* tls, pid_t* ctid), (fn, stack, flags, arg, ptid, tls, ctid), "GLIBC_2.2.5", 1) \
  F(int, sigaction, (int sig, const struct sigaction* act, struct sigaction* oact), (sig, act, oact), "GLIBC_2.2.5", 1) \
  F(int, __sigaction, (int sig, const struct sigaction* act, struct sigaction* oact), (sig, act, oact), "GLIBC_2.2.5", 0) \
  F(sighandler_t, signal, (int sig, sighandler_t h), (sig, h), "GLIBC_2.2.5", 0) \
  F(sighandler_t, bsd_signal, (int sig, sighandler_t h), (sig, h), "GLIBC_2.2.5", 0) \
  F(sighandler_t, ssignal, (int sig, sighandler_t h), (sig, h), "GLIBC_2.2.5", 0) \
  F(int, siginterrupt, (int sig, int interrupt), (sig, interrupt), "GLIBC_2.2.5", 0) \
  F(sighandler_t, sysv_signal, (int sig, sighandler_t h), (sig, h), "GLIBC_2.2.5", 0) \
  F(sighandler_t, __sysv_signal, (int sig, sighandler_t h), (sig, h), "GLIBC_2.2.5", 0) \
  F(sighandler_t, sigset, (int sig, sighandler_t h), (sig, h), "GLIBC_2.2.5", 0) \
  F(int, sigignore, (int sig), (sig), "GLIBC_2.2.5", 0)                        \
  F(int, sched_setscheduler, (pid_t pid, int policy, const struct sched_param* p), (pid, policy, p), "GLIBC_2.2.5", 0) \
  F(int, sched_setparam, (pid_t pid, const struct sched_param* p), (pid, p), "GLIBC_2.2.5", 0) \
  F(int, pthread_setschedparam, (pthread_t t, int policy, const struct sched_param* p), (t, policy, p), "GLIBC_2.2.5", 1) \
  F(int, pthread_setschedprio, (pthread_t t, int priority), (t, priority), "GLIBC_2.34", 1) \
  F(int, pthread_attr_setschedpolicy, (pthread_attr_t* a, int policy), (a, policy), "GLIBC_2.2.5", 1)

#define PARKLOT_SURFACE(F, V) \
  PARKLOT_SURFACE_HOOKED(F) PARKLOT_SURFACE_STUBBED(F, V)

// glibc functions the shim calls that it exports itself but not through
// the table: dlopen and dlmopen are assembly stubs (deepbind.cc) that jump
// to glibc's with the caller's return address, which glibc reads to find
// the calling object; under Valgrind they rebind nothing.
#define PARKLOT_GLIBC_ALSO(F)                                                   \
  F(void*, dlopen, (const char* file, int flags), (file, flags), "GLIBC_2.34", 1) \
  F(void*, dlmopen, (Lmid_t lmid, const char* file, int flags), (lmid, file, flags), "GLIBC_2.34", 1)
// clang-format on

// The shim's implementations of the stubbed names: NAME is
// parklot_serve_NAME in the object, local to it (exports.lds names only the
// exported names). A variadic row's implementation is defined as
// parklot_serve_NAME with the forwarder's fixed parameters: on x86-64 a
// variadic call passes its arguments as a fixed one does (registers, then
// the stack), so the stub's jump reaches it with them in place, and it
// reads them without va_arg's save area, as glibc's assembly does. Such an
// implementation must not end in a tail call passing a stack argument: the
// compiler would store it into that slot, which is the caller's memory
// when the caller passed fewer arguments (clone_shim.cc).
#define PARKLOT_SERVE_DECL(ret, name, params, ...) \
  extern "C" ret name params __asm__("parklot_serve_" #name);
#define PARKLOT_SERVE_DECL_V(ret, name, params, fparams, ...) \
  extern "C" ret parklot_serve_##name fparams;
PARKLOT_SURFACE_STUBBED(PARKLOT_SERVE_DECL, PARKLOT_SERVE_DECL_V)
#undef PARKLOT_SERVE_DECL
#undef PARKLOT_SERVE_DECL_V

#endif  // PARKLOT_PRELOAD_SURFACE_H_
