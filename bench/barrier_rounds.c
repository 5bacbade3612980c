/* Rounds of pthread_barrier_wait: T threads meet R times. A plain
 * -pthread program, run under glibc and under the shim side by side by
 * bench/barrier_cost.sh. Prints "ns_per_round N cpu_ns_per_round N" (wall
 * and process CPU time over all rounds).
 *
 *   barrier_rounds THREADS ROUNDS */
#define _GNU_SOURCE 1
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_barrier_t g_barrier;
static int g_rounds;

static void* worker(void* arg) {
  (void)arg;
  for (int i = 0; i < g_rounds; ++i) pthread_barrier_wait(&g_barrier);
  return NULL;
}

static double now_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const int threads = atoi(argv[1]);
  g_rounds = atoi(argv[2]);
  if (threads < 1 || g_rounds < 1) return 2;
  pthread_barrier_init(&g_barrier, NULL, (unsigned)threads);
  pthread_t* t = calloc((size_t)threads, sizeof(*t));
  const double w0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
  for (int i = 1; i < threads; ++i) pthread_create(&t[i], NULL, worker, NULL);
  worker(NULL);
  for (int i = 1; i < threads; ++i) pthread_join(t[i], NULL);
  const double w1 = now_ns(CLOCK_MONOTONIC), c1 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
  printf("ns_per_round %.0f cpu_ns_per_round %.0f\n", (w1 - w0) / g_rounds,
         (c1 - c0) / g_rounds);
  return 0;
}
