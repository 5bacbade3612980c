/* Semaphores and barriers used after their destroy, without a new init,
 * keep working as under glibc 2.36, whose sem_destroy does nothing and
 * whose pthread_barrier_destroy only waits for threads leaving the last
 * round. POSIX leaves such use undefined; programs that tear down in the
 * wrong order (destroy, then post to wake the waiters) work under glibc.
 * The shim's destroys once handed these objects to glibc's functions,
 * which cannot read the shim's layout: sem_post with waiters aborted the
 * program ("The futex facility returned an unexpected error code"), and
 * pthread_barrier_wait hung. */
#include <semaphore.h>

#include "tests/preload/shim_test_util.h"

enum { kWaiters = 4, kRounds = 20 };

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
static void sem_destroy_with_waiters(void) {
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

static pthread_barrier_t g_barrier;
static int g_serials;

static void* barrier_rounds(void* arg) {
  (void)arg;
  for (int i = 0; i < kRounds; ++i) {
    const int rc = pthread_barrier_wait(&g_barrier);
    if (rc == PTHREAD_BARRIER_SERIAL_THREAD) {
      __atomic_fetch_add(&g_serials, 1, __ATOMIC_RELAXED);
    } else {
      CHECK_RC(rc, 0);
    }
  }
  return NULL;
}

static void run_barrier_rounds(void) {
  g_serials = 0;
  pthread_t t[kWaiters];
  for (int i = 0; i < kWaiters; ++i) t[i] = shim_spawn(barrier_rounds, NULL);
  for (int i = 0; i < kWaiters; ++i) pthread_join(t[i], NULL);
  CHECK(g_serials == kRounds);
}

/* Rounds, destroy, and more rounds on the destroyed barrier. */
static void barrier_after_destroy(void) {
  CHECK_RC(pthread_barrier_init(&g_barrier, NULL, kWaiters), 0);
  run_barrier_rounds();
  CHECK_RC(pthread_barrier_destroy(&g_barrier), 0);
  run_barrier_rounds();
  CHECK_RC(pthread_barrier_destroy(&g_barrier), 0);
}

int main(void) {
  shim_test_start("after_destroy", 20);
  for (int round = 0; round < 5; ++round) sem_destroy_with_waiters();
  for (int round = 0; round < 5; ++round) barrier_after_destroy();
  return shim_test_finish();
}
