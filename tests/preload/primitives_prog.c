/* rwlock, unnamed semaphores, barriers and once under the shim: semantics
 * and error codes as glibc's (the program also runs against plain glibc),
 * plus torture with checksums. */
#include "tests/preload/shim_test_util.h"  /* first: it defines _GNU_SOURCE */

#include <limits.h>
#include <semaphore.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <threads.h>

enum { kThreads = 8, kRounds = 20000 };

static pthread_rwlock_t g_rw = PTHREAD_RWLOCK_INITIALIZER;
static long g_counter;
static sem_t g_items, g_done;
static pthread_barrier_t g_barrier;
static int g_serials;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static once_flag g_flag = ONCE_FLAG_INIT;
static int g_inits, g_c11_inits;

static void init_once(void) {
  usleep(10000); /* racers must wait, not run it again */
  __atomic_fetch_add(&g_inits, 1, __ATOMIC_RELAXED);
}
static void init_c11(void) {
  __atomic_fetch_add(&g_c11_inits, 1, __ATOMIC_RELAXED);
}

static void* worker(void* arg) {
  (void)arg;
  for (int i = 0; i < kRounds; ++i) {
    CHECK_RC(pthread_rwlock_wrlock(&g_rw), 0);
    ++g_counter;
    CHECK_RC(pthread_rwlock_unlock(&g_rw), 0);
    CHECK_RC(pthread_rwlock_rdlock(&g_rw), 0);
    (void)g_counter;
    CHECK_RC(pthread_rwlock_unlock(&g_rw), 0);
    CHECK_RC(sem_post(&g_items), 0);
  }
  pthread_once(&g_once, init_once);
  call_once(&g_flag, init_c11);
  for (int cycle = 0; cycle < 200; ++cycle) {
    const int rc = pthread_barrier_wait(&g_barrier);
    if (rc == PTHREAD_BARRIER_SERIAL_THREAD) {
      __atomic_fetch_add(&g_serials, 1, __ATOMIC_RELAXED);
    } else {
      CHECK_RC(rc, 0);
    }
  }
  CHECK_RC(sem_post(&g_done), 0);
  return NULL;
}

static void* consumer(void* arg) {
  (void)arg;
  for (int i = 0; i < kThreads * kRounds; ++i) CHECK_RC(sem_wait(&g_items), 0);
  return NULL;
}

static void torture(void) {
  CHECK_RC(sem_init(&g_items, 0, 0), 0);
  CHECK_RC(sem_init(&g_done, 0, 0), 0);
  CHECK_RC(pthread_barrier_init(&g_barrier, NULL, kThreads), 0);
  pthread_t t[kThreads], c;
  CHECK_RC(pthread_create(&c, NULL, consumer, NULL), 0);
  for (int i = 0; i < kThreads; ++i) CHECK_RC(pthread_create(&t[i], NULL, worker, NULL), 0);
  for (int i = 0; i < kThreads; ++i) CHECK_RC(sem_wait(&g_done), 0);
  for (int i = 0; i < kThreads; ++i) CHECK_RC(pthread_join(t[i], NULL), 0);
  CHECK_RC(pthread_join(c, NULL), 0);
  CHECK(g_counter == (long)kThreads * kRounds);
  CHECK(g_inits == 1);
  CHECK(g_c11_inits == 1);
  CHECK(g_serials == 200);
  int v = -1;
  CHECK_RC(sem_getvalue(&g_items, &v), 0);
  CHECK(v == 0);
  CHECK_RC(pthread_barrier_destroy(&g_barrier), 0);
  CHECK_RC(sem_destroy(&g_items), 0);
  CHECK_RC(sem_destroy(&g_done), 0);
}

/* --- rwlock semantics --- */
static pthread_rwlock_t g_kind_rw;
static volatile int g_writer_waiting;

static void* writer_blocks(void* arg) {
  (void)arg;
  g_writer_waiting = 1;
  CHECK_RC(pthread_rwlock_wrlock(&g_kind_rw), 0);
  CHECK_RC(pthread_rwlock_unlock(&g_kind_rw), 0);
  return NULL;
}

static void* try_read(void* arg) {
  *(int*)arg = pthread_rwlock_tryrdlock(&g_kind_rw);
  if (*(int*)arg == 0) pthread_rwlock_unlock(&g_kind_rw);
  return NULL;
}

/* A reader holds the lock, a writer queues; does another reader get in? */
static int reader_passes_waiting_writer(int kind) {
  pthread_rwlockattr_t a;
  pthread_rwlockattr_init(&a);
  pthread_rwlockattr_setkind_np(&a, kind);
  CHECK_RC(pthread_rwlock_init(&g_kind_rw, &a), 0);
  CHECK_RC(pthread_rwlock_rdlock(&g_kind_rw), 0);
  g_writer_waiting = 0;
  pthread_t w, r;
  CHECK_RC(pthread_create(&w, NULL, writer_blocks, NULL), 0);
  while (!g_writer_waiting) usleep(1000);
  usleep(50000); /* let the writer block */
  int rc = -1;
  CHECK_RC(pthread_create(&r, NULL, try_read, &rc), 0);
  CHECK_RC(pthread_join(r, NULL), 0);
  CHECK_RC(pthread_rwlock_unlock(&g_kind_rw), 0);
  CHECK_RC(pthread_join(w, NULL), 0);
  CHECK_RC(pthread_rwlock_destroy(&g_kind_rw), 0);
  return rc;
}

static void rwlock_semantics(void) {
  pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
  CHECK_RC(pthread_rwlock_wrlock(&rw), 0);
  CHECK_RC(pthread_rwlock_rdlock(&rw), EDEADLK);
  CHECK_RC(pthread_rwlock_wrlock(&rw), EDEADLK);
  CHECK_RC(pthread_rwlock_trywrlock(&rw), EBUSY);
  CHECK_RC(pthread_rwlock_tryrdlock(&rw), EBUSY);
  struct timespec soon = shim_ts_from_ns(shim_now_ns(CLOCK_REALTIME) + 20000000);
  CHECK_RC(pthread_rwlock_timedwrlock(&rw, &soon), EDEADLK);
  CHECK_RC(pthread_rwlock_unlock(&rw), 0);
  CHECK_RC(pthread_rwlock_rdlock(&rw), 0);
  CHECK_RC(pthread_rwlock_rdlock(&rw), 0); /* recursive read */
  CHECK_RC(pthread_rwlock_trywrlock(&rw), EBUSY);
  soon = shim_ts_from_ns(shim_now_ns(CLOCK_REALTIME) + 20000000);
  CHECK_RC(pthread_rwlock_timedwrlock(&rw, &soon), ETIMEDOUT);
  struct timespec mono = shim_ts_from_ns(shim_now_ns(CLOCK_MONOTONIC) + 20000000);
  CHECK_RC(pthread_rwlock_clockwrlock(&rw, CLOCK_MONOTONIC, &mono), ETIMEDOUT);
  CHECK_RC(pthread_rwlock_clockwrlock(&rw, CLOCK_PROCESS_CPUTIME_ID, &mono), EINVAL);
  struct timespec bad = {0, 1000000000};
  CHECK_RC(pthread_rwlock_timedwrlock(&rw, &bad), EINVAL);
  CHECK_RC(pthread_rwlock_unlock(&rw), 0);
  CHECK_RC(pthread_rwlock_unlock(&rw), 0);
  /* A past deadline still takes a free lock. */
  struct timespec past = {1, 0};
  CHECK_RC(pthread_rwlock_timedrdlock(&rw, &past), 0);
  CHECK_RC(pthread_rwlock_unlock(&rw), 0);
  CHECK_RC(pthread_rwlock_timedwrlock(&rw, &past), 0);
  CHECK_RC(pthread_rwlock_unlock(&rw), 0);
  /* glibc's default prefers readers (a reader passes a waiting writer);
   * PREFER_WRITER_NONRECURSIVE makes new readers wait. */
  CHECK_RC(reader_passes_waiting_writer(PTHREAD_RWLOCK_PREFER_READER_NP), 0);
  CHECK_RC(reader_passes_waiting_writer(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP), EBUSY);
}

/* --- rwlock: glibc 2.36 where POSIX is silent --- */
struct delayed_wrunlock {
  pthread_rwlock_t* rw;
  int locked;
};
static void* hold_write_briefly(void* p) {
  struct delayed_wrunlock* d = (struct delayed_wrunlock*)p;
  CHECK_RC(pthread_rwlock_wrlock(d->rw), 0);
  __atomic_store_n(&d->locked, 1, __ATOMIC_RELEASE);
  usleep(30000);
  CHECK_RC(pthread_rwlock_unlock(d->rw), 0);
  return NULL;
}
static void* timed_writer(void* p) {
  struct timespec dl = shim_ts_from_ns(shim_now_ns(CLOCK_REALTIME) + 100000000);
  CHECK_RC(pthread_rwlock_timedwrlock((pthread_rwlock_t*)p, &dl), ETIMEDOUT);
  return NULL;
}

static void rwlock_glibc_parity(void) {
  /* glibc's destroy does nothing and returns 0, held or not, waiters or
   * not; the lock keeps working. */
  pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
  CHECK_RC(pthread_rwlock_rdlock(&rw), 0);
  CHECK_RC(pthread_rwlock_destroy(&rw), 0);
  CHECK_RC(pthread_rwlock_unlock(&rw), 0);
  CHECK_RC(pthread_rwlock_wrlock(&rw), 0);
  CHECK_RC(pthread_rwlock_destroy(&rw), 0);
  CHECK_RC(pthread_rwlock_unlock(&rw), 0);
  CHECK_RC(pthread_rwlock_rdlock(&rw), 0);
  pthread_t w;
  CHECK_RC(pthread_create(&w, NULL, timed_writer, &rw), 0);
  usleep(20000);
  CHECK_RC(pthread_rwlock_destroy(&rw), 0);  /* a writer waits */
  CHECK_RC(pthread_join(w, NULL), 0);
  CHECK_RC(pthread_rwlock_unlock(&rw), 0);
  CHECK_RC(pthread_rwlock_destroy(&rw), 0);

  /* A null abstime: no deadline, and the clock is not looked at. */
  const struct timespec* volatile no_time = NULL;  /* no -Wnonnull */
  CHECK_RC(pthread_rwlock_init(&rw, NULL), 0);
  CHECK_RC(pthread_rwlock_timedrdlock(&rw, no_time), 0);
  CHECK_RC(pthread_rwlock_clockrdlock(&rw, CLOCK_MONOTONIC, no_time), 0);
  CHECK_RC(pthread_rwlock_clockrdlock(&rw, CLOCK_PROCESS_CPUTIME_ID, no_time), 0);
  for (int i = 0; i < 3; ++i) CHECK_RC(pthread_rwlock_unlock(&rw), 0);
  CHECK_RC(pthread_rwlock_timedwrlock(&rw, no_time), 0);
  CHECK_RC(pthread_rwlock_timedrdlock(&rw, no_time), EDEADLK);
  CHECK_RC(pthread_rwlock_clockwrlock(&rw, CLOCK_REALTIME, no_time), EDEADLK);
  CHECK_RC(pthread_rwlock_unlock(&rw), 0);
  CHECK_RC(pthread_rwlock_clockwrlock(&rw, CLOCK_PROCESS_CPUTIME_ID, no_time), 0);
  CHECK_RC(pthread_rwlock_unlock(&rw), 0);
  /* ... and waits for a writer that lets go. */
  for (int i = 0; i < 4; ++i) {
    struct delayed_wrunlock d = {&rw, 0};
    pthread_t t;
    CHECK_RC(pthread_create(&t, NULL, hold_write_briefly, &d), 0);
    while (!__atomic_load_n(&d.locked, __ATOMIC_ACQUIRE)) usleep(1000);
    switch (i) {
      case 0: CHECK_RC(pthread_rwlock_timedrdlock(&rw, no_time), 0); break;
      case 1: CHECK_RC(pthread_rwlock_timedwrlock(&rw, no_time), 0); break;
      case 2: CHECK_RC(pthread_rwlock_clockrdlock(&rw, CLOCK_MONOTONIC, no_time), 0); break;
      default: CHECK_RC(pthread_rwlock_clockwrlock(&rw, CLOCK_MONOTONIC, no_time), 0); break;
    }
    CHECK_RC(pthread_rwlock_unlock(&rw), 0);
    CHECK_RC(pthread_join(t, NULL), 0);
  }
  CHECK_RC(pthread_rwlock_destroy(&rw), 0);

  /* glibc counts at most 2^28 - 1 read locks; one more is EAGAIN. */
  CHECK_RC(pthread_rwlock_init(&rw, NULL), 0);
  long readers = 0;
  int rc;
  while ((rc = pthread_rwlock_tryrdlock(&rw)) == 0 && readers < (1L << 30)) ++readers;
  CHECK_RC(rc, EAGAIN);
  CHECK(readers == (1L << 28) - 1);
  CHECK_RC(pthread_rwlock_rdlock(&rw), EAGAIN);
  struct timespec past = {1, 0};
  CHECK_RC(pthread_rwlock_timedrdlock(&rw, &past), EAGAIN);
  CHECK_RC(pthread_rwlock_unlock(&rw), 0);
  CHECK_RC(pthread_rwlock_rdlock(&rw), 0);
  CHECK_RC(pthread_rwlock_destroy(&rw), 0);  /* abandoned, read-locked */
}

/* --- semaphore semantics --- */
static sem_t g_sig_sem;
static void on_usr1(int sig) { (void)sig; }

static void* wait_sem(void* arg) {
  const int rc = sem_wait(&g_sig_sem);
  *(int*)arg = rc == 0 ? 0 : errno;
  return NULL;
}

/* sem_wait and a signal handler: EINTR without SA_RESTART, restarted
 * with it (glibc's behaviour, the kernel's futex rules). */
static void sem_signal_case(int restart) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_usr1;
  sa.sa_flags = restart ? SA_RESTART : 0;
  sigaction(SIGUSR1, &sa, NULL);
  CHECK_RC(sem_init(&g_sig_sem, 0, 0), 0);
  int result = -1;
  pthread_t t;
  CHECK_RC(pthread_create(&t, NULL, wait_sem, &result), 0);
  usleep(50000);
  pthread_kill(t, SIGUSR1);
  usleep(50000);
  if (restart) CHECK_RC(sem_post(&g_sig_sem), 0);
  CHECK_RC(pthread_join(t, NULL), 0);
  CHECK_RC(result, restart ? 0 : EINTR);
  CHECK_RC(sem_destroy(&g_sig_sem), 0);
}

static void sem_semantics(void) {
  sem_t s;
  CHECK_RC(sem_init(&s, 0, 1), 0);
  CHECK_RC(sem_trywait(&s), 0);
  CHECK(sem_trywait(&s) == -1 && errno == EAGAIN);
  struct timespec soon = shim_ts_from_ns(shim_now_ns(CLOCK_REALTIME) + 20000000);
  CHECK(sem_timedwait(&s, &soon) == -1 && errno == ETIMEDOUT);
  struct timespec mono = shim_ts_from_ns(shim_now_ns(CLOCK_MONOTONIC) + 20000000);
  CHECK(sem_clockwait(&s, CLOCK_MONOTONIC, &mono) == -1 && errno == ETIMEDOUT);
  struct timespec bad = {0, -1};
  CHECK(sem_timedwait(&s, &bad) == -1 && errno == EINVAL);
  CHECK_RC(sem_post(&s), 0);
  struct timespec past = {1, 0};
  CHECK_RC(sem_timedwait(&s, &past), 0); /* a unit is there: taken */
  int v = -1;
  CHECK_RC(sem_getvalue(&s, &v), 0);
  CHECK(v == 0);
  CHECK(sem_init(&s, 0, (unsigned)SEM_VALUE_MAX + 1u) == -1 && errno == EINVAL);
  CHECK_RC(sem_init(&s, 0, SEM_VALUE_MAX), 0);
  CHECK(sem_post(&s) == -1 && errno == EOVERFLOW);
  CHECK_RC(sem_destroy(&s), 0);
  /* A null time: glibc 2.36 dereferences it (SIGSEGV); the shim says
   * EINVAL, glibc's answer to every other invalid time, also for glibc's
   * own (process-shared) semaphores. Not run against glibc. */
  if (!g_shim_test_glibc) {
    const struct timespec* volatile no_time = NULL;
    for (int pshared = 0; pshared < 2; ++pshared) {
      CHECK_RC(sem_init(&s, pshared, 1), 0);
      CHECK(sem_timedwait(&s, no_time) == -1 && errno == EINVAL);
      CHECK(sem_clockwait(&s, CLOCK_MONOTONIC, no_time) == -1 && errno == EINVAL);
      CHECK(sem_clockwait(&s, CLOCK_PROCESS_CPUTIME_ID, no_time) == -1 && errno == EINVAL);
      CHECK_RC(sem_trywait(&s), 0);  /* the unit is still there */
      CHECK_RC(sem_destroy(&s), 0);
    }
  }
  sem_signal_case(0);
  sem_signal_case(1);
  /* A process-shared semaphore in shared memory across fork(): glibc's. */
  sem_t* shared = mmap(NULL, sizeof(sem_t), PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(shared != MAP_FAILED);
  CHECK_RC(sem_init(shared, 1, 0), 0);
  pid_t pid = fork();
  if (pid == 0) _exit(sem_post(shared) == 0 ? 0 : 1);
  CHECK_RC(sem_wait(shared), 0);
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK_RC(sem_destroy(shared), 0);
}

/* sem_wait is a cancellation point: a cancelled waiter leaves no trace,
 * and a unit posted as it is cancelled is either taken (the wait
 * returned) or still there. */
static sem_t g_cancel_sem;
static volatile int g_took;
static void* wait_cancellable(void* arg) {
  (void)arg;
  if (sem_wait(&g_cancel_sem) == 0) g_took = 1;
  return NULL;
}

static void sem_cancellation(void) {
  for (int round = 0; round < 200; ++round) {
    CHECK_RC(sem_init(&g_cancel_sem, 0, 0), 0);
    g_took = 0;
    pthread_t t;
    CHECK_RC(pthread_create(&t, NULL, wait_cancellable, NULL), 0);
    if (round % 2 == 0) usleep(2000);
    if (round % 3 != 0) CHECK_RC(sem_post(&g_cancel_sem), 0);
    CHECK_RC(pthread_cancel(t), 0);
    void* result = NULL;
    CHECK_RC(pthread_join(t, &result), 0);
    int v = -1;
    CHECK_RC(sem_getvalue(&g_cancel_sem, &v), 0);
    const int posted = round % 3 != 0;
    /* The unit went to the waiter if and only if its wait returned (a
     * cancel that lands after that return still makes the join result
     * PTHREAD_CANCELED under glibc, so the flag is the witness). */
    CHECK(result == NULL || result == PTHREAD_CANCELED);
    CHECK(v == (posted && !g_took ? 1 : 0));
    CHECK(!g_took || posted);
    /* No stale registration: a post and a wait still pair up. */
    CHECK_RC(sem_post(&g_cancel_sem), 0);
    CHECK_RC(sem_wait(&g_cancel_sem), 0);
    CHECK_RC(sem_destroy(&g_cancel_sem), 0);
  }
}

static void barrier_semantics(void) {
  pthread_barrier_t b;
  CHECK_RC(pthread_barrier_init(&b, NULL, 0), EINVAL);
  /* glibc 2.36 takes counts below 2^31 - 1. */
  CHECK_RC(pthread_barrier_init(&b, NULL, 0x7fffffffu), EINVAL);
  CHECK_RC(pthread_barrier_init(&b, NULL, 0x80000000u), EINVAL);
  CHECK_RC(pthread_barrier_init(&b, NULL, 0xffffffffu), EINVAL);
  CHECK_RC(pthread_barrier_init(&b, NULL, 0x7ffffffeu), 0);
  CHECK_RC(pthread_barrier_destroy(&b), 0);
  CHECK_RC(pthread_barrier_init(&b, NULL, 1), 0);
  CHECK_RC(pthread_barrier_wait(&b), PTHREAD_BARRIER_SERIAL_THREAD);
  CHECK_RC(pthread_barrier_destroy(&b), 0);
}

int main(void) {
  shim_test_start("primitives", 120);
  rwlock_semantics();
  rwlock_glibc_parity();
  sem_semantics();
  barrier_semantics();
  sem_cancellation();
  torture();
  return shim_test_finish();
}
