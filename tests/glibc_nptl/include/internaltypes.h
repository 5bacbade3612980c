/* The layouts glibc 2.36 keeps inside pthread_barrier_t and sem_t on
   x86-64 (sysdeps/nptl/internaltypes.h), for glibc's tests that read or
   write them directly (tst-barrier5, tst-sem11, tst-sem13) and for the
   generated constants of glibc's pretty printers (COND_CLOCK_BITS). */
#ifndef PARKLOT_GLIBC_TESTS_INTERNALTYPES_H
#define PARKLOT_GLIBC_TESTS_INTERNALTYPES_H

#include <limits.h>
#include <stdint.h>

struct pthread_barrier
{
  unsigned int in;            /* arrivals, counted up across rounds */
  unsigned int current_round; /* `in` at the start of the current round */
  unsigned int count;         /* threads per round */
  int shared;                 /* PTHREAD_PROCESS_SHARED or PRIVATE */
  unsigned int out;           /* departures */
};
/* Past this many arrivals a barrier resets its counters. */
#define BARRIER_IN_THRESHOLD (UINT_MAX / 2)

/* x86-64 has 64-bit atomics: glibc's tests pick the matching layout. */
#define __HAVE_64B_ATOMICS 1

/* A semaphore with 64-bit atomics: the value in the low half of `data`,
   the number of waiters in the high half. */
struct new_sem
{
  uint64_t data;
  int private;
  int pad;
};
#define SEM_VALUE_OFFSET 0
#define SEM_NWAITERS_SHIFT 32
#define SEM_VALUE_MASK (~(unsigned int) 0)

/* Bits of a condvar's __wrefs below the waiter reference count. */
#define COND_CLOCK_BITS 1

#endif
