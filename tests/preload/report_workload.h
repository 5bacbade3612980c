/* The lock work of the report tests' programs (secure_mode_prog,
 * report_fd_prog): a lock-order inversion that never deadlocks (a then b,
 * later b then a, one thread), which PARKLOT_DEADLOCK=report reports, and
 * one mutex contended by four threads, which gives the statistics report
 * something to say. Returns 0 if every increment was counted. */
#ifndef PARKLOT_TESTS_PRELOAD_REPORT_WORKLOAD_H_
#define PARKLOT_TESTS_PRELOAD_REPORT_WORKLOAD_H_

#include <pthread.h>
#include <time.h>

static pthread_mutex_t g_report_a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_report_b = PTHREAD_MUTEX_INITIALIZER;
static long g_report_count;

static pthread_barrier_t g_report_start;

static void* report_worker(void* arg) {
  (void)arg;
  pthread_barrier_wait(&g_report_start);
  for (int i = 0; i < 20000; ++i) {
    pthread_mutex_lock(&g_report_a);
    ++g_report_count;
    /* About a microsecond held: the four threads' loops overlap and meet
     * at the lock (with a bare increment one thread often ran alone). */
    for (volatile int k = 0; k < 200; ++k) {
    }
    pthread_mutex_unlock(&g_report_a);
  }
  return NULL;
}

static inline int report_workload(void) {
  pthread_mutex_lock(&g_report_a);
  pthread_mutex_lock(&g_report_b);
  pthread_mutex_unlock(&g_report_b);
  pthread_mutex_unlock(&g_report_a);
  pthread_mutex_lock(&g_report_b);
  pthread_mutex_lock(&g_report_a);
  pthread_mutex_unlock(&g_report_a);
  pthread_mutex_unlock(&g_report_b);
  /* The workers start together while this thread holds the mutex for
   * 20 ms, so at least one contended wait happens also on a machine whose
   * CPUs are busy, where the four loops could otherwise run one after
   * another (the profile then sampled nothing and wrote no file). */
  pthread_barrier_init(&g_report_start, NULL, 5);
  pthread_t t[4];
  for (int i = 0; i < 4; ++i) pthread_create(&t[i], NULL, report_worker, NULL);
  pthread_mutex_lock(&g_report_a);
  pthread_barrier_wait(&g_report_start);
  struct timespec held = {0, 20 * 1000 * 1000};
  nanosleep(&held, NULL);
  pthread_mutex_unlock(&g_report_a);
  for (int i = 0; i < 4; ++i) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&g_report_start);
  return g_report_count == 4 * 20000 ? 0 : 1;
}

#endif  /* PARKLOT_TESTS_PRELOAD_REPORT_WORKLOAD_H_ */
