/* pthread_cond_broadcast to a crowd: more waiters than the shim wakes one
 * by one (above 32, a broadcast's waiters are requeued onto a held mutex
 * tagged, and the first the unlock wakes wakes the rest; onto a free mutex
 * they are all woken at once; docs/design.md section 4, CondVar). Every
 * waiter must pass every round, as under glibc, whichever way the broadcast finds the
 * mutex, with some waiters in timed waits that time out meanwhile and an
 * outsider thread taking the mutex throughout.
 *
 *   cond_crowd_prog [WAITERS] [ROUNDS] */
#include "tests/preload/shim_test_util.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t g_done = PTHREAD_COND_INITIALIZER;  /* all passed */
static int g_waiters = 200, g_rounds = 40;
static int g_gen;        /* under g_mu */
static int g_waiting;    /* under g_mu: waiters waiting for this round */
static int g_passed;     /* under g_mu: waiters that saw this round */
static int g_stop;       /* under g_mu */
static long g_timeouts;  /* under g_mu */

static void* waiter(void* arg) {
  const int timed = (int)(intptr_t)arg % 4 == 0;
  pthread_mutex_lock(&g_mu);
  for (int seen = 0; seen < g_rounds; ++seen) {
    ++g_waiting;
    while (g_gen == seen) {
      if (timed) {
        struct timespec d = shim_deadline_ms(CLOCK_REALTIME, 1);
        const int rc = pthread_cond_timedwait(&g_cv, &g_mu, &d);
        if (rc == ETIMEDOUT) {
          ++g_timeouts;
        } else if (rc != 0) {
          SHIM_FAIL("pthread_cond_timedwait: %s", shim_errname(rc));
        }
      } else {
        CHECK_RC(pthread_cond_wait(&g_cv, &g_mu), 0);
      }
    }
    if (++g_passed == g_waiters) pthread_cond_signal(&g_done);
  }
  pthread_mutex_unlock(&g_mu);
  return NULL;
}

static void* outsider(void* arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&g_mu);
    const int stop = g_stop;
    pthread_mutex_unlock(&g_mu);
    if (stop) return NULL;
    shim_sleep_us(50);
  }
}

int main(int argc, char** argv) {
  shim_test_start("cond_crowd", 120);
  if (argc > 1) g_waiters = atoi(argv[1]);
  if (argc > 2) g_rounds = atoi(argv[2]);
  pthread_t* threads = calloc((size_t)g_waiters, sizeof *threads);
  CHECK(threads != NULL);
  for (int i = 0; i < g_waiters; ++i) {
    threads[i] = shim_spawn(waiter, (void*)(intptr_t)i);
  }
  const pthread_t out = shim_spawn(outsider, NULL);
  for (int r = 0; r < g_rounds; ++r) {
    pthread_mutex_lock(&g_mu);
    /* Everyone waits for this round (the waiters of the last one have
     * passed it and come back). */
    while (g_waiting < g_waiters) {
      pthread_mutex_unlock(&g_mu);
      shim_sleep_us(200);
      pthread_mutex_lock(&g_mu);
    }
    g_waiting = 0;
    g_passed = 0;
    ++g_gen;
    if (r % 2 == 0) {
      pthread_cond_broadcast(&g_cv);  /* the mutex held */
      pthread_mutex_unlock(&g_mu);
    } else {
      pthread_mutex_unlock(&g_mu);
      pthread_cond_broadcast(&g_cv);  /* the mutex free */
    }
    pthread_mutex_lock(&g_mu);
    const int64_t end = shim_now_ns(CLOCK_MONOTONIC) + 30000000000LL;
    while (g_passed < g_waiters) {
      struct timespec d = shim_deadline_ms(CLOCK_REALTIME, 100);
      pthread_cond_timedwait(&g_done, &g_mu, &d);
      if (shim_now_ns(CLOCK_MONOTONIC) > end) {
        FATAL("round %d: %d of %d waiters passed in 30 s", r, g_passed,
              g_waiters);
      }
    }
    pthread_mutex_unlock(&g_mu);
  }
  for (int i = 0; i < g_waiters; ++i) CHECK_RC(pthread_join(threads[i], NULL), 0);
  pthread_mutex_lock(&g_mu);
  g_stop = 1;
  pthread_mutex_unlock(&g_mu);
  CHECK_RC(pthread_join(out, NULL), 0);
  printf("cond_crowd: %d waiters x %d rounds passed (%ld timed-out waits)\n",
         g_waiters, g_rounds, g_timeouts);
  free(threads);
  return shim_test_finish();
}
