/* Rounds of pthread_barrier_wait: T threads meet R times. A plain
 * -pthread program, run under glibc and under the shim side by side by
 * bench/barrier_cost.sh. Prints "ns_per_round N cpu_ns_per_round N" (wall
 * and process CPU time over all rounds). With "pin", thread i runs on the
 * i-th CPU of the affinity mask, round-robin.
 *
 *   barrier_rounds THREADS ROUNDS [pin] */
#define _GNU_SOURCE 1
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_barrier_t g_barrier;
static int g_rounds;
static int g_pin;

static void pin_to(long index) {
  cpu_set_t all, one;
  if (sched_getaffinity(0, sizeof(all), &all) != 0) return;
  int n = CPU_COUNT(&all), k = (int)(index % n);
  CPU_ZERO(&one);
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &all) && k-- == 0) {
      CPU_SET(c, &one);
      break;
    }
  }
  pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
}

static void* worker(void* arg) {
  if (g_pin) pin_to((long)arg);
  for (int i = 0; i < g_rounds; ++i) pthread_barrier_wait(&g_barrier);
  return NULL;
}

static double now_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) return 2;
  const int threads = atoi(argv[1]);
  g_rounds = atoi(argv[2]);
  g_pin = argc == 4;
  if (threads < 1 || g_rounds < 1) return 2;
  pthread_barrier_init(&g_barrier, NULL, (unsigned)threads);
  pthread_t* t = calloc((size_t)threads, sizeof(*t));
  const double w0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
  for (long i = 1; i < threads; ++i) pthread_create(&t[i], NULL, worker, (void*)i);
  worker((void*)0);
  for (int i = 1; i < threads; ++i) pthread_join(t[i], NULL);
  const double w1 = now_ns(CLOCK_MONOTONIC), c1 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
  printf("ns_per_round %.0f cpu_ns_per_round %.0f\n", (w1 - w0) / g_rounds,
         (c1 - c0) / g_rounds);
  return 0;
}
