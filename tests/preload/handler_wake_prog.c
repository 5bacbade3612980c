/* Async-signal safety of what POSIX and the kernel allow in a handler:
 * sem_post and a raw FUTEX_WAKE_PRIVATE, from handlers that interrupt
 * threads anywhere in the lot, including while they hold the very bucket
 * the handler's wake needs (run with PARKLOT_POLICY=fixed:1 every key
 * shares one bucket).
 *
 * Workers keep entering the lot: timed semaphore waits that expire at once
 * (queue, time out, leave), a contended mutex with a condvar, and raw futex
 * waits that fail validation. A driver sends SIGUSR1 to the workers in a
 * storm. Each handler posts `g_units` and adds to a raw futex counter word,
 * then wakes it with syscall(SYS_futex) (served by the lot under
 * PARKLOT_SYSCALL_FUTEX=1, by the kernel otherwise). A consumer takes every
 * unit with sem_wait and a futex waiter follows the counter word.
 * Self-checks: every worker makes progress (no thread waits on a lock its
 * own thread holds), every posted unit is consumed, the futex waiter sees
 * the final count (no wake-up deferred for ever), and nothing hangs. */
#include <linux/futex.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <sys/syscall.h>

#include "tests/preload/shim_test_util.h"

enum { kWorkers = 4 };

static sem_t g_units;          /* posted by handlers, taken by the consumer */
static sem_t g_idle;           /* workers' timed waits on it always expire */
static atomic_uint g_futex_word;  /* handlers' count, woken by raw futex */
static atomic_long g_posts, g_taken, g_handled;
static atomic_long g_progress[kWorkers];
static atomic_int g_stop, g_consumer_stop;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_shared;

static void on_usr1(int sig) {
  (void)sig;
  const int saved = errno;
  if (sem_post(&g_units) == 0) atomic_fetch_add(&g_posts, 1);
  atomic_fetch_add(&g_futex_word, 1);
  shim_futex(&g_futex_word, FUTEX_WAKE_PRIVATE, 1, NULL);
  atomic_fetch_add(&g_handled, 1);
  errno = saved;
}

static void* worker(void* arg) {
  const long id = (long)arg;
  uint32_t rng = (uint32_t)id * 2654435761u + 1;
  const struct timespec past = {1, 0};
  while (!atomic_load(&g_stop)) {
    switch (shim_rand(&rng) % 3) {
      case 0:
        /* Queues on the semaphore's key and leaves it on the timeout. */
        while (sem_timedwait(&g_idle, &past) == 0) {
        }
        break;
      case 1:
        pthread_mutex_lock(&g_mu);
        ++g_shared;
        pthread_cond_signal(&g_cv);
        if ((shim_rand(&rng) & 7) == 0) {
          struct timespec soon = shim_deadline_ms(CLOCK_REALTIME, 1);
          pthread_cond_timedwait(&g_cv, &g_mu, &soon);
        }
        pthread_mutex_unlock(&g_mu);
        break;
      default: {
        /* A raw wait whose validation fails: locks the word's bucket. */
        const unsigned v = atomic_load(&g_futex_word);
        shim_futex(&g_futex_word, FUTEX_WAIT_PRIVATE, v + 1, NULL);
        break;
      }
    }
    atomic_fetch_add(&g_progress[id], 1);
  }
  return NULL;
}

static void* consumer(void* arg) {
  (void)arg;
  for (;;) {
    struct timespec d = shim_deadline_ms(CLOCK_REALTIME, 50);
    if (sem_timedwait(&g_units, &d) == 0) {
      atomic_fetch_add(&g_taken, 1);
    } else if (atomic_load(&g_consumer_stop)) {
      return NULL;
    }
  }
}

/* Follows the handlers' counter with untimed raw futex waits: a wake that
 * is deferred and never run would leave it asleep (the watchdog fires). */
static atomic_uint g_target;
static void* futex_follower(void* arg) {
  (void)arg;
  for (;;) {
    const unsigned v = atomic_load(&g_futex_word);
    const unsigned target = atomic_load(&g_target);
    if (target != 0 && v >= target) return NULL;
    shim_futex(&g_futex_word, FUTEX_WAIT_PRIVATE, v, NULL);
  }
}

int main(int argc, char** argv) {
  shim_test_start("handler_wake", 120);
  const int seconds = argc > 1 ? atoi(argv[1]) : 3;
  sem_init(&g_units, 0, 0);
  sem_init(&g_idle, 0, 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);

  pthread_t workers[kWorkers];
  for (long i = 0; i < kWorkers; ++i) workers[i] = shim_spawn(worker, (void*)i);
  pthread_t cons = shim_spawn(consumer, NULL);
  pthread_t follower = shim_spawn(futex_follower, NULL);

  const int64_t end = shim_now_ns(CLOCK_MONOTONIC) + (int64_t)seconds * 1000000000;
  uint32_t rng = 12345;
  while (shim_now_ns(CLOCK_MONOTONIC) < end) {
    pthread_kill(workers[shim_rand(&rng) % kWorkers], SIGUSR1);
    shim_sleep_us(20 + shim_rand(&rng) % 40);
  }
  /* Every worker still moves: none waits on a lock its own thread holds.
   * Bounded generously (a 1 s bound during the storm once failed on a
   * machine loaded by other programs); a stuck worker never moves. */
  for (int i = 0; i < kWorkers; ++i) {
    const long p = atomic_load(&g_progress[i]);
    const int64_t give_up = shim_now_ns(CLOCK_MONOTONIC) + 10000000000LL;
    while (atomic_load(&g_progress[i]) == p) {
      if (shim_now_ns(CLOCK_MONOTONIC) > give_up) {
        FATAL("worker %d made no progress for 10 s (deadlock)", i);
      }
      shim_sleep_ms(1);
    }
  }
  atomic_store(&g_stop, 1);
  for (int i = 0; i < kWorkers; ++i) pthread_join(workers[i], NULL);
  /* Every handler has returned: the counter is final. */
  atomic_store(&g_target, atomic_load(&g_futex_word));
  shim_futex(&g_futex_word, FUTEX_WAKE_PRIVATE, 1, NULL);
  pthread_join(follower, NULL);
  /* The consumer drains what is left, then stops on an empty semaphore. */
  while (atomic_load(&g_taken) < atomic_load(&g_posts)) shim_sleep_ms(1);
  atomic_store(&g_consumer_stop, 1);
  pthread_join(cons, NULL);
  CHECK(atomic_load(&g_taken) == atomic_load(&g_posts));
  int value = -1;
  sem_getvalue(&g_units, &value);
  CHECK(value == 0);
  CHECK(atomic_load(&g_handled) > 100);
  printf("handler_wake: %ld handlers, %ld units posted and taken\n",
         atomic_load(&g_handled), atomic_load(&g_posts));
  return shim_test_finish();
}
