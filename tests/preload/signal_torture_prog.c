/* Torture: many threads on a master mutex and condition variables, with
 * exact checksums, while a signal storm (SIGUSR1 with a handler installed
 * without SA_RESTART, sent continuously with pthread_kill) hits every
 * thread. Every lock must succeed (never EINTR), every cond wait return 0,
 * every sum come out exact.
 *
 *   signal_torture_prog [THREADS] [ROUNDS]    (defaults: 32 threads, 3000)
 *
 * Three workloads run in turn, each with all threads:
 *  1. master-lock loop: each thread adds its own numbers to a shared sum
 *     and a per-thread slot under one mutex (lock, trylock and timedlock);
 *  2. producer/consumer: a bounded queue on (mutex, not_empty, not_full),
 *     signal-driven, values summed by consumers;
 *  3. generations: a mutex+cond barrier where the last arrival of each
 *     round broadcasts (waiters use wait, timedwait and clockwait).
 * Every iteration also mallocs and frees (so a malloc that locks pthread
 * mutexes, such as jemalloc, is exercised under the same storm). */
#include "tests/preload/shim_test_util.h"

enum { kMaxThreads = 256, kQueueCap = 16 };

static int g_threads = 32;
static int g_rounds = 3000;
static pthread_t g_tids[kMaxThreads];
static volatile int g_storm_on = 1;
static long g_handled[kMaxThreads];   /* per thread, written by the handler */
static __thread int t_index = -1;

static void on_sigusr1(int sig) {
  (void)sig;
  const int saved = errno;
  if (t_index >= 0) __atomic_fetch_add(&g_handled[t_index], 1, __ATOMIC_RELAXED);
  errno = saved;
}

/* 1. master lock */
static pthread_mutex_t g_master = PTHREAD_MUTEX_INITIALIZER;
static long long g_sum;
static long long g_slot[kMaxThreads];

/* 2. queue */
static pthread_mutex_t g_qm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_not_empty = PTHREAD_COND_INITIALIZER;
static pthread_cond_t g_not_full = PTHREAD_COND_INITIALIZER;
static long g_queue[kQueueCap];
static int g_qhead, g_qlen, g_producers_left;
static long long g_consumed_sum;
static long g_consumed_count;

/* 3. generations */
static pthread_mutex_t g_gm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_gc;  /* CLOCK_MONOTONIC */
static int g_arrived;
static long g_generation;

/* Start lines of the phases, and the end (glibc's barriers: the shim does
 * not replace them). The storm stops only once every worker is done, and
 * the workers exit only after it stopped: pthread_kill on a joined thread
 * is undefined. */
static pthread_barrier_t g_phase, g_end;

static void checked_lock(pthread_mutex_t* m, uint32_t* rng) {
  const uint32_t r = shim_rand(rng) & 7;
  int rc;
  if (r == 0) {
    while ((rc = pthread_mutex_trylock(m)) == EBUSY) sched_yield();
  } else if (r == 1) {
    struct timespec dl = shim_deadline_ms(CLOCK_REALTIME, 60000);
    rc = pthread_mutex_timedlock(m, &dl);
  } else if (r == 2) {
    struct timespec dl = shim_deadline_ms(CLOCK_MONOTONIC, 60000);
    rc = pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &dl);
  } else {
    rc = pthread_mutex_lock(m);
  }
  if (rc != 0) FATAL("mutex lock (variant %u) returned %d (%s)", r, rc, shim_errname(rc));
}

static void checked_unlock(pthread_mutex_t* m) {
  const int rc = pthread_mutex_unlock(m);
  if (rc != 0) FATAL("mutex unlock returned %d (%s)", rc, shim_errname(rc));
}

static void churn_malloc(uint32_t* rng) {
  const size_t n = 16 + (shim_rand(rng) % 4096);
  unsigned char* p = (unsigned char*)malloc(n);
  if (p == NULL) FATAL("malloc(%zu) failed", n);
  p[0] = 1;
  p[n - 1] = 2;
  free(p);
}

static void master_phase(int me, uint32_t* rng) {
  for (int i = 1; i <= g_rounds * 10; ++i) {
    checked_lock(&g_master, rng);
    g_sum += me * 100000LL + i;
    g_slot[me] += i;
    checked_unlock(&g_master);
    if ((i & 15) == 0) churn_malloc(rng);
  }
}

static void queue_phase(int me, uint32_t* rng) {
  const int producer = me % 2 == 0;
  if (producer) {
    for (int i = 1; i <= g_rounds * 4; ++i) {
      const long v = me * 1000000L + i;
      checked_lock(&g_qm, rng);
      while (g_qlen == kQueueCap) {
        const int rc = pthread_cond_wait(&g_not_full, &g_qm);
        if (rc != 0) FATAL("cond_wait(not_full) returned %d (%s)", rc, shim_errname(rc));
      }
      g_queue[(g_qhead + g_qlen++) % kQueueCap] = v;
      CHECK_RC(pthread_cond_signal(&g_not_empty), 0);
      checked_unlock(&g_qm);
      if ((i & 7) == 0) churn_malloc(rng);
    }
    checked_lock(&g_qm, rng);
    if (--g_producers_left == 0) CHECK_RC(pthread_cond_broadcast(&g_not_empty), 0);
    checked_unlock(&g_qm);
    return;
  }
  for (;;) {
    checked_lock(&g_qm, rng);
    while (g_qlen == 0 && g_producers_left > 0) {
      struct timespec dl = shim_deadline_ms(CLOCK_REALTIME, 60000);
      const int rc = pthread_cond_timedwait(&g_not_empty, &g_qm, &dl);
      if (rc != 0) FATAL("cond_timedwait(not_empty) returned %d (%s)", rc, shim_errname(rc));
    }
    if (g_qlen == 0) {
      checked_unlock(&g_qm);
      return;
    }
    const long v = g_queue[g_qhead];
    g_qhead = (g_qhead + 1) % kQueueCap;
    --g_qlen;
    g_consumed_sum += v;
    ++g_consumed_count;
    CHECK_RC(pthread_cond_signal(&g_not_full), 0);
    checked_unlock(&g_qm);
    churn_malloc(rng);
  }
}

static void generation_phase(int me, uint32_t* rng) {
  for (int round = 0; round < g_rounds; ++round) {
    checked_lock(&g_gm, rng);
    const long gen = g_generation;
    if (++g_arrived == g_threads) {
      g_arrived = 0;
      ++g_generation;
      CHECK_RC(pthread_cond_broadcast(&g_gc), 0);
    } else {
      while (g_generation == gen) {
        int rc;
        switch ((me + round) % 3) {
          case 0:
            rc = pthread_cond_wait(&g_gc, &g_gm);
            break;
          case 1: {
            struct timespec dl = shim_deadline_ms(CLOCK_MONOTONIC, 60000);
            rc = pthread_cond_timedwait(&g_gc, &g_gm, &dl);  /* condattr clock */
            break;
          }
          default: {
            struct timespec dl = shim_deadline_ms(CLOCK_REALTIME, 60000);
            rc = pthread_cond_clockwait(&g_gc, &g_gm, CLOCK_REALTIME, &dl);
            break;
          }
        }
        if (rc != 0) FATAL("generation wait returned %d (%s)", rc, shim_errname(rc));
      }
    }
    checked_unlock(&g_gm);
    if ((round & 3) == 0) churn_malloc(rng);
  }
}

static void* worker(void* arg) {
  const int me = (int)(intptr_t)arg;
  t_index = me;
  uint32_t rng = 0x12345u + (uint32_t)me * 7919u;
  pthread_barrier_wait(&g_phase);
  master_phase(me, &rng);
  pthread_barrier_wait(&g_phase);
  queue_phase(me, &rng);
  pthread_barrier_wait(&g_phase);
  generation_phase(me, &rng);
  pthread_barrier_wait(&g_end);  /* work done: the storm may stop */
  pthread_barrier_wait(&g_end);  /* the storm stopped */
  return NULL;
}

static void* storm(void* arg) {
  (void)arg;
  long sent = 0;
  while (__atomic_load_n(&g_storm_on, __ATOMIC_ACQUIRE)) {
    for (int i = 0; i < g_threads; ++i) {
      const int rc = pthread_kill(g_tids[i], SIGUSR1);
      if (rc != 0 && rc != ESRCH) FATAL("pthread_kill: %d", rc);
      ++sent;
    }
    if ((sent & 1023) == 0) sched_yield();
  }
  return (void*)(intptr_t)sent;
}

int main(int argc, char** argv) {
  shim_test_start("signal_torture", 100);
  if (argc > 1) g_threads = atoi(argv[1]);
  if (argc > 2) g_rounds = atoi(argv[2]);
  if (g_threads < 2 || g_threads > kMaxThreads || g_threads % 2 != 0) {
    FATAL("THREADS must be even, 2..%d", kMaxThreads);
  }

  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_sigusr1;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  /* no SA_RESTART: interrupted system calls see EINTR */
  if (sigaction(SIGUSR1, &sa, NULL) != 0) FATAL("sigaction: %s", strerror(errno));

  pthread_condattr_t ca;
  CHECK_RC(pthread_condattr_init(&ca), 0);
  CHECK_RC(pthread_condattr_setclock(&ca, CLOCK_MONOTONIC), 0);
  CHECK_RC(pthread_cond_init(&g_gc, &ca), 0);
  CHECK_RC(pthread_condattr_destroy(&ca), 0);
  g_producers_left = g_threads / 2;
  pthread_barrier_init(&g_phase, NULL, (unsigned)g_threads);
  pthread_barrier_init(&g_end, NULL, (unsigned)g_threads + 1);

  const int64_t t0 = shim_now_ns(CLOCK_MONOTONIC);
  for (int i = 0; i < g_threads; ++i) {
    g_tids[i] = shim_spawn(worker, (void*)(intptr_t)i);
  }
  pthread_t storm_thread = shim_spawn(storm, NULL);
  pthread_barrier_wait(&g_end);
  __atomic_store_n(&g_storm_on, 0, __ATOMIC_RELEASE);
  void* sent = NULL;
  pthread_join(storm_thread, &sent);
  pthread_barrier_wait(&g_end);
  for (int i = 0; i < g_threads; ++i) pthread_join(g_tids[i], NULL);
  const int64_t ms = (shim_now_ns(CLOCK_MONOTONIC) - t0) / 1000000;

  /* 1. */
  const long n1 = g_rounds * 10L;
  long long want_sum = 0;
  for (int t = 0; t < g_threads; ++t) {
    want_sum += t * 100000LL * n1 + n1 * (n1 + 1) / 2;
    if (g_slot[t] != n1 * (n1 + 1) / 2) {
      SHIM_FAIL("master lock: thread %d slot %lld, want %ld", t, g_slot[t],
                n1 * (n1 + 1) / 2);
    }
  }
  if (g_sum != want_sum) SHIM_FAIL("master lock: sum %lld, want %lld", g_sum, want_sum);
  /* 2. */
  const long n2 = g_rounds * 4L;
  long long want_q = 0;
  for (int t = 0; t < g_threads; t += 2) want_q += t * 1000000LL * n2 + n2 * (n2 + 1) / 2;
  if (g_consumed_count != n2 * (g_threads / 2)) {
    SHIM_FAIL("queue: consumed %ld values, want %ld", g_consumed_count, n2 * (g_threads / 2));
  }
  if (g_consumed_sum != want_q) SHIM_FAIL("queue: sum %lld, want %lld", g_consumed_sum, want_q);
  /* 3. */
  if (g_generation != g_rounds) SHIM_FAIL("generations: %ld, want %d", g_generation, g_rounds);

  long handled = 0, min_handled = -1;
  for (int t = 0; t < g_threads; ++t) {
    handled += g_handled[t];
    if (min_handled < 0 || g_handled[t] < min_handled) min_handled = g_handled[t];
  }
  printf("signal_torture: %d threads, %d rounds, %ld ms; %ld signals sent, "
         "%ld handled (fewest on one thread: %ld)\n",
         g_threads, g_rounds, (long)ms, (long)(intptr_t)sent, handled, min_handled);
  /* The storm must really have hit the threads while they worked. */
  CHECK(handled > 0);
  CHECK(min_handled > 0);
  pthread_barrier_destroy(&g_phase);
  pthread_barrier_destroy(&g_end);
  return shim_test_finish();
}
