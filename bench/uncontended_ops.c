/* Uncontended lock+unlock on one thread, for bench/uncontended_cost.sh:
 * a plain -pthread program, run against glibc or under a shim. Prints one
 * line per operation: NAME CPU-ns-per-pair (thread CPU time over N pairs,
 * after a warm-up of N/20).
 *
 * Each operation twice: first while the process has one thread (glibc
 * then takes its single-threaded path, plain stores without an atomic
 * instruction), then with a second thread alive and idle (NAME/mt), as in
 * any program that has started a thread: glibc never goes back to the
 * single-threaded path once a thread was created.
 *
 *   uncontended_ops [N]   (default 20,000,000) */
#define _GNU_SOURCE 1
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double CpuNs(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static pthread_mutex_t g_normal = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_recursive = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static pthread_mutex_t g_errorcheck = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static pthread_rwlock_t g_rwlock = PTHREAD_RWLOCK_INITIALIZER;

#define MEASURE(name, n, lock, unlock)                        \
  do {                                                        \
    for (long i = 0; i < (n) / 20; ++i) { lock; unlock; }     \
    const double t0 = CpuNs();                                \
    for (long i = 0; i < (n); ++i) { lock; unlock; }          \
    printf("%s%s %.3f\n", name, suffix, (CpuNs() - t0) / (double)(n)); \
  } while (0)

static void MeasureAll(long n, const char* suffix) {
  MEASURE("mutex", n, pthread_mutex_lock(&g_normal),
          pthread_mutex_unlock(&g_normal));
  MEASURE("trylock", n, pthread_mutex_trylock(&g_normal),
          pthread_mutex_unlock(&g_normal));
  MEASURE("recursive", n, pthread_mutex_lock(&g_recursive),
          pthread_mutex_unlock(&g_recursive));
  MEASURE("errorcheck", n, pthread_mutex_lock(&g_errorcheck),
          pthread_mutex_unlock(&g_errorcheck));
  MEASURE("wrlock", n, pthread_rwlock_wrlock(&g_rwlock),
          pthread_rwlock_unlock(&g_rwlock));
  MEASURE("rdlock", n, pthread_rwlock_rdlock(&g_rwlock),
          pthread_rwlock_unlock(&g_rwlock));
}

/* The second thread: blocked in read() until main closes the pipe. */
static void* Idle(void* arg) {
  char c;
  while (read(*(int*)arg, &c, 1) > 0) {
  }
  return NULL;
}

int main(int argc, char** argv) {
  const long n = argc > 1 ? atol(argv[1]) : 20000000;
  MeasureAll(n, "");
  int fds[2];
  pthread_t idle;
  if (pipe(fds) != 0 || pthread_create(&idle, NULL, Idle, &fds[0]) != 0) {
    perror("uncontended_ops: the idle thread");
    return 1;
  }
  MeasureAll(n, "/mt");
  close(fds[1]);
  pthread_join(idle, NULL);
  return 0;
}
