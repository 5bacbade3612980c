/* A semaphore destroyed while threads wait on it, or still posted to
 * afterwards, keeps working as under glibc 2.36, whose sem_destroy does
 * nothing: POSIX leaves that use undefined, and programs that tear down in
 * the wrong order (destroy, then post to wake the waiters) work there. The
 * shim's sem_destroy once handed such a semaphore to glibc's functions,
 * whose sem_post read the shim's layout with waiters on it and aborted the
 * program ("The futex facility returned an unexpected error code"). */
#include <semaphore.h>

#include "tests/preload/shim_test_util.h"

enum { kWaiters = 4 };

static sem_t g_sem;

static void* untimed_waiter(void* arg) {
  (void)arg;
  CHECK_RC(sem_wait(&g_sem), 0);
  return NULL;
}

static void* timed_waiter(void* arg) {
  (void)arg;
  const struct timespec d = shim_deadline_ms(CLOCK_REALTIME, 30000);
  CHECK_RC(sem_timedwait(&g_sem, &d), 0);
  return NULL;
}

/* Waiters block, the semaphore is destroyed, then posted: every waiter
 * takes one unit, and the value goes on counting. */
static void destroy_with_waiters(void) {
  CHECK_RC(sem_init(&g_sem, 0, 0), 0);
  pthread_t t[kWaiters];
  for (int i = 0; i < kWaiters; ++i) {
    t[i] = shim_spawn(i % 2 ? timed_waiter : untimed_waiter, NULL);
  }
  shim_sleep_ms(100);  /* they block (a late one takes its unit at once) */
  CHECK_RC(sem_destroy(&g_sem), 0);
  for (int i = 0; i < kWaiters; ++i) CHECK_RC(sem_post(&g_sem), 0);
  for (int i = 0; i < kWaiters; ++i) pthread_join(t[i], NULL);
  int value = -1;
  CHECK_RC(sem_getvalue(&g_sem, &value), 0);
  CHECK(value == 0);
  CHECK_RC(sem_post(&g_sem), 0);
  CHECK_RC(sem_getvalue(&g_sem, &value), 0);
  CHECK(value == 1);
  CHECK_RC(sem_trywait(&g_sem), 0);
  CHECK(sem_trywait(&g_sem) == -1 && errno == EAGAIN);
  CHECK_RC(sem_destroy(&g_sem), 0);  /* again: still 0, as glibc */
}

int main(void) {
  shim_test_start("sem_destroy", 60);
  for (int round = 0; round < 5; ++round) destroy_with_waiters();
  return shim_test_finish();
}
