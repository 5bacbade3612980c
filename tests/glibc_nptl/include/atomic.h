/* The relaxed atomics of glibc's internal atomic.h that its NPTL tests
   use (and its allocate_once.h), as GCC builtins (tests/glibc_nptl/glibc_nptl_tests.sh). */
#ifndef PARKLOT_GLIBC_TESTS_ATOMIC_H
#define PARKLOT_GLIBC_TESTS_ATOMIC_H

#define atomic_load_relaxed(mem) __atomic_load_n ((mem), __ATOMIC_RELAXED)
#define atomic_store_relaxed(mem, val) \
  __atomic_store_n ((mem), (val), __ATOMIC_RELAXED)
#define atomic_load_acquire(mem) __atomic_load_n ((mem), __ATOMIC_ACQUIRE)

#endif
