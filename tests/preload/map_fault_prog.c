/* The workload of map_fault_sweep_test: every kind of mapping the shim
 * makes, each of which the sweep fails in turn (map_fault_lib.c). The
 * program must finish with the right results whichever one fails
 * (docs/design.md section 6, invariant 7):
 *   - table growth (PARKLOT_POLICY=threads or adaptive): `idle` threads
 *     register one by one and stay live, parked, so the table doubles with
 *     them;
 *   - the registry's chunks: past 4,095 live threads (idle >= 4,095), the
 *     next 4,096 indices need a mapped chunk;
 *   - with PARKLOT_STATS, PARKLOT_DEADLOCK or PARKLOT_PROFILE, the
 *     diagnostics' tables;
 * and, around them, the lock paths that use what was (or was not) mapped: a
 * barrier the idle threads and main cross together (one release wakes them
 * all), then among a few busy threads a contended mutex, a condvar queue,
 * an rwlock, a semaphore ping-pong and barrier rounds, and a fork whose
 * child runs threads on locks of its own.
 *
 *   map_fault_prog IDLE_THREADS */
#include <sys/wait.h>

#include "tests/preload/shim_test_util.h"

#include <semaphore.h>

enum { kBusy = 4, kIters = 5000, kQueue = 8, kChildThreads = 16 };

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_not_empty = PTHREAD_COND_INITIALIZER;
static pthread_cond_t g_not_full = PTHREAD_COND_INITIALIZER;
static pthread_rwlock_t g_rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_barrier_t g_all, g_busy_rounds;
static sem_t g_release, g_ping, g_pong;
static long g_counter, g_rw_value, g_consumed_sum;
static int g_queue[kQueue], g_head, g_count;

static void* idle(void* arg) {
  (void)arg;
  CHECK_RC(pthread_mutex_lock(&g_mu), 0); /* registers: the table grows */
  CHECK_RC(pthread_mutex_unlock(&g_mu), 0);
  const int rc = pthread_barrier_wait(&g_all);
  CHECK(rc == 0 || rc == PTHREAD_BARRIER_SERIAL_THREAD);
  CHECK_RC(sem_wait(&g_release), 0); /* live, parked, until the end */
  return NULL;
}

static void put(int v) {
  CHECK_RC(pthread_mutex_lock(&g_mu), 0);
  while (g_count == kQueue) CHECK_RC(pthread_cond_wait(&g_not_full, &g_mu), 0);
  g_queue[(g_head + g_count++) % kQueue] = v;
  CHECK_RC(pthread_cond_signal(&g_not_empty), 0);
  CHECK_RC(pthread_mutex_unlock(&g_mu), 0);
}

static int take(void) {
  CHECK_RC(pthread_mutex_lock(&g_mu), 0);
  while (g_count == 0) CHECK_RC(pthread_cond_wait(&g_not_empty, &g_mu), 0);
  const int v = g_queue[g_head];
  g_head = (g_head + 1) % kQueue;
  --g_count;
  CHECK_RC(pthread_cond_signal(&g_not_full), 0);
  CHECK_RC(pthread_mutex_unlock(&g_mu), 0);
  return v;
}

static void* busy(void* arg) {
  const long me = (long)arg;
  for (int i = 0; i < kIters; ++i) {
    CHECK_RC(pthread_mutex_lock(&g_mu), 0);
    ++g_counter;
    if (i % 64 == 0) sched_yield(); /* others park */
    CHECK_RC(pthread_mutex_unlock(&g_mu), 0);
    if (i % 8 == 0) {
      CHECK_RC(pthread_rwlock_wrlock(&g_rw), 0);
      ++g_rw_value;
      CHECK_RC(pthread_rwlock_unlock(&g_rw), 0);
      CHECK_RC(pthread_rwlock_rdlock(&g_rw), 0);
      CHECK(g_rw_value > 0);
      CHECK_RC(pthread_rwlock_unlock(&g_rw), 0);
    }
  }
  /* Producers and consumers through a condvar queue: 0, 1 produce. */
  if (me < 2) {
    for (int i = 1; i <= kIters; ++i) put(i);
  } else {
    long sum = 0;
    for (int i = 0; i < kIters; ++i) sum += take();
    CHECK_RC(pthread_mutex_lock(&g_mu), 0);
    g_consumed_sum += sum;
    CHECK_RC(pthread_mutex_unlock(&g_mu), 0);
  }
  /* A semaphore ping-pong between 0 and 1. */
  for (int i = 0; i < 500 && me < 2; ++i) {
    if (me == 0) {
      CHECK_RC(sem_post(&g_ping), 0);
      CHECK_RC(sem_wait(&g_pong), 0);
    } else {
      CHECK_RC(sem_wait(&g_ping), 0);
      CHECK_RC(sem_post(&g_pong), 0);
    }
  }
  for (int i = 0; i < 200; ++i) {
    const int rc = pthread_barrier_wait(&g_busy_rounds);
    CHECK(rc == 0 || rc == PTHREAD_BARRIER_SERIAL_THREAD);
  }
  return NULL;
}

static pthread_mutex_t g_child_mu = PTHREAD_MUTEX_INITIALIZER;
static long g_child_counter;

static void* child_thread(void* arg) {
  (void)arg;
  for (int i = 0; i < 1000; ++i) {
    if (pthread_mutex_lock(&g_child_mu) != 0) return (void*)1;
    ++g_child_counter;
    if (i % 64 == 0) sched_yield();
    if (pthread_mutex_unlock(&g_child_mu) != 0) return (void*)1;
  }
  return NULL;
}

/* In a fork child: threads of its own register and contend. */
static int child_main(void) {
  shim_test_watchdog(60);
  pthread_t t[kChildThreads];
  for (int i = 0; i < kChildThreads; ++i) {
    if (pthread_create(&t[i], NULL, child_thread, NULL) != 0) return 1;
  }
  int bad = 0;
  for (int i = 0; i < kChildThreads; ++i) {
    void* r = NULL;
    if (pthread_join(t[i], &r) != 0 || r != NULL) bad = 1;
  }
  return bad || g_child_counter != 1000L * kChildThreads;
}

int main(int argc, char** argv) {
  shim_test_start("map_fault_prog", 90);
  const long n_idle = argc > 1 ? atol(argv[1]) : 200;
  if (n_idle < 1) FATAL("usage: map_fault_prog IDLE_THREADS");
  CHECK_RC(pthread_barrier_init(&g_all, NULL, (unsigned)n_idle + 1), 0);
  CHECK_RC(pthread_barrier_init(&g_busy_rounds, NULL, kBusy), 0);
  CHECK_RC(sem_init(&g_release, 0, 0), 0);
  CHECK_RC(sem_init(&g_ping, 0, 0), 0);
  CHECK_RC(sem_init(&g_pong, 0, 0), 0);

  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 << 10);
  pthread_t* idlers = calloc((size_t)n_idle, sizeof(pthread_t));
  if (idlers == NULL) FATAL("calloc");
  for (long i = 0; i < n_idle; ++i) {
    const int rc = pthread_create(&idlers[i], &attr, idle, NULL);
    if (rc == EAGAIN && i < 4096) {
      printf("SKIP: pthread_create: EAGAIN (thread limit)\n");
      exit(77);
    }
    if (rc != 0) FATAL("pthread_create: %s", strerror(rc));
  }
  /* The last to arrive releases the rest, all at once. */
  const int rc = pthread_barrier_wait(&g_all);
  CHECK(rc == 0 || rc == PTHREAD_BARRIER_SERIAL_THREAD);

  pthread_t b[kBusy];
  for (long i = 0; i < kBusy; ++i) {
    CHECK_RC(pthread_create(&b[i], NULL, busy, (void*)i), 0);
  }
  for (int i = 0; i < kBusy; ++i) CHECK_RC(pthread_join(b[i], NULL), 0);

  const pid_t pid = fork();
  if (pid < 0) FATAL("fork: %s", strerror(errno));
  if (pid == 0) _exit(child_main());
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  for (long i = 0; i < n_idle; ++i) CHECK_RC(sem_post(&g_release), 0);
  for (long i = 0; i < n_idle; ++i) CHECK_RC(pthread_join(idlers[i], NULL), 0);
  free(idlers);

  CHECK(g_counter == (long)kBusy * kIters);
  CHECK(g_rw_value == (long)kBusy * ((kIters + 7) / 8));
  CHECK(g_consumed_sum == 2L * kIters * (kIters + 1) / 2);
  printf("%ld idle threads, %d busy: %ld lock acquisitions counted\n", n_idle,
         kBusy, g_counter);
  return shim_test_finish();
}
