/* Lock-heavy loads for the cost of the shim's diagnostics (PARKLOT_STATS,
 * PARKLOT_DEADLOCK): a plain -pthread program, run under the shim by
 * bench/diagnostics_cost.sh with each mode's environment.
 *
 *   many_locks distinct LOCKS THREADS OPS
 *       THREADS threads each lock and unlock OPS mutexes picked spread over
 *       LOCKS distinct ones (zero-filled: PTHREAD_MUTEX_INITIALIZER)
 *   many_locks contended THREADS OPS
 *       THREADS threads lock one mutex OPS times each, a few ns of work
 *       inside and outside
 *   many_locks nested THREADS OPS
 *       THREADS threads each take their own outer mutex, then one of 64
 *       shared inner ones (the order graph's path: a lock taken with
 *       another held)
 *   many_locks expired THREADS OPS
 *       THREADS threads each make OPS condvar waits, on a condvar and
 *       mutex of their own, whose deadline has passed: glibc returns at
 *       once, the shim queues, finds the deadline gone and leaves the
 *       queue (its park path without a sleep or a wake-up)
 *
 * Prints one line: "ns_per_op N" (wall time of the threads' loops over
 * all operations of all threads). */
#define _GNU_SOURCE 1
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t* g_locks;
static size_t g_nlocks;
static long g_ops;
static pthread_mutex_t g_one = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_inner[64];
static volatile uint64_t g_sink;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void work(int units, uint64_t* x) {
  for (int i = 0; i < units; ++i) *x = *x * 6364136223846793005ull + 1;
}

static void* distinct(void* arg) {
  uint64_t i = (uintptr_t)arg * 0x9E3779B97F4A7C15ull;
  for (long n = 0; n < g_ops; ++n) {
    i += 0x9E3779B97F4A7C15ull;
    pthread_mutex_t* m = &g_locks[(i >> 11) % g_nlocks];
    pthread_mutex_lock(m);
    pthread_mutex_unlock(m);
  }
  return NULL;
}

static void* contended(void* arg) {
  uint64_t x = (uintptr_t)arg;
  for (long n = 0; n < g_ops; ++n) {
    pthread_mutex_lock(&g_one);
    work(20, &x);
    pthread_mutex_unlock(&g_one);
    work(50, &x);
  }
  g_sink += x;
  return NULL;
}

static void* expired(void* arg) {
  (void)arg;
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t c = PTHREAD_COND_INITIALIZER;
  const struct timespec past = {1, 0};
  pthread_mutex_lock(&m);
  for (long n = 0; n < g_ops; ++n) {
    if (pthread_cond_timedwait(&c, &m, &past) == 0) abort();
  }
  pthread_mutex_unlock(&m);
  return NULL;
}

static void* nested(void* arg) {
  pthread_mutex_t outer = PTHREAD_MUTEX_INITIALIZER;
  uint64_t x = (uintptr_t)arg;
  for (long n = 0; n < g_ops; ++n) {
    pthread_mutex_lock(&outer);
    pthread_mutex_t* in = &g_inner[(n * 7 + (uintptr_t)arg) % 64];
    pthread_mutex_lock(in);
    work(10, &x);
    pthread_mutex_unlock(in);
    pthread_mutex_unlock(&outer);
    work(30, &x);
  }
  g_sink += x;
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 2) goto usage;
  void* (*fn)(void*);
  int threads;
  if (strcmp(argv[1], "distinct") == 0 && argc == 5) {
    g_nlocks = strtoul(argv[2], NULL, 10);
    threads = atoi(argv[3]);
    g_ops = atol(argv[4]);
    g_locks = calloc(g_nlocks, sizeof(pthread_mutex_t));
    if (g_locks == NULL || g_nlocks == 0) return 1;
    fn = distinct;
  } else if ((strcmp(argv[1], "contended") == 0 ||
              strcmp(argv[1], "nested") == 0 ||
              strcmp(argv[1], "expired") == 0) && argc == 4) {
    threads = atoi(argv[2]);
    g_ops = atol(argv[3]);
    fn = argv[1][0] == 'c' ? contended : argv[1][0] == 'n' ? nested : expired;
  } else {
    goto usage;
  }
  if (threads < 1 || threads > 256 || g_ops < 1) goto usage;
  pthread_t t[256];
  const int64_t t0 = now_ns();
  for (int i = 0; i < threads; ++i) {
    pthread_create(&t[i], NULL, fn, (void*)(uintptr_t)(i + 1));
  }
  for (int i = 0; i < threads; ++i) pthread_join(t[i], NULL);
  const int64_t t1 = now_ns();
  printf("ns_per_op %.2f\n", (double)(t1 - t0) / ((double)g_ops * threads));
  return 0;
usage:
  fprintf(stderr,
          "usage: many_locks distinct LOCKS THREADS OPS | contended THREADS "
          "OPS | nested THREADS OPS | expired THREADS OPS\n");
  return 2;
}
