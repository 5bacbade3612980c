/* The constants of glibc 2.36's internal pthreadP.h (sysdeps/nptl) that
   glibc's NPTL tests and its pretty printers' constants file
   (nptl/nptl_lock_constants.pysym) name, for x86-64; values as glibc
   defines them. The tests that include this are built against the
   installed libc (tests/glibc_nptl/glibc_nptl_tests.sh). */
#ifndef PARKLOT_GLIBC_TESTS_PTHREADP_H
#define PARKLOT_GLIBC_TESTS_PTHREADP_H

#include <limits.h>
#include <pthread.h>

#include <atomic.h>
#include <internal-signals.h>
#include <internaltypes.h>

/* A robust mutex's __lock beyond any owner tid. */
#define PTHREAD_MUTEX_INCONSISTENT INT_MAX
#define PTHREAD_MUTEX_NOTRECOVERABLE (INT_MAX - 1)

/* Bits of a mutex's __kind. */
#define PTHREAD_MUTEX_KIND_MASK_NP 3
#define PTHREAD_MUTEX_ELISION_NP 256
#define PTHREAD_MUTEX_NO_ELISION_NP 512
#define PTHREAD_MUTEX_ROBUST_NORMAL_NP 16
#define PTHREAD_MUTEX_PRIO_INHERIT_NP 32
#define PTHREAD_MUTEX_PRIO_PROTECT_NP 64
#define PTHREAD_MUTEX_PSHARED_BIT 128
#define PTHREAD_MUTEX_PRIO_CEILING_SHIFT 19
#define PTHREAD_MUTEX_PRIO_CEILING_MASK 0xfff80000

/* Bits of a mutex attribute's word. */
#define PTHREAD_MUTEXATTR_PROTOCOL_SHIFT 28
#define PTHREAD_MUTEXATTR_PROTOCOL_MASK 0x30000000
#define PTHREAD_MUTEXATTR_PRIO_CEILING_SHIFT 12
#define PTHREAD_MUTEXATTR_PRIO_CEILING_MASK 0x00fff000
#define PTHREAD_MUTEXATTR_FLAG_ROBUST 0x40000000
#define PTHREAD_MUTEXATTR_FLAG_PSHARED 0x80000000
#define PTHREAD_MUTEXATTR_FLAG_BITS \
  (PTHREAD_MUTEXATTR_FLAG_ROBUST | PTHREAD_MUTEXATTR_FLAG_PSHARED \
   | PTHREAD_MUTEXATTR_PROTOCOL_MASK | PTHREAD_MUTEXATTR_PRIO_CEILING_MASK)

/* Bits of an rwlock's __readers; readers are counted above the shift. */
#define PTHREAD_RWLOCK_WRPHASE 1
#define PTHREAD_RWLOCK_WRLOCKED 2
#define PTHREAD_RWLOCK_RWAITING 4
#define PTHREAD_RWLOCK_READER_SHIFT 3
#define PTHREAD_RWLOCK_READER_OVERFLOW ((unsigned int) 1 << 31)
#define PTHREAD_RWLOCK_WRHANDOVER ((unsigned int) 1 << 31)
#define PTHREAD_RWLOCK_FUTEX_USED 2

/* A robust or PI mutex's lock word, as the kernel reads it. */
#define FUTEX_WAITERS 0x80000000
#define FUTEX_OWNER_DIED 0x40000000
#define FUTEX_TID_MASK 0x3fffffff

/* Low bits of a condvar's __wrefs. */
#define __PTHREAD_COND_CLOCK_MONOTONIC_MASK 2
#define __PTHREAD_COND_SHARED_MASK 1

#endif
