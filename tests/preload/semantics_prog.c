/* Semantics and glibc's exact error codes of the primitives the shim
 * replaces: pthread_mutex_* (every kind, static initializers, zero-filled
 * memory), pthread_cond_* (clocks, timeouts, bad arguments), C11 mtx_* /
 * cnd_*, and the robust and process-shared objects the shim hands to glibc.
 *
 * Run by run_under_shim.sh --glibc-too: first against plain glibc (which
 * proves every expectation below is glibc's own result), then under the
 * shim. */
#include "tests/preload/shim_test_util.h"

#include <semaphore.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <threads.h>

/* ---- helpers ---------------------------------------------------------- */

/* A thread that locks a mutex and holds it until released. */
struct holder {
  pthread_t thread;
  pthread_mutex_t* m;
  sem_t locked, release;
  int lock_rc, unlock_rc;
  int exit_without_unlock;
};

static void* holder_main(void* p) {
  struct holder* h = (struct holder*)p;
  h->lock_rc = pthread_mutex_lock(h->m);
  sem_post(&h->locked);
  if (h->exit_without_unlock) return NULL;
  while (sem_wait(&h->release) != 0) {
  }
  h->unlock_rc = pthread_mutex_unlock(h->m);
  return NULL;
}

static void holder_start(struct holder* h, pthread_mutex_t* m, int exit_early) {
  memset(h, 0, sizeof(*h));
  h->m = m;
  h->exit_without_unlock = exit_early;
  sem_init(&h->locked, 0, 0);
  sem_init(&h->release, 0, 0);
  h->thread = shim_spawn(holder_main, h);
  while (sem_wait(&h->locked) != 0) {
  }
  CHECK_RC(h->lock_rc, 0);
}

static void holder_finish(struct holder* h) {
  if (!h->exit_without_unlock) sem_post(&h->release);
  pthread_join(h->thread, NULL);
  if (!h->exit_without_unlock) CHECK_RC(h->unlock_rc, 0);
  sem_destroy(&h->locked);
  sem_destroy(&h->release);
}

/* Runs fn(m) on another thread and returns its result. */
struct call {
  int (*fn)(pthread_mutex_t*);
  pthread_mutex_t* m;
  int rc;
};
static void* call_main(void* p) {
  struct call* c = (struct call*)p;
  c->rc = c->fn(c->m);
  return NULL;
}
static int on_other_thread(int (*fn)(pthread_mutex_t*), pthread_mutex_t* m) {
  struct call c = {fn, m, -1};
  pthread_join(shim_spawn(call_main, &c), NULL);
  return c.rc;
}
static int trylock_unlock(pthread_mutex_t* m) {
  int rc = pthread_mutex_trylock(m);
  if (rc == 0) CHECK_RC(pthread_mutex_unlock(m), 0);
  return rc;
}

/* Several threads increment a counter under `m`; the sum must be exact. */
struct counting {
  pthread_mutex_t* m;
  long* counter;
  int iters;
  int use_trylock;
};
static void* counting_main(void* p) {
  struct counting* c = (struct counting*)p;
  for (int i = 0; i < c->iters; ++i) {
    if (c->use_trylock && (i & 1)) {
      int rc;
      while ((rc = pthread_mutex_trylock(c->m)) == EBUSY) {
      }
      CHECK_RC(rc, 0);
    } else {
      CHECK_RC(pthread_mutex_lock(c->m), 0);
    }
    ++*c->counter;
    CHECK_RC(pthread_mutex_unlock(c->m), 0);
  }
  return NULL;
}
static void check_counting(pthread_mutex_t* m, const char* what) {
  enum { kThreads = 4, kIters = 20000 };
  long counter = 0;
  struct counting c[kThreads];
  pthread_t t[kThreads];
  for (int i = 0; i < kThreads; ++i) {
    c[i].m = m;
    c[i].counter = &counter;
    c[i].iters = kIters;
    c[i].use_trylock = i == 0;
    t[i] = shim_spawn(counting_main, &c[i]);
  }
  for (int i = 0; i < kThreads; ++i) pthread_join(t[i], NULL);
  if (counter != (long)kThreads * kIters) {
    SHIM_FAIL("%s: counter %ld, want %ld", what, counter,
              (long)kThreads * kIters);
  }
}

/* ---- static initializers and zero-filled memory ------------------------ */

static pthread_mutex_t g_normal = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_recursive = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static pthread_mutex_t g_errorcheck = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static pthread_mutex_t g_adaptive = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;

static void test_normal_kind(pthread_mutex_t* m, const char* what) {
  CHECK_RC(pthread_mutex_lock(m), 0);
  CHECK_RC(on_other_thread(trylock_unlock, m), EBUSY);
  CHECK_RC(pthread_mutex_unlock(m), 0);
  CHECK_RC(pthread_mutex_trylock(m), 0);
  CHECK_RC(on_other_thread(trylock_unlock, m), EBUSY);
  /* glibc's normal and adaptive kinds have no owner check: another
   * thread's unlock releases the lock. */
  CHECK_RC(on_other_thread(pthread_mutex_unlock, m), 0);
  CHECK_RC(on_other_thread(trylock_unlock, m), 0);
  check_counting(m, what);
}

static void test_recursive_kind(pthread_mutex_t* m) {
  enum { kDepth = 1000 };
  for (int i = 0; i < kDepth; ++i) CHECK_RC(pthread_mutex_lock(m), 0);
  CHECK_RC(pthread_mutex_trylock(m), 0);  /* depth kDepth + 1 */
  struct timespec far = shim_deadline_ms(CLOCK_REALTIME, 10000);
  CHECK_RC(pthread_mutex_timedlock(m, &far), 0);  /* + 2 */
  CHECK_RC(on_other_thread(trylock_unlock, m), EBUSY);
  /* Not the owner: EPERM, and the lock stays held. */
  CHECK_RC(on_other_thread(pthread_mutex_unlock, m), EPERM);
  CHECK_RC(on_other_thread(trylock_unlock, m), EBUSY);
  for (int i = 0; i < kDepth + 2; ++i) {
    CHECK_RC(pthread_mutex_unlock(m), 0);
    if (i == kDepth) {  /* one level left: still held */
      CHECK_RC(on_other_thread(trylock_unlock, m), EBUSY);
    }
  }
  CHECK_RC(pthread_mutex_unlock(m), EPERM);  /* not held */
  CHECK_RC(on_other_thread(trylock_unlock, m), 0);
  check_counting(m, "recursive");
}

static void test_errorcheck_kind(pthread_mutex_t* m) {
  CHECK_RC(pthread_mutex_unlock(m), EPERM);  /* not held */
  CHECK_RC(pthread_mutex_lock(m), 0);
  CHECK_RC(pthread_mutex_lock(m), EDEADLK);
  CHECK_RC(pthread_mutex_trylock(m), EBUSY);  /* glibc: EBUSY, not EDEADLK */
  struct timespec far = shim_deadline_ms(CLOCK_REALTIME, 10000);
  CHECK_RC(pthread_mutex_timedlock(m, &far), EDEADLK);
  CHECK_RC(pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &far), EDEADLK);
  /* Self-deadlock is found before the timespec is looked at. */
  struct timespec bad = {0, 1000000000};
  CHECK_RC(pthread_mutex_timedlock(m, &bad), EDEADLK);
  CHECK_RC(on_other_thread(pthread_mutex_unlock, m), EPERM);
  CHECK_RC(on_other_thread(trylock_unlock, m), EBUSY);
  CHECK_RC(pthread_mutex_unlock(m), 0);
  CHECK_RC(pthread_mutex_unlock(m), EPERM);
  check_counting(m, "errorcheck");
}

static void test_static_initializers(void) {
  test_normal_kind(&g_normal, "PTHREAD_MUTEX_INITIALIZER");
  test_normal_kind(&g_adaptive, "PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP");
  test_recursive_kind(&g_recursive);
  test_errorcheck_kind(&g_errorcheck);

  /* Zero-filled memory is a normal mutex and a default condvar, used
   * without any init call. */
  pthread_mutex_t* zm = (pthread_mutex_t*)calloc(1, sizeof(pthread_mutex_t));
  pthread_cond_t* zc = (pthread_cond_t*)calloc(1, sizeof(pthread_cond_t));
  test_normal_kind(zm, "calloc'ed mutex");
  CHECK_RC(pthread_mutex_lock(zm), 0);
  struct timespec soon = shim_deadline_ms(CLOCK_REALTIME, 20);
  CHECK_RC(pthread_cond_timedwait(zc, zm, &soon), ETIMEDOUT);
  CHECK_RC(on_other_thread(trylock_unlock, zm), EBUSY);  /* re-held */
  CHECK_RC(pthread_mutex_unlock(zm), 0);
  CHECK_RC(pthread_cond_signal(zc), 0);
  CHECK_RC(pthread_cond_broadcast(zc), 0);
  free(zm);
  free(zc);
}

/* ---- the kinds through pthread_mutexattr_settype ----------------------- */

static void init_kind(pthread_mutex_t* m, int kind) {
  pthread_mutexattr_t a;
  CHECK_RC(pthread_mutexattr_init(&a), 0);
  CHECK_RC(pthread_mutexattr_settype(&a, kind), 0);
  CHECK_RC(pthread_mutex_init(m, &a), 0);
  CHECK_RC(pthread_mutexattr_destroy(&a), 0);
}

static void test_attr_kinds(void) {
  pthread_mutex_t m;
  CHECK_RC(pthread_mutex_init(&m, NULL), 0);
  test_normal_kind(&m, "init(NULL)");
  CHECK_RC(pthread_mutex_destroy(&m), 0);
  init_kind(&m, PTHREAD_MUTEX_NORMAL);
  test_normal_kind(&m, "PTHREAD_MUTEX_NORMAL");
  CHECK_RC(pthread_mutex_destroy(&m), 0);
  init_kind(&m, PTHREAD_MUTEX_ADAPTIVE_NP);
  test_normal_kind(&m, "PTHREAD_MUTEX_ADAPTIVE_NP");
  CHECK_RC(pthread_mutex_destroy(&m), 0);
  init_kind(&m, PTHREAD_MUTEX_RECURSIVE);
  test_recursive_kind(&m);
  CHECK_RC(pthread_mutex_destroy(&m), 0);
  init_kind(&m, PTHREAD_MUTEX_ERRORCHECK);
  test_errorcheck_kind(&m);
  CHECK_RC(pthread_mutex_destroy(&m), 0);
}

/* ---- destroy ------------------------------------------------------------ */

static void test_destroy(void) {
  static const int kinds[] = {PTHREAD_MUTEX_NORMAL, PTHREAD_MUTEX_RECURSIVE,
                              PTHREAD_MUTEX_ERRORCHECK,
                              PTHREAD_MUTEX_ADAPTIVE_NP};
  for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); ++k) {
    pthread_mutex_t m;
    init_kind(&m, kinds[k]);
    CHECK_RC(pthread_mutex_lock(&m), 0);
    CHECK_RC(pthread_mutex_destroy(&m), EBUSY);  /* held by us */
    CHECK_RC(pthread_mutex_unlock(&m), 0);
    struct holder h;
    holder_start(&h, &m, 0);
    CHECK_RC(pthread_mutex_destroy(&m), EBUSY);  /* held by another */
    holder_finish(&h);
    CHECK_RC(pthread_mutex_destroy(&m), 0);
    /* glibc marks a destroyed mutex invalid until it is initialized. */
    CHECK_RC(pthread_mutex_lock(&m), EINVAL);
    CHECK_RC(pthread_mutex_trylock(&m), EINVAL);
    struct timespec far = shim_deadline_ms(CLOCK_REALTIME, 10000);
    CHECK_RC(pthread_mutex_timedlock(&m, &far), EINVAL);
    CHECK_RC(pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &far), EINVAL);
    CHECK_RC(pthread_mutex_unlock(&m), EINVAL);
    /* Initialized again, it works again. */
    init_kind(&m, kinds[k]);
    CHECK_RC(pthread_mutex_lock(&m), 0);
    CHECK_RC(pthread_mutex_unlock(&m), 0);
    CHECK_RC(pthread_mutex_destroy(&m), 0);
  }
}

/* ---- timedlock / clocklock ---------------------------------------------- */

static void check_timeout_not_early(clockid_t clock,
                                    const struct timespec* abstime,
                                    const char* what) {
  const int64_t now = shim_now_ns(clock);
  if (now < shim_ns_from_ts(abstime)) {
    SHIM_FAIL("%s: ETIMEDOUT %lld ns before the deadline", what,
              (long long)(shim_ns_from_ts(abstime) - now));
  }
}

struct delayed_unlock {
  pthread_mutex_t* m;
  int delay_ms;
};
static void* delayed_unlock_main(void* p) {
  struct delayed_unlock* d = (struct delayed_unlock*)p;
  CHECK_RC(pthread_mutex_lock(d->m), 0);
  shim_sleep_ms(d->delay_ms);
  CHECK_RC(pthread_mutex_unlock(d->m), 0);
  return NULL;
}

static void test_timedlock(int kind) {
  pthread_mutex_t m;
  init_kind(&m, kind);
  /* Free mutex: an invalid tv_nsec is not looked at (glibc, POSIX). */
  struct timespec bad_hi = {time(NULL) + 10, 1000000000};
  struct timespec bad_lo = {time(NULL) + 10, -1};
  CHECK_RC(pthread_mutex_timedlock(&m, &bad_hi), 0);
  CHECK_RC(pthread_mutex_unlock(&m), 0);
  CHECK_RC(pthread_mutex_timedlock(&m, &bad_lo), 0);
  CHECK_RC(pthread_mutex_unlock(&m), 0);
  CHECK_RC(pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &bad_hi), 0);
  CHECK_RC(pthread_mutex_unlock(&m), 0);
  /* A deadline in the past on a free mutex: acquired. */
  struct timespec past = {0, 0};
  CHECK_RC(pthread_mutex_timedlock(&m, &past), 0);
  CHECK_RC(pthread_mutex_unlock(&m), 0);
  /* An unsupported clock: EINVAL even when free (glibc checks it first). */
  struct timespec far = shim_deadline_ms(CLOCK_MONOTONIC, 10000);
  CHECK_RC(pthread_mutex_clocklock(&m, CLOCK_PROCESS_CPUTIME_ID, &far), EINVAL);
  CHECK_RC(pthread_mutex_clocklock(&m, CLOCK_THREAD_CPUTIME_ID, &far), EINVAL);
  CHECK_RC(pthread_mutex_clocklock(&m, (clockid_t)12345, &far), EINVAL);
  CHECK_RC(on_other_thread(trylock_unlock, &m), 0);  /* still free */

  struct holder h;
  holder_start(&h, &m, 0);
  /* Held elsewhere: would block, so the bad tv_nsec is EINVAL. */
  CHECK_RC(pthread_mutex_timedlock(&m, &bad_hi), EINVAL);
  CHECK_RC(pthread_mutex_timedlock(&m, &bad_lo), EINVAL);
  CHECK_RC(pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &bad_hi), EINVAL);
  CHECK_RC(pthread_mutex_clocklock(&m, CLOCK_REALTIME, &bad_lo), EINVAL);
  CHECK_RC(pthread_mutex_clocklock(&m, CLOCK_PROCESS_CPUTIME_ID, &far), EINVAL);
  /* Deadlines that pass. */
  CHECK_RC(pthread_mutex_timedlock(&m, &past), ETIMEDOUT);
  struct timespec negative = {-1, 0};
  CHECK_RC(pthread_mutex_timedlock(&m, &negative), ETIMEDOUT);
  struct timespec rt = shim_deadline_ms(CLOCK_REALTIME, 50);
  CHECK_RC(pthread_mutex_timedlock(&m, &rt), ETIMEDOUT);
  check_timeout_not_early(CLOCK_REALTIME, &rt, "timedlock");
  struct timespec mono = shim_deadline_ms(CLOCK_MONOTONIC, 50);
  CHECK_RC(pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &mono), ETIMEDOUT);
  check_timeout_not_early(CLOCK_MONOTONIC, &mono, "clocklock(MONOTONIC)");
  rt = shim_deadline_ms(CLOCK_REALTIME, 50);
  CHECK_RC(pthread_mutex_clocklock(&m, CLOCK_REALTIME, &rt), ETIMEDOUT);
  check_timeout_not_early(CLOCK_REALTIME, &rt, "clocklock(REALTIME)");
  /* A monotonic deadline is not taken for a realtime one (that would be
   * decades ago and time out at once). */
  const int64_t t0 = shim_now_ns(CLOCK_MONOTONIC);
  mono = shim_deadline_ms(CLOCK_MONOTONIC, 80);
  CHECK_RC(pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &mono), ETIMEDOUT);
  CHECK(shim_now_ns(CLOCK_MONOTONIC) - t0 >= 80 * 1000000LL);
  holder_finish(&h);

  /* The holder lets go before the deadline: acquired. */
  struct delayed_unlock d = {&m, 30};
  pthread_t t = shim_spawn(delayed_unlock_main, &d);
  shim_sleep_ms(5);
  far = shim_deadline_ms(CLOCK_REALTIME, 20000);
  CHECK_RC(pthread_mutex_timedlock(&m, &far), 0);
  CHECK_RC(pthread_mutex_unlock(&m), 0);
  pthread_join(t, NULL);
  t = shim_spawn(delayed_unlock_main, &d);
  shim_sleep_ms(5);
  far = shim_deadline_ms(CLOCK_MONOTONIC, 20000);
  CHECK_RC(pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &far), 0);
  CHECK_RC(pthread_mutex_unlock(&m), 0);
  pthread_join(t, NULL);
  CHECK_RC(pthread_mutex_destroy(&m), 0);
}

/* ---- condition variables ------------------------------------------------ */

static void test_condattr(void) {
  pthread_condattr_t a;
  clockid_t clock = -1;
  CHECK_RC(pthread_condattr_init(&a), 0);
  CHECK_RC(pthread_condattr_getclock(&a, &clock), 0);
  CHECK(clock == CLOCK_REALTIME);
  CHECK_RC(pthread_condattr_setclock(&a, CLOCK_MONOTONIC), 0);
  CHECK_RC(pthread_condattr_getclock(&a, &clock), 0);
  CHECK(clock == CLOCK_MONOTONIC);
  CHECK_RC(pthread_condattr_setclock(&a, CLOCK_REALTIME), 0);
  /* glibc accepts only these two. */
  CHECK_RC(pthread_condattr_setclock(&a, CLOCK_PROCESS_CPUTIME_ID), EINVAL);
  CHECK_RC(pthread_condattr_setclock(&a, CLOCK_THREAD_CPUTIME_ID), EINVAL);
  CHECK_RC(pthread_condattr_setclock(&a, CLOCK_MONOTONIC_RAW), EINVAL);
  CHECK_RC(pthread_condattr_setclock(&a, CLOCK_BOOTTIME), EINVAL);
  CHECK_RC(pthread_condattr_getclock(&a, &clock), 0);
  CHECK(clock == CLOCK_REALTIME);
  CHECK_RC(pthread_condattr_destroy(&a), 0);
}

static void init_cond(pthread_cond_t* c, clockid_t clock) {
  pthread_condattr_t a;
  CHECK_RC(pthread_condattr_init(&a), 0);
  CHECK_RC(pthread_condattr_setclock(&a, clock), 0);
  CHECK_RC(pthread_cond_init(c, &a), 0);
  CHECK_RC(pthread_condattr_destroy(&a), 0);
}

/* A waiter on (c, m) until *flag, then records the wait's result. */
struct waiter {
  pthread_cond_t* c;
  pthread_mutex_t* m;
  int* flag;
  int* waiting;
  int rc;
  int timed;
  clockid_t clock;
};
static void* waiter_main(void* p) {
  struct waiter* w = (struct waiter*)p;
  CHECK_RC(pthread_mutex_lock(w->m), 0);
  ++*w->waiting;
  w->rc = 0;
  while (!*w->flag && w->rc == 0) {
    if (w->timed) {
      struct timespec dl = shim_deadline_ms(w->clock, 30000);
      w->rc = pthread_cond_timedwait(w->c, w->m, &dl);
    } else {
      w->rc = pthread_cond_wait(w->c, w->m);
    }
  }
  --*w->waiting;
  CHECK_RC(pthread_mutex_unlock(w->m), 0);
  return NULL;
}

/* Handshakes on (c, m): one signal per waiter, then a broadcast. */
static void check_handshake(pthread_cond_t* c, pthread_mutex_t* m,
                            clockid_t clock, const char* what) {
  enum { kWaiters = 6 };
  for (int round = 0; round < 2; ++round) {
    int flag = 0, waiting = 0;
    struct waiter w[kWaiters];
    pthread_t t[kWaiters];
    for (int i = 0; i < kWaiters; ++i) {
      w[i].c = c;
      w[i].m = m;
      w[i].flag = &flag;
      w[i].waiting = &waiting;
      w[i].timed = i & 1;
      w[i].clock = clock;
      t[i] = shim_spawn(waiter_main, &w[i]);
    }
    for (;;) {  /* all are waiting (they released m inside the wait) */
      CHECK_RC(pthread_mutex_lock(m), 0);
      const int n = waiting;
      CHECK_RC(pthread_mutex_unlock(m), 0);
      if (n == kWaiters) break;
      shim_sleep_ms(1);
    }
    CHECK_RC(pthread_mutex_lock(m), 0);
    flag = 1;
    if (round == 0) {
      for (int i = 0; i < kWaiters; ++i) CHECK_RC(pthread_cond_signal(c), 0);
    } else {
      CHECK_RC(pthread_cond_broadcast(c), 0);
    }
    CHECK_RC(pthread_mutex_unlock(m), 0);
    for (int i = 0; i < kWaiters; ++i) {
      pthread_join(t[i], NULL);
      if (w[i].rc != 0) {
        SHIM_FAIL("%s: waiter %d returned %d (%s)", what, i, w[i].rc,
                  shim_errname(w[i].rc));
      }
    }
  }
}

static void test_cond_clock(clockid_t clock, int mutex_kind) {
  pthread_cond_t c;
  pthread_mutex_t m;
  init_cond(&c, clock);
  init_kind(&m, mutex_kind);
  const char* what = clock == CLOCK_MONOTONIC ? "monotonic cond" : "realtime cond";

  CHECK_RC(pthread_mutex_lock(&m), 0);
  /* Timing out returns ETIMEDOUT with the mutex held again, not early, on
   * the condvar's clock. */
  const int64_t t0 = shim_now_ns(CLOCK_MONOTONIC);
  struct timespec dl = shim_deadline_ms(clock, 60);
  CHECK_RC(pthread_cond_timedwait(&c, &m, &dl), ETIMEDOUT);
  check_timeout_not_early(clock, &dl, what);
  CHECK(shim_now_ns(CLOCK_MONOTONIC) - t0 >= 60 * 1000000LL);
  CHECK_RC(on_other_thread(trylock_unlock, &m), EBUSY);
  /* clockwait with either clock, whatever the condvar's. */
  dl = shim_deadline_ms(CLOCK_MONOTONIC, 30);
  CHECK_RC(pthread_cond_clockwait(&c, &m, CLOCK_MONOTONIC, &dl), ETIMEDOUT);
  check_timeout_not_early(CLOCK_MONOTONIC, &dl, "clockwait(MONOTONIC)");
  dl = shim_deadline_ms(CLOCK_REALTIME, 30);
  CHECK_RC(pthread_cond_clockwait(&c, &m, CLOCK_REALTIME, &dl), ETIMEDOUT);
  check_timeout_not_early(CLOCK_REALTIME, &dl, "clockwait(REALTIME)");
  /* A deadline already passed. */
  struct timespec past = {0, 0};
  CHECK_RC(pthread_cond_timedwait(&c, &m, &past), ETIMEDOUT);
  CHECK_RC(pthread_cond_clockwait(&c, &m, CLOCK_MONOTONIC, &past), ETIMEDOUT);
  /* Bad arguments: EINVAL, and the mutex stays held. */
  dl = shim_deadline_ms(clock, 10000);
  CHECK_RC(pthread_cond_clockwait(&c, &m, CLOCK_PROCESS_CPUTIME_ID, &dl), EINVAL);
  CHECK_RC(pthread_cond_clockwait(&c, &m, CLOCK_THREAD_CPUTIME_ID, &dl), EINVAL);
  CHECK_RC(pthread_cond_clockwait(&c, &m, (clockid_t)12345, &dl), EINVAL);
  struct timespec bad_hi = {time(NULL) + 10, 1000000000};
  struct timespec bad_lo = {time(NULL) + 10, -1};
  CHECK_RC(pthread_cond_timedwait(&c, &m, &bad_hi), EINVAL);
  CHECK_RC(pthread_cond_timedwait(&c, &m, &bad_lo), EINVAL);
  CHECK_RC(pthread_cond_clockwait(&c, &m, CLOCK_MONOTONIC, &bad_hi), EINVAL);
  CHECK_RC(on_other_thread(trylock_unlock, &m), EBUSY);
  CHECK_RC(pthread_mutex_unlock(&m), 0);

  /* No waiters: signal and broadcast succeed and do nothing. */
  CHECK_RC(pthread_cond_signal(&c), 0);
  CHECK_RC(pthread_cond_broadcast(&c), 0);
  check_handshake(&c, &m, clock, what);
  CHECK_RC(pthread_cond_destroy(&c), 0);
  CHECK_RC(pthread_mutex_destroy(&m), 0);
}

static int cond_wait_on(pthread_mutex_t* m) {
  pthread_cond_t c = PTHREAD_COND_INITIALIZER;
  struct timespec dl = shim_deadline_ms(CLOCK_REALTIME, 20);
  return pthread_cond_timedwait(&c, m, &dl);
}

static int cond_wait_on_cond(pthread_cond_t* c, pthread_mutex_t* m) {
  struct timespec dl = shim_deadline_ms(CLOCK_MONOTONIC, 20);
  return pthread_cond_clockwait(c, m, CLOCK_MONOTONIC, &dl);
}

static void test_cond_mutex_not_held(void) {
  /* Error-checking and recursive mutexes: waiting without holding the
   * mutex is EPERM (glibc's unlock inside the wait fails). */
  static const int kinds[] = {PTHREAD_MUTEX_ERRORCHECK, PTHREAD_MUTEX_RECURSIVE};
  for (size_t k = 0; k < 2; ++k) {
    pthread_mutex_t m;
    pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    init_kind(&m, kinds[k]);
    CHECK_RC(pthread_cond_wait(&c, &m), EPERM);
    struct timespec dl = shim_deadline_ms(CLOCK_REALTIME, 10000);
    CHECK_RC(pthread_cond_timedwait(&c, &m, &dl), EPERM);
    CHECK_RC(pthread_cond_clockwait(&c, &m, CLOCK_MONOTONIC, &dl), EPERM);
    /* Held by another thread: EPERM too, and it stays held there. */
    struct holder h;
    holder_start(&h, &m, 0);
    CHECK_RC(pthread_cond_wait(&c, &m), EPERM);
    CHECK_RC(cond_wait_on(&m), EPERM);
    holder_finish(&h);
    /* The condvar still works after the failed waits. */
    CHECK_RC(pthread_mutex_lock(&m), 0);
    dl = shim_deadline_ms(CLOCK_REALTIME, 20);
    CHECK_RC(pthread_cond_timedwait(&c, &m, &dl), ETIMEDOUT);
    CHECK_RC(pthread_mutex_unlock(&m), 0);
    CHECK_RC(pthread_mutex_unlock(&m), EPERM);
    CHECK_RC(pthread_cond_destroy(&c), 0);
    CHECK_RC(pthread_mutex_destroy(&m), 0);
  }
  /* A recursive mutex held once is released for the wait and held again. */
  pthread_mutex_t m;
  init_kind(&m, PTHREAD_MUTEX_RECURSIVE);
  CHECK_RC(pthread_mutex_lock(&m), 0);
  CHECK_RC(cond_wait_on(&m), ETIMEDOUT);
  CHECK_RC(on_other_thread(trylock_unlock, &m), EBUSY);
  CHECK_RC(pthread_mutex_unlock(&m), 0);
  CHECK_RC(pthread_mutex_unlock(&m), EPERM);
  CHECK_RC(pthread_mutex_destroy(&m), 0);
}

static void test_cond(void) {
  test_condattr();
  test_cond_clock(CLOCK_REALTIME, PTHREAD_MUTEX_NORMAL);
  test_cond_clock(CLOCK_MONOTONIC, PTHREAD_MUTEX_ERRORCHECK);
  test_cond_clock(CLOCK_REALTIME, PTHREAD_MUTEX_RECURSIVE);
  test_cond_clock(CLOCK_MONOTONIC, PTHREAD_MUTEX_ADAPTIVE_NP);
  test_cond_mutex_not_held();
  /* The static initializer. */
  check_handshake(&g_cond, &g_normal, CLOCK_REALTIME, "PTHREAD_COND_INITIALIZER");
}

/* ---- C11 threads -------------------------------------------------------- */

struct c11_pair {
  mtx_t* m;
  cnd_t* c;
  int flag;
  int rc;
};

static int c11_trylock_unlock(void* p) {
  mtx_t* m = (mtx_t*)p;
  int rc = mtx_trylock(m);
  if (rc == thrd_success) CHECK(mtx_unlock(m) == thrd_success);
  return rc;
}

static int c11_timedlock_short(void* p) {
  mtx_t* m = (mtx_t*)p;
  struct timespec dl = shim_deadline_ms(CLOCK_REALTIME, 40);
  int rc = mtx_timedlock(m, &dl);
  if (rc == thrd_timedout) check_timeout_not_early(CLOCK_REALTIME, &dl, "mtx_timedlock");
  if (rc == thrd_success) CHECK(mtx_unlock(m) == thrd_success);
  return rc;
}

static int c11_timedlock_bad(void* p) {
  mtx_t* m = (mtx_t*)p;
  struct timespec dl = {time(NULL) + 10, 1000000000};
  int rc = mtx_timedlock(m, &dl);
  if (rc == thrd_success) CHECK(mtx_unlock(m) == thrd_success);
  return rc;
}

static int c11_run(thrd_start_t fn, void* arg) {
  thrd_t t;
  int res = -1;
  CHECK(thrd_create(&t, fn, arg) == thrd_success);
  CHECK(thrd_join(t, &res) == thrd_success);
  return res;
}

static int c11_waiter(void* p) {
  struct c11_pair* pr = (struct c11_pair*)p;
  CHECK(mtx_lock(pr->m) == thrd_success);
  pr->rc = thrd_success;
  while (!pr->flag && pr->rc == thrd_success) pr->rc = cnd_wait(pr->c, pr->m);
  CHECK(mtx_unlock(pr->m) == thrd_success);
  return 0;
}

static void test_c11(void) {
  mtx_t m;
  cnd_t c;
  CHECK(mtx_init(&m, mtx_plain) == thrd_success);
  CHECK(mtx_lock(&m) == thrd_success);
  CHECK(c11_run(c11_trylock_unlock, &m) == thrd_busy);
  CHECK(c11_run(c11_timedlock_short, &m) == thrd_timedout);
  CHECK(c11_run(c11_timedlock_bad, &m) == thrd_error);
  CHECK(mtx_unlock(&m) == thrd_success);
  CHECK(c11_run(c11_trylock_unlock, &m) == thrd_success);
  CHECK(c11_run(c11_timedlock_short, &m) == thrd_success);
  CHECK(c11_run(c11_timedlock_bad, &m) == thrd_success);  /* free: not looked at */
  mtx_destroy(&m);

  CHECK(mtx_init(&m, mtx_timed) == thrd_success);
  struct timespec dl = shim_deadline_ms(CLOCK_REALTIME, 10000);
  CHECK(mtx_timedlock(&m, &dl) == thrd_success);
  CHECK(c11_run(c11_timedlock_short, &m) == thrd_timedout);
  CHECK(mtx_unlock(&m) == thrd_success);
  mtx_destroy(&m);

  for (int type = 0; type < 2; ++type) {
    CHECK(mtx_init(&m, (type ? mtx_timed : mtx_plain) | mtx_recursive) ==
          thrd_success);
    CHECK(mtx_lock(&m) == thrd_success);
    CHECK(mtx_lock(&m) == thrd_success);
    CHECK(mtx_trylock(&m) == thrd_success);
    dl = shim_deadline_ms(CLOCK_REALTIME, 10000);
    CHECK(mtx_timedlock(&m, &dl) == thrd_success);
    CHECK(c11_run(c11_trylock_unlock, &m) == thrd_busy);
    for (int i = 0; i < 4; ++i) CHECK(mtx_unlock(&m) == thrd_success);
    CHECK(c11_run(c11_trylock_unlock, &m) == thrd_success);
    mtx_destroy(&m);
  }

  CHECK(mtx_init(&m, mtx_plain) == thrd_success);
  CHECK(cnd_init(&c) == thrd_success);
  CHECK(cnd_signal(&c) == thrd_success);
  CHECK(cnd_broadcast(&c) == thrd_success);
  CHECK(mtx_lock(&m) == thrd_success);
  dl = shim_deadline_ms(CLOCK_REALTIME, 40);
  CHECK(cnd_timedwait(&c, &m, &dl) == thrd_timedout);
  check_timeout_not_early(CLOCK_REALTIME, &dl, "cnd_timedwait");
  CHECK(c11_run(c11_trylock_unlock, &m) == thrd_busy);  /* held again */
  struct timespec bad = {time(NULL) + 10, 1000000000};
  CHECK(cnd_timedwait(&c, &m, &bad) == thrd_error);
  CHECK(c11_run(c11_trylock_unlock, &m) == thrd_busy);
  CHECK(mtx_unlock(&m) == thrd_success);
  /* Handshakes: cnd_signal, then cnd_broadcast with two waiters. */
  for (int round = 0; round < 2; ++round) {
    struct c11_pair pr[2] = {{&m, &c, 0, -1}, {&m, &c, 0, -1}};
    thrd_t t[2];
    const int n = round + 1;
    for (int i = 0; i < n; ++i) CHECK(thrd_create(&t[i], c11_waiter, &pr[i]) == thrd_success);
    shim_sleep_ms(20);
    CHECK(mtx_lock(&m) == thrd_success);
    for (int i = 0; i < n; ++i) pr[i].flag = 1;
    if (round == 0) {
      CHECK(cnd_signal(&c) == thrd_success);
    } else {
      CHECK(cnd_broadcast(&c) == thrd_success);
    }
    CHECK(mtx_unlock(&m) == thrd_success);
    for (int i = 0; i < n; ++i) {
      CHECK(thrd_join(t[i], NULL) == thrd_success);
      CHECK(pr[i].rc == thrd_success);
    }
  }
  cnd_destroy(&c);
  mtx_destroy(&m);
}

/* ---- glibc 2.36 where POSIX is silent ----------------------------------- */

/* A null abstime: glibc 2.36's timed mutex locks wait without a deadline
 * (and check the clock first). */
static void test_null_abstime_mutex(void) {
  const struct timespec* volatile no_time = NULL;  /* no -Wnonnull */
  static const int kinds[] = {PTHREAD_MUTEX_NORMAL, PTHREAD_MUTEX_RECURSIVE,
                              PTHREAD_MUTEX_ERRORCHECK,
                              PTHREAD_MUTEX_ADAPTIVE_NP};
  for (size_t k = 0; k < 4; ++k) {
    pthread_mutex_t m;
    init_kind(&m, kinds[k]);
    CHECK_RC(pthread_mutex_timedlock(&m, no_time), 0);
    if (kinds[k] == PTHREAD_MUTEX_RECURSIVE) {
      CHECK_RC(pthread_mutex_timedlock(&m, no_time), 0);
      CHECK_RC(pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, no_time), 0);
      CHECK_RC(pthread_mutex_unlock(&m), 0);
      CHECK_RC(pthread_mutex_unlock(&m), 0);
    } else if (kinds[k] == PTHREAD_MUTEX_ERRORCHECK) {
      CHECK_RC(pthread_mutex_timedlock(&m, no_time), EDEADLK);
    }
    CHECK_RC(pthread_mutex_unlock(&m), 0);
    CHECK_RC(pthread_mutex_clocklock(&m, CLOCK_PROCESS_CPUTIME_ID, no_time), EINVAL);
    /* Held elsewhere: waits for the unlock (EINVAL before the fix). */
    for (int clocked = 0; clocked < 2; ++clocked) {
      struct delayed_unlock d = {&m, 30};
      pthread_t t = shim_spawn(delayed_unlock_main, &d);
      shim_sleep_ms(5);
      CHECK_RC(clocked ? pthread_mutex_clocklock(&m, CLOCK_REALTIME, no_time)
                       : pthread_mutex_timedlock(&m, no_time),
               0);
      CHECK_RC(pthread_mutex_unlock(&m), 0);
      pthread_join(t, NULL);
    }
    CHECK_RC(pthread_mutex_destroy(&m), 0);
  }
  mtx_t cm;
  CHECK(mtx_init(&cm, mtx_timed) == thrd_success);
  CHECK(mtx_timedlock(&cm, no_time) == thrd_success);
  CHECK(mtx_unlock(&cm) == thrd_success);
  mtx_destroy(&cm);
  /* A null abstime in a timed condvar wait: glibc 2.36 dereferences it
   * (SIGSEGV); the shim says EINVAL, glibc's answer to every other invalid
   * abstime, and the mutex stays held. Not run against glibc. */
  if (!g_shim_test_glibc) {
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    pthread_cond_t pc;
    pthread_condattr_t ca;
    CHECK_RC(pthread_condattr_init(&ca), 0);
    CHECK_RC(pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED), 0);
    CHECK_RC(pthread_cond_init(&pc, &ca), 0);
    CHECK_RC(pthread_condattr_destroy(&ca), 0);
    CHECK_RC(pthread_mutex_lock(&m), 0);
    CHECK_RC(pthread_cond_timedwait(&c, &m, no_time), EINVAL);
    CHECK_RC(pthread_cond_clockwait(&c, &m, CLOCK_MONOTONIC, no_time), EINVAL);
    CHECK_RC(pthread_cond_clockwait(&c, &m, CLOCK_PROCESS_CPUTIME_ID, no_time), EINVAL);
    CHECK_RC(pthread_cond_timedwait(&pc, &m, no_time), EINVAL);
    CHECK_RC(on_other_thread(trylock_unlock, &m), EBUSY);
    CHECK_RC(pthread_mutex_unlock(&m), 0);
    CHECK_RC(pthread_cond_destroy(&pc), 0);
    mtx_t m11;
    cnd_t c11;
    CHECK(mtx_init(&m11, mtx_plain) == thrd_success);
    CHECK(cnd_init(&c11) == thrd_success);
    CHECK(mtx_lock(&m11) == thrd_success);
    CHECK(cnd_timedwait(&c11, &m11, no_time) == thrd_error);
    CHECK(mtx_unlock(&m11) == thrd_success);
    cnd_destroy(&c11);
    mtx_destroy(&m11);
  }
}

/* A waiter inside a timed condvar wait on (c, m) until *stop. */
struct in_wait {
  pthread_cond_t* c;
  pthread_mutex_t* m;
  int waiting;
  int stop;
  int rc;
};
static void* in_wait_main(void* p) {
  struct in_wait* w = (struct in_wait*)p;
  CHECK_RC(pthread_mutex_lock(w->m), 0);
  w->waiting = 1;
  w->rc = 0;
  while (!w->stop && w->rc == 0) {
    struct timespec dl = shim_deadline_ms(CLOCK_REALTIME, 20000);
    w->rc = pthread_cond_timedwait(w->c, w->m, &dl);
  }
  CHECK_RC(pthread_mutex_unlock(w->m), 0);
  return NULL;
}

/* glibc counts a thread inside a condvar wait as a user of the mutex
 * (__nusers): destroying the mutex then is EBUSY, not 0. */
static void destroy_while_in_wait(pthread_mutex_t* m, pthread_cond_t* c,
                                  const char* what) {
  struct in_wait w = {c, m, 0, 0, -1};
  pthread_t t = shim_spawn(in_wait_main, &w);
  for (;;) {  /* seen under the mutex: the waiter released it in the wait */
    CHECK_RC(pthread_mutex_lock(m), 0);
    const int in = w.waiting;
    CHECK_RC(pthread_mutex_unlock(m), 0);
    if (in) break;
    shim_sleep_ms(1);
  }
  const int rc = pthread_mutex_destroy(m);
  if (rc != EBUSY) SHIM_FAIL("%s: destroy with a thread in a cond wait: %d (%s)", what, rc, shim_errname(rc));
  CHECK_RC(pthread_mutex_lock(m), 0);  /* still a working mutex */
  w.stop = 1;
  CHECK_RC(pthread_cond_broadcast(c), 0);
  CHECK_RC(pthread_mutex_unlock(m), 0);
  pthread_join(t, NULL);
  CHECK_RC(w.rc, 0);
  CHECK_RC(pthread_mutex_destroy(m), 0);  /* the waiter is gone */
}

static void test_destroy_parity(void) {
  static const int kinds[] = {PTHREAD_MUTEX_NORMAL, PTHREAD_MUTEX_RECURSIVE,
                              PTHREAD_MUTEX_ERRORCHECK,
                              PTHREAD_MUTEX_ADAPTIVE_NP};
  pthread_condattr_t ca;
  CHECK_RC(pthread_condattr_init(&ca), 0);
  CHECK_RC(pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED), 0);
  for (size_t k = 0; k < 4; ++k) {
    pthread_mutex_t m;
    pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    pthread_cond_t pc;
    CHECK_RC(pthread_cond_init(&pc, &ca), 0);
    init_kind(&m, kinds[k]);
    destroy_while_in_wait(&m, &c, "private cond");
    init_kind(&m, kinds[k]);
    destroy_while_in_wait(&m, &pc, "process-shared cond");
    /* Destroyed twice: 0 both times. */
    CHECK_RC(pthread_mutex_destroy(&m), 0);
    /* A destroyed mutex in a condvar wait: EINVAL (glibc's unlock inside
     * the wait), not a wait. */
    CHECK_RC(cond_wait_on(&m), EINVAL);
    CHECK_RC(cond_wait_on_cond(&pc, &m), EINVAL);
    CHECK_RC(pthread_cond_destroy(&pc), 0);
  }
  /* glibc's process-shared mutex with the shim's private condvar. */
  pthread_mutexattr_t ma;
  pthread_mutex_t pm;
  CHECK_RC(pthread_mutexattr_init(&ma), 0);
  CHECK_RC(pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED), 0);
  CHECK_RC(pthread_mutex_init(&pm, &ma), 0);
  CHECK_RC(pthread_mutexattr_destroy(&ma), 0);
  pthread_cond_t c = PTHREAD_COND_INITIALIZER;
  destroy_while_in_wait(&pm, &c, "process-shared mutex, private cond");
  CHECK_RC(pthread_condattr_destroy(&ca), 0);
  /* C11: a destroyed mtx_t in cnd_timedwait. */
  mtx_t m11;
  cnd_t c11;
  CHECK(mtx_init(&m11, mtx_plain) == thrd_success);
  CHECK(cnd_init(&c11) == thrd_success);
  mtx_destroy(&m11);
  struct timespec dl = shim_deadline_ms(CLOCK_REALTIME, 20);
  CHECK(cnd_timedwait(&c11, &m11, &dl) == thrd_error);
  cnd_destroy(&c11);
}

/* Kind words glibc's functions refuse (EINVAL), and bits they ignore. */
static void test_kind_words(void) {
  static const int bad[] = {4, 8, 12, 4 | PTHREAD_MUTEX_RECURSIVE, 20, 36, 100};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
    pthread_mutex_t m;
    memset(&m, 0, sizeof(m));
    m.__data.__kind = bad[i];
    struct timespec dl = shim_deadline_ms(CLOCK_REALTIME, 20);
    int rc;
    if ((rc = pthread_mutex_lock(&m)) != EINVAL) SHIM_FAIL("kind %d: lock %d", bad[i], rc);
    if ((rc = pthread_mutex_trylock(&m)) != EINVAL) SHIM_FAIL("kind %d: trylock %d", bad[i], rc);
    if ((rc = pthread_mutex_timedlock(&m, &dl)) != EINVAL) SHIM_FAIL("kind %d: timedlock %d", bad[i], rc);
    if ((rc = pthread_mutex_unlock(&m)) != EINVAL) SHIM_FAIL("kind %d: unlock %d", bad[i], rc);
    if ((rc = cond_wait_on(&m)) != EINVAL) SHIM_FAIL("kind %d: cond wait %d", bad[i], rc);
    if ((rc = pthread_mutex_destroy(&m)) != 0) SHIM_FAIL("kind %d: destroy %d", bad[i], rc);
  }
  /* Bits above glibc's kind mask change nothing. */
  for (int type = 0; type < 4; ++type) {
    pthread_mutex_t m;
    memset(&m, 0, sizeof(m));
    m.__data.__kind = 1024 | type;
    CHECK_RC(pthread_mutex_lock(&m), 0);
    const int checked = type == PTHREAD_MUTEX_RECURSIVE || type == PTHREAD_MUTEX_ERRORCHECK;
    if (checked) {
      CHECK_RC(pthread_mutex_lock(&m), type == PTHREAD_MUTEX_RECURSIVE ? 0 : EDEADLK);
    } else {
      CHECK_RC(pthread_mutex_trylock(&m), EBUSY);
    }
    if (type == PTHREAD_MUTEX_RECURSIVE) CHECK_RC(pthread_mutex_unlock(&m), 0);
    CHECK_RC(on_other_thread(pthread_mutex_unlock, &m), checked ? EPERM : 0);
    if (checked) CHECK_RC(pthread_mutex_unlock(&m), 0);
    CHECK_RC(on_other_thread(trylock_unlock, &m), 0);
  }
  /* C11: glibc 2.36 makes a normal mutex of any type it does not know. */
  static const int types[] = {0, 1, 2, 3, 4, 5, 7, 77, -1};
  for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); ++i) {
    mtx_t m;
    if (mtx_init(&m, types[i]) != thrd_success) {
      SHIM_FAIL("mtx_init(%d) failed", types[i]);
      continue;
    }
    const int recursive = types[i] == 1 || types[i] == 3;
    CHECK(mtx_lock(&m) == thrd_success);
    CHECK(mtx_trylock(&m) == (recursive ? thrd_success : thrd_busy));
    if (recursive) CHECK(mtx_unlock(&m) == thrd_success);
    CHECK(mtx_unlock(&m) == thrd_success);
    mtx_destroy(&m);
  }
}

static void test_glibc_parity(void) {
  test_null_abstime_mutex();
  test_destroy_parity();
  test_kind_words();
}

/* ---- robust mutexes (glibc's) ------------------------------------------- */

static void init_robust(pthread_mutex_t* m, int kind) {
  pthread_mutexattr_t a;
  CHECK_RC(pthread_mutexattr_init(&a), 0);
  CHECK_RC(pthread_mutexattr_settype(&a, kind), 0);
  CHECK_RC(pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST), 0);
  CHECK_RC(pthread_mutex_init(m, &a), 0);
  CHECK_RC(pthread_mutexattr_destroy(&a), 0);
}

/* A robust mutex with a (private, parklot) condvar. */
struct robust_waiter {
  pthread_mutex_t* m;
  pthread_cond_t* c;
  int flag;
  int rc;
};
static void* robust_waiter_main(void* p) {
  struct robust_waiter* w = (struct robust_waiter*)p;
  CHECK_RC(pthread_mutex_lock(w->m), 0);
  w->rc = 0;
  while (!w->flag && w->rc == 0) w->rc = pthread_cond_wait(w->c, w->m);
  CHECK_RC(pthread_mutex_unlock(w->m), 0);
  return NULL;
}

static void test_robust(void) {
  pthread_mutex_t m;
  init_robust(&m, PTHREAD_MUTEX_NORMAL);
  CHECK_RC(pthread_mutex_lock(&m), 0);
  CHECK_RC(pthread_mutex_unlock(&m), 0);
  CHECK_RC(on_other_thread(pthread_mutex_unlock, &m), EPERM);

  /* The owner exits holding it: EOWNERDEAD, consistent, usable again. */
  struct holder h;
  holder_start(&h, &m, 1);
  holder_finish(&h);
  CHECK_RC(pthread_mutex_lock(&m), EOWNERDEAD);
  CHECK_RC(pthread_mutex_consistent(&m), 0);
  CHECK_RC(pthread_mutex_unlock(&m), 0);
  CHECK_RC(pthread_mutex_lock(&m), 0);
  CHECK_RC(pthread_mutex_unlock(&m), 0);
  /* Through trylock and timedlock too. */
  holder_start(&h, &m, 1);
  holder_finish(&h);
  CHECK_RC(pthread_mutex_trylock(&m), EOWNERDEAD);
  CHECK_RC(pthread_mutex_consistent(&m), 0);
  CHECK_RC(pthread_mutex_unlock(&m), 0);
  holder_start(&h, &m, 1);
  holder_finish(&h);
  struct timespec far = shim_deadline_ms(CLOCK_REALTIME, 10000);
  CHECK_RC(pthread_mutex_timedlock(&m, &far), EOWNERDEAD);
  CHECK_RC(pthread_mutex_consistent(&m), 0);
  CHECK_RC(pthread_mutex_unlock(&m), 0);
  /* Left inconsistent: unrecoverable. */
  holder_start(&h, &m, 1);
  holder_finish(&h);
  CHECK_RC(pthread_mutex_lock(&m), EOWNERDEAD);
  CHECK_RC(pthread_mutex_unlock(&m), 0);
  CHECK_RC(pthread_mutex_lock(&m), ENOTRECOVERABLE);
  CHECK_RC(pthread_mutex_destroy(&m), 0);

  /* A robust mutex the caller does not hold: waiting on a condvar with it
   * is EPERM at once (glibc's unlock in the wait checks the owner), not a
   * wait that ends holding the lock. */
  init_robust(&m, PTHREAD_MUTEX_NORMAL);
  {
    pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    CHECK_RC(cond_wait_on(&m), EPERM);
    struct timespec dl = shim_deadline_ms(CLOCK_MONOTONIC, 20);
    CHECK_RC(pthread_cond_clockwait(&c, &m, CLOCK_MONOTONIC, &dl), EPERM);
    holder_start(&h, &m, 0);
    CHECK_RC(cond_wait_on(&m), EPERM);
    holder_finish(&h);
    CHECK_RC(on_other_thread(trylock_unlock, &m), 0);  /* not taken by us */
  }
  CHECK_RC(pthread_mutex_destroy(&m), 0);

  /* Robust error-checking kind. */
  init_robust(&m, PTHREAD_MUTEX_ERRORCHECK);
  CHECK_RC(pthread_mutex_lock(&m), 0);
  CHECK_RC(pthread_mutex_lock(&m), EDEADLK);
  CHECK_RC(pthread_mutex_destroy(&m), 0);  /* glibc: robust, no EBUSY check */
  init_robust(&m, PTHREAD_MUTEX_ERRORCHECK);

  /* A robust mutex with a condvar: timeouts, handshakes. */
  pthread_cond_t c = PTHREAD_COND_INITIALIZER;
  CHECK_RC(pthread_mutex_lock(&m), 0);
  struct timespec dl = shim_deadline_ms(CLOCK_REALTIME, 30);
  CHECK_RC(pthread_cond_timedwait(&c, &m, &dl), ETIMEDOUT);
  check_timeout_not_early(CLOCK_REALTIME, &dl, "timedwait on a robust mutex");
  CHECK_RC(pthread_mutex_unlock(&m), 0);  /* held again after the wait */
  for (int round = 0; round < 20; ++round) {
    struct robust_waiter w = {&m, &c, 0, -1};
    pthread_t t = shim_spawn(robust_waiter_main, &w);
    if (round & 1) shim_sleep_ms(2);
    CHECK_RC(pthread_mutex_lock(&m), 0);
    w.flag = 1;
    CHECK_RC((round & 2) ? pthread_cond_broadcast(&c) : pthread_cond_signal(&c), 0);
    CHECK_RC(pthread_mutex_unlock(&m), 0);
    pthread_join(t, NULL);
    CHECK_RC(w.rc, 0);
  }
  /* The owner dies while we wait on the condvar: re-acquiring the mutex
   * in the wait reports EOWNERDEAD (glibc returns the relock's error). */
  CHECK_RC(pthread_mutex_lock(&m), 0);
  struct holder h2 = {0};
  h2.m = &m;
  h2.exit_without_unlock = 1;
  sem_init(&h2.locked, 0, 0);
  sem_init(&h2.release, 0, 0);
  h2.thread = shim_spawn(holder_main, &h2);  /* blocks until we wait */
  dl = shim_deadline_ms(CLOCK_REALTIME, 200);
  int rc;
  do {
    rc = pthread_cond_timedwait(&c, &m, &dl);
  } while (rc == 0);
  CHECK_RC(rc, EOWNERDEAD);
  pthread_join(h2.thread, NULL);
  sem_destroy(&h2.locked);
  sem_destroy(&h2.release);
  if (rc == EOWNERDEAD) CHECK_RC(pthread_mutex_consistent(&m), 0);
  CHECK_RC(pthread_mutex_unlock(&m), 0);
  CHECK_RC(pthread_cond_destroy(&c), 0);
  CHECK_RC(pthread_mutex_destroy(&m), 0);
}

/* ---- process-shared mutex and condvar across fork() --------------------- */

struct shared_page {
  pthread_mutex_t m;
  pthread_mutex_t em;  /* pshared error-checking */
  pthread_cond_t c;
  int turn;            /* 0: parent's, 1: child's */
  long counter;
  int ready;
};

static int ping_pong(struct shared_page* s, int me, int rounds) {
  int errors = 0;
  for (int i = 0; i < rounds; ++i) {
    if (pthread_mutex_lock(&s->m) != 0) ++errors;
    while (s->turn != me) {
      struct timespec dl = shim_deadline_ms(CLOCK_REALTIME, 20000);
      int rc = pthread_cond_timedwait(&s->c, &s->m, &dl);
      if (rc != 0) {
        fprintf(stderr, "ping_pong(%d): timedwait %d (%s)\n", me, rc,
                shim_errname(rc));
        ++errors;
        break;
      }
    }
    ++s->counter;
    s->turn = !me;
    if (pthread_cond_broadcast(&s->c) != 0) ++errors;
    if (pthread_mutex_unlock(&s->m) != 0) ++errors;
  }
  return errors;
}

static void test_pshared(void) {
  struct shared_page* s = (struct shared_page*)mmap(
      NULL, sizeof(*s), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
      -1, 0);
  if (s == MAP_FAILED) FATAL("mmap: %s", strerror(errno));
  pthread_mutexattr_t ma;
  pthread_condattr_t ca;
  CHECK_RC(pthread_mutexattr_init(&ma), 0);
  CHECK_RC(pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED), 0);
  CHECK_RC(pthread_mutex_init(&s->m, &ma), 0);
  CHECK_RC(pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK), 0);
  CHECK_RC(pthread_mutex_init(&s->em, &ma), 0);
  CHECK_RC(pthread_mutexattr_destroy(&ma), 0);
  CHECK_RC(pthread_condattr_init(&ca), 0);
  CHECK_RC(pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED), 0);
  CHECK_RC(pthread_condattr_setclock(&ca, CLOCK_MONOTONIC), 0);
  CHECK_RC(pthread_condattr_setclock(&ca, CLOCK_REALTIME), 0);
  CHECK_RC(pthread_cond_init(&s->c, &ca), 0);
  CHECK_RC(pthread_condattr_destroy(&ca), 0);

  /* In-process first: timeouts and errors on the shared objects. */
  CHECK_RC(pthread_mutex_lock(&s->m), 0);
  struct timespec dl = shim_deadline_ms(CLOCK_REALTIME, 30);
  CHECK_RC(pthread_cond_timedwait(&s->c, &s->m, &dl), ETIMEDOUT);
  check_timeout_not_early(CLOCK_REALTIME, &dl, "pshared timedwait");
  CHECK_RC(on_other_thread(trylock_unlock, &s->m), EBUSY);
  CHECK_RC(pthread_mutex_unlock(&s->m), 0);
  CHECK_RC(pthread_mutex_lock(&s->em), 0);
  CHECK_RC(pthread_mutex_lock(&s->em), EDEADLK);
  CHECK_RC(pthread_mutex_destroy(&s->em), EBUSY);
  CHECK_RC(on_other_thread(pthread_mutex_unlock, &s->em), EPERM);
  CHECK_RC(on_other_thread(cond_wait_on, &s->em), EPERM);  /* not its owner */

  /* Across fork(): the parent holds `em`; the child sees it held, then
   * both ping-pong on (m, c). */
  enum { kRounds = 2000 };
  fflush(NULL);
  const pid_t pid = fork();
  if (pid < 0) FATAL("fork: %s", strerror(errno));
  if (pid == 0) {
    shim_test_watchdog(60);
    int errors = 0;
    if (pthread_mutex_trylock(&s->em) != EBUSY) ++errors;
    errors += ping_pong(s, 1, kRounds);
    fflush(NULL);
    _exit(errors == 0 ? 0 : 1);
  }
  const int errors = ping_pong(s, 0, kRounds);
  CHECK(errors == 0);
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(s->counter == 2 * kRounds);
  CHECK_RC(pthread_mutex_unlock(&s->em), 0);
  CHECK_RC(pthread_mutex_destroy(&s->em), 0);
  CHECK_RC(pthread_cond_destroy(&s->c), 0);
  CHECK_RC(pthread_mutex_destroy(&s->m), 0);

  /* A process-shared mutex with a private condvar, between threads. */
  pthread_mutexattr_t pa;
  pthread_mutex_t pm;
  pthread_cond_t pc = PTHREAD_COND_INITIALIZER;
  CHECK_RC(pthread_mutexattr_init(&pa), 0);
  CHECK_RC(pthread_mutexattr_setpshared(&pa, PTHREAD_PROCESS_SHARED), 0);
  CHECK_RC(pthread_mutex_init(&pm, &pa), 0);
  CHECK_RC(pthread_mutexattr_destroy(&pa), 0);
  check_handshake(&pc, &pm, CLOCK_REALTIME, "pshared mutex, private cond");
  CHECK_RC(pthread_mutex_destroy(&pm), 0);
  munmap(s, sizeof(*s));
}

/* ---- a process-shared condvar with private mutexes ---------------------- */

/* glibc's condvar code re-takes the mutex with its own lock protocol, so
 * the shim must not let it touch a mutex the shim runs. Three threads take
 * turns in order (each wait ends by the right broadcast only), with other
 * threads hammering the same mutex. */
struct turns {
  pthread_mutex_t* m;
  pthread_cond_t* c;
  int turn;
  int me;
  long count;
  int errors;
};
static struct turns g_turns;
enum { kTurnThreads = 3, kTurnRounds = 3000 };

static void* turn_taker(void* arg) {
  const int me = (int)(intptr_t)arg;
  struct turns* t = &g_turns;
  for (int i = 0; i < kTurnRounds; ++i) {
    CHECK_RC(pthread_mutex_lock(t->m), 0);
    while (t->turn != me) {
      struct timespec dl = shim_deadline_ms(CLOCK_REALTIME, 20000);
      const int rc = (i & 1) ? pthread_cond_timedwait(t->c, t->m, &dl)
                             : pthread_cond_wait(t->c, t->m);
      if (rc != 0) {
        SHIM_FAIL("turn %d: wait returned %d (%s)", me, rc, shim_errname(rc));
        break;
      }
    }
    ++t->count;
    t->turn = (me + 1) % kTurnThreads;
    CHECK_RC(pthread_cond_broadcast(t->c), 0);
    CHECK_RC(pthread_mutex_unlock(t->m), 0);
  }
  return NULL;
}

static volatile int g_noise_stop;
static void* noise_locker(void* arg) {
  pthread_mutex_t* m = (pthread_mutex_t*)arg;
  while (!g_noise_stop) {
    CHECK_RC(pthread_mutex_lock(m), 0);
    CHECK_RC(pthread_mutex_unlock(m), 0);
  }
  return NULL;
}

static void test_pshared_cond_private_mutex(void) {
  static const int kinds[] = {PTHREAD_MUTEX_NORMAL, PTHREAD_MUTEX_ERRORCHECK,
                              PTHREAD_MUTEX_RECURSIVE};
  pthread_condattr_t ca;
  CHECK_RC(pthread_condattr_init(&ca), 0);
  CHECK_RC(pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED), 0);
  for (size_t k = 0; k < 3; ++k) {
    pthread_mutex_t m;
    pthread_cond_t c;
    init_kind(&m, kinds[k]);
    CHECK_RC(pthread_condattr_setclock(&ca, k == 1 ? CLOCK_MONOTONIC : CLOCK_REALTIME), 0);
    CHECK_RC(pthread_cond_init(&c, &ca), 0);
    /* Timeouts, bad arguments, not held. */
    CHECK_RC(pthread_mutex_lock(&m), 0);
    struct timespec dl = shim_deadline_ms(k == 1 ? CLOCK_MONOTONIC : CLOCK_REALTIME, 30);
    CHECK_RC(pthread_cond_timedwait(&c, &m, &dl), ETIMEDOUT);
    CHECK_RC(on_other_thread(trylock_unlock, &m), EBUSY);  /* held again */
    dl = shim_deadline_ms(CLOCK_MONOTONIC, 10000);
    CHECK_RC(pthread_cond_clockwait(&c, &m, CLOCK_PROCESS_CPUTIME_ID, &dl), EINVAL);
    struct timespec bad = {time(NULL) + 10, 1000000000};
    CHECK_RC(pthread_cond_timedwait(&c, &m, &bad), EINVAL);
    CHECK_RC(on_other_thread(trylock_unlock, &m), EBUSY);
    CHECK_RC(pthread_mutex_unlock(&m), 0);
    if (kinds[k] != PTHREAD_MUTEX_NORMAL) CHECK_RC(cond_wait_on_cond(&c, &m), EPERM);

    memset(&g_turns, 0, sizeof(g_turns));
    g_turns.m = &m;
    g_turns.c = &c;
    g_noise_stop = 0;
    pthread_t t[kTurnThreads], noise[2];
    for (int i = 0; i < 2; ++i) noise[i] = shim_spawn(noise_locker, &m);
    for (int i = 0; i < kTurnThreads; ++i) t[i] = shim_spawn(turn_taker, (void*)(intptr_t)i);
    for (int i = 0; i < kTurnThreads; ++i) pthread_join(t[i], NULL);
    g_noise_stop = 1;
    for (int i = 0; i < 2; ++i) pthread_join(noise[i], NULL);
    if (g_turns.count != (long)kTurnThreads * kTurnRounds) {
      SHIM_FAIL("pshared cond, mutex kind %d: %ld turns, want %d", kinds[k],
                g_turns.count, kTurnThreads * kTurnRounds);
    }
    check_handshake(&c, &m, k == 1 ? CLOCK_MONOTONIC : CLOCK_REALTIME,
                    "pshared cond, private mutex");
    CHECK_RC(pthread_cond_destroy(&c), 0);
    CHECK_RC(pthread_mutex_destroy(&m), 0);
  }
  CHECK_RC(pthread_condattr_destroy(&ca), 0);
}

int main(void) {
  shim_test_start("semantics", 90);
  test_static_initializers();
  test_attr_kinds();
  test_destroy();
  test_timedlock(PTHREAD_MUTEX_NORMAL);
  test_timedlock(PTHREAD_MUTEX_RECURSIVE);
  test_timedlock(PTHREAD_MUTEX_ERRORCHECK);
  test_timedlock(PTHREAD_MUTEX_ADAPTIVE_NP);
  test_cond();
  test_c11();
  test_glibc_parity();
  test_robust();
  test_pshared();
  test_pshared_cond_private_mutex();
  return shim_test_finish();
}
