/* Lock-order scenarios for PARKLOT_DEADLOCK (preload/diag/deadlock.h), one per
 * run, named by argv[1]. Each runs its threads one after another (joined),
 * so none deadlocks, except "deadlock", which does: two threads take two
 * mutexes in opposite orders and wait for each other for ever (the
 * watchdog ends it after 30 s if nothing else does). deadlock_test.sh
 * checks the reports each scenario must and must not produce.
 *
 *   abba        A then B in take_ab(), B then A in take_ba(), three rounds
 *   cycle3      A->B, B->C, C->A
 *   condvar     M then A; a timed wait on M re-takes M while holding A
 *   consistent  A->B->C in four threads, ten rounds, plus a recursive
 *               mutex re-locked while A is held
 *   trylock     A->B; then B held and A only tried
 *   reuse       A->B; both destroyed and re-initialized; then B->A
 *   recursive   R recursive: R, R again, A; then A, R (a real cycle)
 *   read_ok     rwlock L read-held then M; M then L read-wanted (cannot
 *               deadlock: a reader-preferring rwlock's reader waits for
 *               writers only)
 *   read_bad    rwlock L write-held then M; M then L read-wanted
 *   deadlock    A then B and B then A at once
 *   rwlock_waits  a thread waits for an rwlock main holds (write lock
 *               behind a writer, read lock behind a writer, write lock of
 *               a writer-preferring rwlock behind a reader), each released
 *               20 ms after the thread says it is about to lock: waits
 *               that end well within a deadlock-check slice, so with
 *               PARKLOT_STATS none of the lot's parks may time out */
#include "shim_test_util.h"

static pthread_mutex_t A = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t B = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t C = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t M = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t L = PTHREAD_RWLOCK_INITIALIZER;
static pthread_cond_t CV = PTHREAD_COND_INITIALIZER;

#define NOINLINE __attribute__((noinline))

static NOINLINE void take_ab(void) {
  pthread_mutex_lock(&A);
  pthread_mutex_lock(&B);
  pthread_mutex_unlock(&B);
  pthread_mutex_unlock(&A);
}

static NOINLINE void take_ba(void) {
  pthread_mutex_lock(&B);
  pthread_mutex_lock(&A);
  pthread_mutex_unlock(&A);
  pthread_mutex_unlock(&B);
}

/* Inlined, so that the call sites are in the named callers. */
static inline __attribute__((always_inline)) void pair(pthread_mutex_t* x,
                                                       pthread_mutex_t* y) {
  pthread_mutex_lock(x);
  pthread_mutex_lock(y);
  pthread_mutex_unlock(y);
  pthread_mutex_unlock(x);
}

static void* run_fn(void* fn) {
  ((void (*)(void))fn)();
  return NULL;
}

/* Runs fn on a thread of its own and waits for it. */
static void on_thread(void (*fn)(void)) {
  pthread_join(shim_spawn(run_fn, (void*)fn), NULL);
}

static NOINLINE void ab(void) { pair(&A, &B); }
static NOINLINE void bc(void) { pair(&B, &C); }
static NOINLINE void ca(void) { pair(&C, &A); }

static NOINLINE void abc(void) {
  pthread_mutex_lock(&A);
  pthread_mutex_lock(&B);
  pthread_mutex_lock(&C);
  pthread_mutex_unlock(&C);
  pthread_mutex_unlock(&B);
  pthread_mutex_unlock(&A);
}

static NOINLINE void cond_wait_holding_a(void) {
  pthread_mutex_lock(&M);
  pthread_mutex_lock(&A);
  struct timespec ts = shim_deadline_ms(CLOCK_REALTIME, 20);
  CHECK_RC(pthread_cond_timedwait(&CV, &M, &ts), ETIMEDOUT);
  pthread_mutex_unlock(&A);
  pthread_mutex_unlock(&M);
}

static NOINLINE void b_then_try_a(void) {
  pthread_mutex_lock(&B);
  CHECK_RC(pthread_mutex_trylock(&A), 0);
  pthread_mutex_unlock(&A);
  pthread_mutex_unlock(&B);
}

static pthread_mutex_t R;

static NOINLINE void r_r_a(void) {
  pthread_mutex_lock(&R);
  pthread_mutex_lock(&R);
  pthread_mutex_lock(&A);
  pthread_mutex_unlock(&A);
  pthread_mutex_unlock(&R);
  pthread_mutex_unlock(&R);
}

static NOINLINE void a_r_a_r(void) {
  /* R re-locked while A is held, having been taken before A: no edge A->R
   * (the re-lock cannot wait). */
  pthread_mutex_lock(&R);
  pthread_mutex_lock(&A);
  pthread_mutex_lock(&R);
  pthread_mutex_unlock(&R);
  pthread_mutex_unlock(&A);
  pthread_mutex_unlock(&R);
}

static NOINLINE void a_r(void) { pair(&A, &R); }

static NOINLINE void l_read_m(void) {
  pthread_rwlock_rdlock(&L);
  pthread_rwlock_rdlock(&L); /* recursive read lock: no edge */
  pthread_mutex_lock(&M);
  pthread_mutex_unlock(&M);
  pthread_rwlock_unlock(&L);
  pthread_rwlock_unlock(&L);
}

static NOINLINE void l_write_m(void) {
  pthread_rwlock_wrlock(&L);
  pthread_mutex_lock(&M);
  pthread_mutex_unlock(&M);
  pthread_rwlock_unlock(&L);
}

static NOINLINE void m_l_read(void) {
  pthread_mutex_lock(&M);
  pthread_rwlock_rdlock(&L);
  pthread_rwlock_unlock(&L);
  pthread_mutex_unlock(&M);
}

/* rwlock_waits: what the waiting thread does to W. */
static pthread_rwlock_t W = PTHREAD_RWLOCK_INITIALIZER;
static int g_about_to_lock;

static void rw_take(int write) {
  CHECK_RC(write ? pthread_rwlock_wrlock(&W) : pthread_rwlock_rdlock(&W), 0);
}

static void* rw_waiter(void* write) {
  __atomic_store_n(&g_about_to_lock, 1, __ATOMIC_RELEASE);
  rw_take(write != NULL);
  CHECK_RC(pthread_rwlock_unlock(&W), 0);
  return NULL;
}

/* Main holds W (for writing or reading) while a thread comes to wait for
 * it (to write or read). */
static void rwlock_wait(int main_writes, int thread_writes) {
  rw_take(main_writes);
  __atomic_store_n(&g_about_to_lock, 0, __ATOMIC_RELAXED);
  pthread_t t = shim_spawn(rw_waiter, thread_writes ? (void*)1 : NULL);
  while (!__atomic_load_n(&g_about_to_lock, __ATOMIC_ACQUIRE)) {
    shim_sleep_us(100);
  }
  shim_sleep_ms(20);
  CHECK_RC(pthread_rwlock_unlock(&W), 0);
  pthread_join(t, NULL);
}

static int g_arrived;

static void* deadlock_thread(void* arg) {
  const int first_a = arg != NULL;
  pthread_mutex_t* x = first_a ? &A : &B;
  pthread_mutex_t* y = first_a ? &B : &A;
  pthread_mutex_lock(x);
  __atomic_fetch_add(&g_arrived, 1, __ATOMIC_ACQ_REL);
  while (__atomic_load_n(&g_arrived, __ATOMIC_ACQUIRE) < 2) shim_sleep_us(100);
  pthread_mutex_lock(y); /* never returns */
  return NULL;
}

int main(int argc, char** argv) {
  const char* what = argc > 1 ? argv[1] : "";
  shim_test_start("deadlock_prog", 30);
  if (strcmp(what, "abba") == 0) {
    for (int i = 0; i < 3; ++i) {
      on_thread(take_ab);
      on_thread(take_ba);
    }
  } else if (strcmp(what, "cycle3") == 0) {
    on_thread(ab);
    on_thread(bc);
    on_thread(ca);
  } else if (strcmp(what, "condvar") == 0) {
    on_thread(cond_wait_holding_a);
  } else if (strcmp(what, "consistent") == 0) {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&R, &attr);
    for (int round = 0; round < 10; ++round) {
      pthread_t t[4];
      for (int i = 0; i < 4; ++i) t[i] = shim_spawn(run_fn, (void*)abc);
      for (int i = 0; i < 4; ++i) pthread_join(t[i], NULL);
      on_thread(ab);
      on_thread(bc);
      on_thread(a_r_a_r);
    }
  } else if (strcmp(what, "trylock") == 0) {
    on_thread(ab);
    on_thread(b_then_try_a);
  } else if (strcmp(what, "reuse") == 0) {
    on_thread(ab);
    CHECK_RC(pthread_mutex_destroy(&A), 0);
    CHECK_RC(pthread_mutex_destroy(&B), 0);
    CHECK_RC(pthread_mutex_init(&A, NULL), 0);
    CHECK_RC(pthread_mutex_init(&B, NULL), 0);
    on_thread(take_ba);
  } else if (strcmp(what, "recursive") == 0) {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&R, &attr);
    on_thread(r_r_a);
    on_thread(a_r);
  } else if (strcmp(what, "read_ok") == 0) {
    on_thread(l_read_m);
    on_thread(m_l_read);
  } else if (strcmp(what, "read_bad") == 0) {
    on_thread(l_write_m);
    on_thread(m_l_read);
  } else if (strcmp(what, "deadlock") == 0) {
    pthread_t t1 = shim_spawn(deadlock_thread, (void*)1);
    pthread_t t2 = shim_spawn(deadlock_thread, NULL);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
  } else if (strcmp(what, "rwlock_waits") == 0) {
    rwlock_wait(1, 1);
    rwlock_wait(1, 0);
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(
        &attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    CHECK_RC(pthread_rwlock_init(&W, &attr), 0);
    rwlock_wait(0, 1);
  } else {
    FATAL("unknown scenario '%s'", what);
  }
  return shim_test_finish();
}
