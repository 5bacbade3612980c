/* Rounds of pthread_barrier_wait: T threads meet R times. A plain
 * -pthread program, run under glibc and under the shim side by side by
 * bench/barrier_cost.sh. Prints "ns_per_round N cpu_ns_per_round N
 * csw_per_round N" (wall time, process CPU time and context switches over
 * the R rounds). The clocks start once every thread has met the others
 * once (a round outside the count) and stop when the first thread leaves
 * the last round, so thread creation and exit stay out of the figures.
 * With "pin", thread i runs on the i-th CPU of the affinity mask,
 * round-robin.
 *
 *   barrier_rounds THREADS ROUNDS [pin] */
#define _GNU_SOURCE 1
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
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

static double now_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static long switches(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_nvcsw + u.ru_nivcsw;
}

/* Read by main once the rounds are over; written by the thread that
 * leaves the last round first (the serial thread of the round), before any
 * thread can exit. */
static double g_w0, g_c0, g_w1, g_c1;
static long g_s0, g_s1;

static void* worker(void* arg) {
  if (g_pin) pin_to((long)arg);
  /* The warm-up round: everyone has been created and has arrived. */
  if (pthread_barrier_wait(&g_barrier) == PTHREAD_BARRIER_SERIAL_THREAD) {
    g_s0 = switches();
    g_c0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
    g_w0 = now_ns(CLOCK_MONOTONIC);
  }
  /* The serial thread of the warm-up round may still be reading the
   * clocks while others run the first measured round: that is inside the
   * measurement, as any other round's work. */
  for (int i = 0; i < g_rounds; ++i) {
    if (pthread_barrier_wait(&g_barrier) == PTHREAD_BARRIER_SERIAL_THREAD &&
        i == g_rounds - 1) {
      g_w1 = now_ns(CLOCK_MONOTONIC);
      g_c1 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
      g_s1 = switches();
    }
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) return 2;
  const int threads = atoi(argv[1]);
  g_rounds = atoi(argv[2]);
  g_pin = argc == 4;
  if (threads < 1 || g_rounds < 1) return 2;
  pthread_barrier_init(&g_barrier, NULL, (unsigned)threads);
  pthread_t* t = calloc((size_t)threads, sizeof(*t));
  for (long i = 1; i < threads; ++i) pthread_create(&t[i], NULL, worker, (void*)i);
  worker((void*)0);
  for (int i = 1; i < threads; ++i) pthread_join(t[i], NULL);
  printf("ns_per_round %.0f cpu_ns_per_round %.0f csw_per_round %.2f\n",
         (g_w1 - g_w0) / g_rounds, (g_c1 - g_c0) / g_rounds,
         (double)(g_s1 - g_s0) / g_rounds);
  return 0;
}
