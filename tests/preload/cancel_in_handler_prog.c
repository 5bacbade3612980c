/* A thread blocked in a cancellable wait runs with asynchronous
 * cancellation on: glibc's read() and nanosleep() switch it on around the
 * system call, and so do the shim's own cancellable waits (sem_wait,
 * pthread_cond_wait). A signal handler that interrupts such a wait runs
 * in that mode, and a pthread_cancel arriving meanwhile unwinds the thread
 * out of whatever the handler is doing. Under glibc a handler's sem_post is
 * atomics and a FUTEX_WAKE, so that unwinding leaves nothing behind. The
 * shim's sem_post takes a bucket lock of the parking lot: unwound there, the
 * bucket stayed locked and every later lock operation on it hung (with
 * PARKLOT_POLICY=fixed:1, every operation of the process).
 *
 * Each round starts a victim thread blocked in read() on an empty pipe, in
 * sem_wait, or in pthread_cond_wait, sends it SIGUSR1 (its handler posts a
 * semaphore that other threads keep waiting on, and wakes a futex word),
 * and cancels it while handlers may be running. The victim must end
 * cancelled, and the process must keep working: the waiters go on taking
 * units and the survivors' mutex keeps changing hands.
 *
 *   cancel_in_handler_prog [ROUNDS] */
#include "tests/preload/shim_test_util.h"  /* first: _GNU_SOURCE */

#include <linux/futex.h>
#include <semaphore.h>

enum { kWaiters = 3, kPostsPerSignal = 64 };

static sem_t g_units;      /* the waiters' semaphore, posted by handlers */
static sem_t g_never;      /* never posted: a victim waits on it */
static pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static int g_pipe[2];
static volatile int g_stop;
static long g_taken;       /* units the waiters took (atomic) */

static uint32_t g_futex_word;

/* sem_post, and a raw FUTEX_WAKE, which the shim serves (taking a bucket
 * lock every time) under PARKLOT_SYSCALL_FUTEX=1. */
static void post_units(int sig) {
  (void)sig;
  const int saved = errno;
  for (int i = 0; i < kPostsPerSignal; ++i) {
    sem_post(&g_units);
    shim_futex(&g_futex_word, FUTEX_WAKE_PRIVATE, 1, NULL);
  }
  errno = saved;
}

static void* waiter(void* arg) {
  (void)arg;
  while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
    if (sem_wait(&g_units) == 0) {
      __atomic_fetch_add(&g_taken, 1, __ATOMIC_RELAXED);
    }
  }
  return NULL;
}

static void unlock_mutex(void* m) { pthread_mutex_unlock((pthread_mutex_t*)m); }

/* Blocks in one cancellable wait, by kind, until cancelled. */
static void* victim(void* arg) {
  const int kind = (int)(intptr_t)arg;
  char c;
  switch (kind) {
    case 0:
      for (;;) (void)read(g_pipe[0], &c, 1);
    case 1:
      for (;;) sem_wait(&g_never);
    default:
      pthread_mutex_lock(&g_mutex);
      pthread_cleanup_push(unlock_mutex, &g_mutex);
      for (;;) pthread_cond_wait(&g_cond, &g_mutex);
      pthread_cleanup_pop(1);
  }
  return NULL;
}

/* The process still serves lock operations: a mutex round trip and a
 * semaphore unit taken by a waiter, each within the watchdog. */
static void check_alive(int round) {
  CHECK_RC(pthread_mutex_lock(&g_mutex), 0);
  CHECK_RC(pthread_mutex_unlock(&g_mutex), 0);
  const long before = __atomic_load_n(&g_taken, __ATOMIC_RELAXED);
  sem_post(&g_units);
  const int64_t give_up = shim_now_ns(CLOCK_MONOTONIC) + 20 * 1000000000LL;
  while (__atomic_load_n(&g_taken, __ATOMIC_RELAXED) == before) {
    if (shim_now_ns(CLOCK_MONOTONIC) > give_up) {
      FATAL("round %d: no waiter took a unit in 20 s", round);
    }
    shim_sleep_us(100);
  }
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 2000;
  shim_test_start("cancel_in_handler", 120);
  CHECK(pipe(g_pipe) == 0);
  CHECK(sem_init(&g_units, 0, 0) == 0);
  CHECK(sem_init(&g_never, 0, 0) == 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = post_units;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);

  pthread_t waiters[kWaiters];
  for (int i = 0; i < kWaiters; ++i) waiters[i] = shim_spawn(waiter, NULL);

  uint32_t rng = 12345;
  for (int r = 0; r < rounds; ++r) {
    pthread_t v = shim_spawn(victim, (void*)(intptr_t)(r % 3));
    shim_sleep_us(200 + shim_rand(&rng) % 300);  /* let it block */
    const int signals = 1 + (int)(shim_rand(&rng) % 4);
    for (int i = 0; i < signals; ++i) pthread_kill(v, SIGUSR1);
    /* Cancel while the handlers are likely running. */
    for (volatile uint32_t spin = shim_rand(&rng) % 20000; spin > 0; --spin) {
    }
    CHECK_RC(pthread_cancel(v), 0);
    void* result = NULL;
    CHECK_RC(pthread_join(v, &result), 0);
    if (result != PTHREAD_CANCELED) {
      SHIM_FAIL("round %d: victim %d was not cancelled", r, r % 3);
    }
    check_alive(r);
  }

  __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
  for (int i = 0; i < kWaiters; ++i) sem_post(&g_units);
  for (int i = 0; i < kWaiters; ++i) pthread_join(waiters[i], NULL);
  printf("cancel_in_handler: %d rounds, %ld units taken\n", rounds,
         __atomic_load_n(&g_taken, __ATOMIC_RELAXED));
  return shim_test_finish();
}
