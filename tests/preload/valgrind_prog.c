/* A program for Valgrind's thread checkers (valgrind_test.sh): four threads
 * that share data through every kind of primitive the shim serves, a few
 * hundred operations in all (helgrind and DRD run it serialized, slowly),
 * and raw futex calls through syscall().
 *
 *   valgrind_prog        race-free: each shared datum is only touched under
 *                        the primitive that orders it, so helgrind and DRD
 *                        must report nothing
 *   valgrind_prog racy   the same, plus one counter that two threads bump
 *                        with no lock: the race the tools must still report
 *
 * It prints "valgrind_prog: ok" and exits 0 when every result is right. It
 * links neither parklot nor the test helpers: a plain -pthread program, as
 * the binaries users run under Valgrind. */
#define _GNU_SOURCE 1
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <threads.h>
#include <unistd.h>

enum { kThreads = 4, kRounds = 25 };

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static once_flag g_c11_once = ONCE_FLAG_INIT;
static int g_config;      /* written by the once routine, read by all */
static int g_c11_config;  /* the same through call_once */

static pthread_barrier_t g_barrier;

static pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static int g_turn;          /* whose turn (g_mutex, g_cond) */
static long g_token_sum;    /* added to by the thread whose turn it is */

static pthread_rwlock_t g_rwlock = PTHREAD_RWLOCK_INITIALIZER;
static int g_table[kThreads];  /* written under the write lock */

static sem_t g_sem;         /* a binary semaphore used as a lock */
static long g_sem_counter;

static mtx_t g_mtx;
static cnd_t g_cnd;
static int g_c11_ready;     /* (g_mtx, g_cnd) */
static long g_c11_counter;

/* Raw private futex calls, which PARKLOT_SYSCALL_FUTEX=1 has the shim
 * serve: a wake with no waiter and a wait on a value the word does not hold
 * (both return at once). The word is never written. */
static int g_futex_word;
static int g_futex_ok[kThreads];  /* each thread's own; read after join */

static int g_racy;
static long g_unlocked;     /* the racy run's unprotected counter */

static void InitConfig(void) { g_config = 42; }
static void InitC11Config(void) { g_c11_config = 7; }

static void* Worker(void* arg) {
  const int self = (int)(long)arg;
  pthread_once(&g_once, InitConfig);
  call_once(&g_c11_once, InitC11Config);
  pthread_barrier_wait(&g_barrier);
  for (int round = 0; round < kRounds; ++round) {
    /* Token passing: mutex + cond wait + broadcast. */
    pthread_mutex_lock(&g_mutex);
    while (g_turn != self) pthread_cond_wait(&g_cond, &g_mutex);
    g_token_sum += g_config;
    g_turn = (g_turn + 1) % kThreads;
    pthread_cond_broadcast(&g_cond);
    pthread_mutex_unlock(&g_mutex);

    /* Readers and a writer on one table. */
    pthread_rwlock_wrlock(&g_rwlock);
    g_table[self] += 1;
    pthread_rwlock_unlock(&g_rwlock);
    pthread_rwlock_rdlock(&g_rwlock);
    int seen = 0;
    for (int i = 0; i < kThreads; ++i) seen += g_table[i];
    pthread_rwlock_unlock(&g_rwlock);
    (void)seen;

    /* The semaphore as a lock: post orders the next wait. */
    sem_wait(&g_sem);
    g_sem_counter += 1;
    sem_post(&g_sem);

    /* C11: mtx, cnd (signal), the first round only waits for readiness. */
    mtx_lock(&g_mtx);
    if (self == 0 && round == 0) {
      g_c11_ready = 1;
      cnd_broadcast(&g_cnd);
    }
    while (!g_c11_ready) cnd_wait(&g_cnd, &g_mtx);
    g_c11_counter += g_c11_config;
    cnd_signal(&g_cnd);
    mtx_unlock(&g_mtx);

    const long woken =
        syscall(SYS_futex, &g_futex_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    const long waited =
        syscall(SYS_futex, &g_futex_word, FUTEX_WAIT_PRIVATE, 1, NULL, NULL, 0);
    if (woken == 0 && waited == -1 && errno == EAGAIN) g_futex_ok[self] += 1;

    if (g_racy && self < 2) g_unlocked += 1;  /* the one race, on purpose */
  }
  pthread_barrier_wait(&g_barrier);
  return NULL;
}

int main(int argc, char** argv) {
  g_racy = argc > 1 && strcmp(argv[1], "racy") == 0;
  if (pthread_barrier_init(&g_barrier, NULL, kThreads) != 0 ||
      sem_init(&g_sem, 0, 1) != 0 || mtx_init(&g_mtx, mtx_plain) != thrd_success ||
      cnd_init(&g_cnd) != thrd_success) {
    fprintf(stderr, "valgrind_prog: init failed\n");
    return 2;
  }
  pthread_t threads[kThreads];
  for (long i = 0; i < kThreads; ++i) {
    if (pthread_create(&threads[i], NULL, Worker, (void*)i) != 0) {
      fprintf(stderr, "valgrind_prog: pthread_create failed\n");
      return 2;
    }
  }
  for (int i = 0; i < kThreads; ++i) pthread_join(threads[i], NULL);
  int ok = g_token_sum == 42L * kThreads * kRounds &&
           g_sem_counter == kThreads * kRounds &&
           g_c11_counter == 7L * kThreads * kRounds;
  for (int i = 0; i < kThreads; ++i) {
    ok = ok && g_table[i] == kRounds && g_futex_ok[i] == kRounds;
  }
  pthread_barrier_destroy(&g_barrier);
  sem_destroy(&g_sem);
  mtx_destroy(&g_mtx);
  cnd_destroy(&g_cnd);
  pthread_rwlock_destroy(&g_rwlock);
  pthread_cond_destroy(&g_cond);
  pthread_mutex_destroy(&g_mutex);
  if (!ok) {
    fprintf(stderr, "valgrind_prog: wrong results\n");
    return 1;
  }
  printf("valgrind_prog: ok%s\n", g_racy ? " (racy run)" : "");
  return 0;
}
