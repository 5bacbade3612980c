/* Single wakes, as `perf bench futex wake -t N` makes them: N threads
 * sleep on one private futex word (FUTEX_WAIT_PRIVATE through syscall(),
 * so the shim serves them under PARKLOT_SYSCALL_FUTEX=1), then one waker
 * calls FUTEX_WAKE_PRIVATE with a count of 1 until every thread has been
 * woken; each woken thread returns from its thread function at once.
 * With "pin", thread i is bound to the i-th CPU of the affinity mask,
 * round-robin, as perf binds its workers (the waker stays unbound). With
 * "own", thread i sleeps on a word of its own and the waker wakes the
 * words in turn: the kernel's cost for the parking lot's way of sleeping
 * (each thread on its own parker word), without the lot. With "stay",
 * a woken thread blocks on a pipe instead of returning, until the round
 * is over: no thread exits inside the measured window (perf's workers
 * exit at once, and each exit unmaps a stack, which interrupts the waker
 * with a TLB shootdown). A
 * plain -pthread program, run under the kernel and the shim side by side
 * by bench/single_wake_cost.sh.
 *
 * Prints one line per round with, per wake: the waker's wall time (what
 * perf reports, divided by N), the median and mean time of one wake
 * call (the rest of the wall time is the waker off its CPU, preempted
 * by the threads it woke), the waker's own CPU time, a woken thread's
 * CPU time inside its wait call (going to sleep and coming back, mean
 * over the threads), the process's
 * CPU time over the wake loop and until every woken thread was joined,
 * the waker's voluntary and involuntary context switches, and the wake
 * calls that found no one (each costs a system call more).
 *
 *   single_wake THREADS [ROUNDS [pin] [own] [stay]] */
#define _GNU_SOURCE 1
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static unsigned g_word;
/* "own": one word per thread, a cache line each. */
static unsigned (*g_own)[16];
/* Each thread's CPU time inside its wait call. */
static double* g_wait_cpu;
/* "stay": woken threads read one byte each from this pipe before they
 * return. */
static int g_stay_pipe[2] = {-1, -1};
static atomic_int g_started;

static long futex(unsigned* uaddr, int op, unsigned val) {
  return syscall(SYS_futex, uaddr, op, val, NULL, NULL, 0);
}

static double now_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void* worker(void* arg) {
  unsigned* word = g_own != NULL ? g_own[(long)arg] : &g_word;
  atomic_fetch_add(&g_started, 1);
  const double c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
  /* As perf's worker: sleep until a wake returns 0, retry on EINTR. */
  while (futex(word, FUTEX_WAIT_PRIVATE, 0) != 0 && errno == EINTR) {
  }
  g_wait_cpu[(long)arg] = now_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
  if (g_stay_pipe[0] >= 0) {
    char c;
    while (read(g_stay_pipe[0], &c, 1) != 1) {
    }
  }
  return NULL;
}


static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const int n = atoi(argv[1]);
  const int rounds = argc >= 3 ? atoi(argv[2]) : 1;
  int pin = 0;
  for (int i = 3; i < argc; ++i) {
    if (strcmp(argv[i], "pin") == 0) pin = 1;
    else if (strcmp(argv[i], "own") == 0) g_own = (void*)1;
    else if (strcmp(argv[i], "stay") == 0) {
      if (pipe(g_stay_pipe) != 0) return 1;
    } else return 2;
  }
  if (n < 1 || rounds < 1) return 2;
  if (g_own != NULL) g_own = calloc((size_t)n, sizeof(*g_own));
  pthread_t* t = calloc((size_t)n, sizeof(*t));
  g_wait_cpu = calloc((size_t)n, sizeof(*g_wait_cpu));
  /* One entry per wake call; a call that finds no one adds one more. */
  const size_t calls_max = (size_t)n * 16;
  double* call_ns = calloc(calls_max, sizeof(*call_ns));
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  cpu_set_t all;
  if (sched_getaffinity(0, sizeof(all), &all) != 0) return 1;
  int cpus[CPU_SETSIZE], ncpus = 0;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &all)) cpus[ncpus++] = c;
  }
  for (int r = 0; r < rounds; ++r) {
    atomic_store(&g_started, 0);
    for (int i = 0; i < n; ++i) {
      if (pin) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[i % ncpus], &one);
        pthread_attr_setaffinity_np(&attr, sizeof(one), &one);
      }
      if (pthread_create(&t[i], &attr, worker, (void*)(long)i) != 0) return 1;
    }
    while (atomic_load(&g_started) != n) usleep(1000);
    /* As perf: give the last ones time to reach their sleep. */
    usleep(100000);
    struct rusage u0, u1;
    getrusage(RUSAGE_THREAD, &u0);
    const double w0 = now_ns(CLOCK_MONOTONIC);
    const double c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    const double p0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
    long woken = 0, empty = 0;
    size_t calls = 0;
    double before = w0;
    while (woken < n) {
      /* In "own" mode the threads are woken in the order they were made. */
      unsigned* word = g_own != NULL ? g_own[woken] : &g_word;
      const long k = futex(word, FUTEX_WAKE_PRIVATE, 1);
      const double after = now_ns(CLOCK_MONOTONIC);
      if (calls < calls_max) call_ns[calls++] = after - before;
      if (k > 0) woken += k;
      else ++empty;
      before = now_ns(CLOCK_MONOTONIC);
    }
    const double w1 = now_ns(CLOCK_MONOTONIC);
    const double c1 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    const double p1 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
    getrusage(RUSAGE_THREAD, &u1);
    if (g_stay_pipe[1] >= 0) {
      /* Lets every woken thread return: one byte each. */
      static const char bytes[512];
      for (int left = n; left > 0;) {
        const ssize_t k =
            write(g_stay_pipe[1], bytes, left < 512 ? (size_t)left : 512);
        if (k > 0) left -= (int)k;
      }
    }
    for (int i = 0; i < n; ++i) pthread_join(t[i], NULL);
    const double p2 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
    double sum = 0, wait_cpu = 0;
    for (size_t i = 0; i < calls; ++i) sum += call_ns[i];
    for (int i = 0; i < n; ++i) wait_cpu += g_wait_cpu[i];
    qsort(call_ns, calls, sizeof(*call_ns), by_value);
    printf("wall_ns %.0f call_median_ns %.0f call_mean_ns %.0f "
           "waker_cpu_ns %.0f waiter_cpu_ns %.0f process_cpu_ns %.0f "
           "to_join_cpu_ns %.0f waker_vcsw %.3f waker_ivcsw %.3f "
           "empty_wakes %ld\n",
           (w1 - w0) / n, call_ns[calls / 2], sum / calls, (c1 - c0) / n, wait_cpu / n, (p1 - p0) / n, (p2 - p0) / n,
           (double)(u1.ru_nvcsw - u0.ru_nvcsw) / n,
           (double)(u1.ru_nivcsw - u0.ru_nivcsw) / n, empty);
  }
  return 0;
}
