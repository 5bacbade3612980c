/* Thread cancellation and condition variables under the shim. Compiled as
 * C (cancel_prog.c: pthread_cleanup_push is glibc's setjmp-based cleanup
 * buffer) and as C++ (cancel_prog_cxx.cc: a cleanup object whose destructor
 * runs during the forced unwind), so it sticks to the common subset.
 *
 * POSIX: pthread_cond_wait/timedwait are cancellation points; a waiter
 * acting on a cancellation re-acquires the mutex before the first cleanup
 * handler runs, and does not consume a signal meant for another waiter.
 * pthread_mutex_lock is no cancellation point (neither is re-taking the
 * mutex at the end of a wait). The mutexes here are error-checking, so a
 * cleanup handler's pthread_mutex_unlock returns 0 only if the cancelled
 * thread really holds the mutex. */
#ifndef PARKLOT_TESTS_PRELOAD_CANCEL_BODY_H_
#define PARKLOT_TESTS_PRELOAD_CANCEL_BODY_H_

#include "tests/preload/shim_test_util.h"

enum WaitKind {
  kWait,
  kTimedRealtime,
  kTimedMonotonicCond,
  kClockMonotonic,
  kPsharedCond,  /* glibc's process-shared condvar with the shim's mutex */
  kWaitKinds
};

static pthread_mutex_t g_m;        /* error-checking */
static pthread_cond_t g_c;         /* CLOCK_REALTIME */
static pthread_cond_t g_c_mono;    /* CLOCK_MONOTONIC */
static pthread_cond_t g_c_pshared; /* PTHREAD_PROCESS_SHARED */

/* What a cleanup handler saw. */
struct cleanup_record {
  int ran;
  int unlock_rc;
};

static void unlock_in_cleanup(void* arg) {
  struct cleanup_record* r = (struct cleanup_record*)arg;
  r->unlock_rc = pthread_mutex_unlock(&g_m);
  __atomic_store_n(&r->ran, 1, __ATOMIC_RELEASE);
}

static int wait_once(enum WaitKind kind, int64_t timeout_ms) {
  struct timespec dl;
  switch (kind) {
    case kWait:
      return pthread_cond_wait(&g_c, &g_m);
    case kTimedRealtime:
      dl = shim_deadline_ms(CLOCK_REALTIME, timeout_ms);
      return pthread_cond_timedwait(&g_c, &g_m, &dl);
    case kTimedMonotonicCond:
      dl = shim_deadline_ms(CLOCK_MONOTONIC, timeout_ms);
      return pthread_cond_timedwait(&g_c_mono, &g_m, &dl);
    case kPsharedCond:
      dl = shim_deadline_ms(CLOCK_REALTIME, timeout_ms);
      return pthread_cond_timedwait(&g_c_pshared, &g_m, &dl);
    default:
      dl = shim_deadline_ms(CLOCK_MONOTONIC, timeout_ms);
      return pthread_cond_clockwait(&g_c, &g_m, CLOCK_MONOTONIC, &dl);
  }
}

static pthread_cond_t* cond_of(enum WaitKind kind) {
  if (kind == kPsharedCond) return &g_c_pshared;
  return kind == kTimedMonotonicCond ? &g_c_mono : &g_c;
}

static int wait_until_waiting(const int* waiting, int n) {
  for (int i = 0; i < 20000; ++i) {
    CHECK_RC(pthread_mutex_lock(&g_m), 0);
    const int w = *waiting;
    CHECK_RC(pthread_mutex_unlock(&g_m), 0);
    if (w >= n) return 1;
    shim_sleep_us(200);
  }
  SHIM_FAIL("waiters never started waiting");
  return 0;
}

/* Joins `t` within `ms`; returns 0 (and its result) or ETIMEDOUT. */
static int join_within(pthread_t t, int64_t ms, void** res) {
  struct timespec dl = shim_deadline_ms(CLOCK_REALTIME, ms);
  return pthread_timedjoin_np(t, res, &dl);
}

/* A short busy delay, to vary how two operations race. */
static void spin_for(uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) __asm__ __volatile__("" ::: "memory");
}

/* ---- A, B: one waiter, cancelled ----------------------------------------- */

struct waiter_arg {
  enum WaitKind kind;
  struct cleanup_record rec;
  int waiting;
  int flag;
  int wait_rc;
};

static void* cancellable_waiter(void* p) {
  struct waiter_arg* a = (struct waiter_arg*)p;
  CHECK_RC(pthread_mutex_lock(&g_m), 0);
  pthread_cleanup_push(unlock_in_cleanup, &a->rec);
  a->waiting = 1;
  while (!a->flag) {
    a->wait_rc = wait_once(a->kind, 60000);
    if (a->wait_rc != 0) break;
  }
  pthread_cleanup_pop(0);
  CHECK_RC(pthread_mutex_unlock(&g_m), 0);
  return NULL;
}

/* mode 0: cancel with the mutex free; 1: cancel while the main thread
 * holds the mutex (the waiter must wait for it before its cleanup);
 * 2: signal (mutex free), take the mutex at once, cancel while the woken
 * waiter is blocked re-taking the mutex. */
static void cancel_one(enum WaitKind kind, int mode, int iteration) {
  struct waiter_arg a;
  memset(&a, 0, sizeof(a));
  a.kind = kind;
  a.rec.unlock_rc = -1;
  pthread_t t = shim_spawn(cancellable_waiter, &a);
  if (!wait_until_waiting(&a.waiting, 1)) return;
  if (mode == 2) CHECK_RC(pthread_cond_signal(cond_of(kind)), 0);
  if (mode >= 1) CHECK_RC(pthread_mutex_lock(&g_m), 0);
  if (mode == 2) shim_sleep_us(500 + 100 * (iteration % 20));
  CHECK_RC(pthread_cancel(t), 0);
  if (mode >= 1) {
    shim_sleep_us(300 + 100 * (iteration % 30));
    /* The waiter cannot have run its cleanup: we hold its mutex. */
    if (__atomic_load_n(&a.rec.ran, __ATOMIC_ACQUIRE)) {
      SHIM_FAIL("kind %d mode %d: cleanup ran while another thread held the "
                "mutex (unlock there returned %d)", kind, mode, a.rec.unlock_rc);
    }
    CHECK_RC(pthread_mutex_unlock(&g_m), 0);
  }
  void* res = NULL;
  if (join_within(t, 30000, &res) != 0) FATAL("cancelled waiter did not end");
  if (res != PTHREAD_CANCELED) {
    SHIM_FAIL("kind %d mode %d: join gave %p, not PTHREAD_CANCELED (wait rc %d)",
              kind, mode, res, a.wait_rc);
  }
  if (!a.rec.ran) SHIM_FAIL("kind %d mode %d: cleanup handler did not run", kind, mode);
  if (a.rec.unlock_rc != 0) {
    SHIM_FAIL("kind %d mode %d: pthread_mutex_unlock in the cleanup handler "
              "returned %d (%s): the mutex was not re-acquired", kind, mode,
              a.rec.unlock_rc, shim_errname(a.rec.unlock_rc));
  }
}

/* ---- C: a cancelled waiter does not consume another's signal ------------ */

struct pair_state {
  int waiting;
  int w1_go;  /* never set: W1 leaves only by cancellation or a wake-up */
  int w2_go;
  int w1_woke;
  int w2_done;
  enum WaitKind kind;
  struct cleanup_record rec;
};

static void* w1_main(void* p) {
  struct pair_state* s = (struct pair_state*)p;
  CHECK_RC(pthread_mutex_lock(&g_m), 0);
  pthread_cleanup_push(unlock_in_cleanup, &s->rec);
  ++s->waiting;
  while (!s->w1_go) {
    const int rc = wait_once(s->kind, 60000);
    if (rc != 0) SHIM_FAIL("W1 wait returned %d", rc);
    /* Woken by the signal (or spuriously): it took the signal for itself,
     * legitimately; the main thread then signals again for W2. */
    s->w1_woke = 1;
    break;
  }
  pthread_cleanup_pop(0);
  CHECK_RC(pthread_mutex_unlock(&g_m), 0);
  return NULL;
}

static void* w2_main(void* p) {
  struct pair_state* s = (struct pair_state*)p;
  CHECK_RC(pthread_mutex_lock(&g_m), 0);
  ++s->waiting;
  while (!s->w2_go) {
    const int rc = wait_once(s->kind, 60000);
    if (rc != 0) {
      SHIM_FAIL("W2 wait returned %d", rc);
      break;
    }
  }
  s->w2_done = 1;
  CHECK_RC(pthread_mutex_unlock(&g_m), 0);
  return NULL;
}

static int g_consumed_passed_on;  /* W1 cancelled: W2 woke by the one signal */
static int g_w1_took_signal;      /* W1 woke instead */

static void cancel_racing_signal(int iteration, uint32_t* rng) {
  struct pair_state s;
  memset(&s, 0, sizeof(s));
  s.kind = (enum WaitKind)(iteration % kWaitKinds);
  s.rec.unlock_rc = -1;
  pthread_cond_t* c = cond_of(s.kind);
  pthread_t w1 = shim_spawn(w1_main, &s);
  if (!wait_until_waiting(&s.waiting, 1)) return;  /* W1 queued first */
  pthread_t w2 = shim_spawn(w2_main, &s);
  if (!wait_until_waiting(&s.waiting, 2)) return;
  const uint32_t spin = shim_rand(rng) % 2000;
  switch (iteration % 4) {
    case 0:  /* signal, then cancel, mutex held throughout */
      CHECK_RC(pthread_mutex_lock(&g_m), 0);
      s.w2_go = 1;
      CHECK_RC(pthread_cond_signal(c), 0);
      CHECK_RC(pthread_cancel(w1), 0);
      CHECK_RC(pthread_mutex_unlock(&g_m), 0);
      break;
    case 1:  /* cancel, then signal, mutex held throughout */
      CHECK_RC(pthread_mutex_lock(&g_m), 0);
      s.w2_go = 1;
      CHECK_RC(pthread_cancel(w1), 0);
      spin_for(spin);
      CHECK_RC(pthread_cond_signal(c), 0);
      CHECK_RC(pthread_mutex_unlock(&g_m), 0);
      break;
    case 2:  /* signal after unlocking, cancel racing it */
      CHECK_RC(pthread_mutex_lock(&g_m), 0);
      s.w2_go = 1;
      CHECK_RC(pthread_mutex_unlock(&g_m), 0);
      CHECK_RC(pthread_cond_signal(c), 0);
      spin_for(spin);
      CHECK_RC(pthread_cancel(w1), 0);
      break;
    default:  /* cancel first, then signal without the mutex */
      CHECK_RC(pthread_mutex_lock(&g_m), 0);
      s.w2_go = 1;
      CHECK_RC(pthread_mutex_unlock(&g_m), 0);
      CHECK_RC(pthread_cancel(w1), 0);
      spin_for(spin);
      CHECK_RC(pthread_cond_signal(c), 0);
      break;
  }
  void* res = NULL;
  if (join_within(w1, 30000, &res) != 0) FATAL("W1 did not end");
  /* Whether W1 returned from its wait decides, not its join result: a
   * thread that returned from the wait normally can still be joined as
   * PTHREAD_CANCELED (glibc's SIGCANCEL handler stores PTHREAD_CANCELED as
   * the result when the signal, sent while the thread slept in
   * asynchronous mode, arrives after the thread went back to deferred
   * mode and finished; it then does not unwind). */
  if (!s.w1_woke) {
    if (res != PTHREAD_CANCELED) SHIM_FAIL("iteration %d: W1 neither woke nor was cancelled", iteration);
    if (s.rec.unlock_rc != 0) {
      SHIM_FAIL("iteration %d: W1's cleanup unlock returned %d (%s), cleanup "
                "ran %d, W1 woke %d", iteration, s.rec.unlock_rc,
                shim_errname(s.rec.unlock_rc), s.rec.ran, s.w1_woke);
    }
    /* The one signal must reach W2 (generous bound). */
    if (join_within(w2, 5000, NULL) != 0) {
      SHIM_FAIL("iteration %d (case %d, kind %d): W2 not woken within 5 s: the "
                "cancelled waiter consumed its signal", iteration, iteration % 4,
                s.kind);
      CHECK_RC(pthread_cond_broadcast(c), 0);
      if (join_within(w2, 30000, NULL) != 0) FATAL("W2 did not end");
    } else {
      ++g_consumed_passed_on;
    }
  } else {
    ++g_w1_took_signal;
    CHECK_RC(pthread_cond_signal(c), 0);
    if (join_within(w2, 30000, NULL) != 0) FATAL("W2 did not end");
  }
  CHECK(s.w2_done);
}

/* ---- D: cancellation disabled during the wait ---------------------------- */

struct disabled_arg {
  int waiting, flag, wait_rc, returned;
};

static void* disabled_waiter(void* p) {
  struct disabled_arg* a = (struct disabled_arg*)p;
  int old;
  CHECK_RC(pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old), 0);
  CHECK_RC(pthread_mutex_lock(&g_m), 0);
  a->waiting = 1;
  while (!a->flag && a->wait_rc == 0) a->wait_rc = pthread_cond_wait(&g_c, &g_m);
  a->returned = 1;
  CHECK_RC(pthread_mutex_unlock(&g_m), 0);
  CHECK_RC(pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old), 0);
  pthread_testcancel();
  SHIM_FAIL("pending cancellation not acted on by pthread_testcancel");
  return NULL;
}

static void cancel_disabled(void) {
  struct disabled_arg a;
  memset(&a, 0, sizeof(a));
  pthread_t t = shim_spawn(disabled_waiter, &a);
  if (!wait_until_waiting(&a.waiting, 1)) return;
  CHECK_RC(pthread_cancel(t), 0);
  shim_sleep_ms(20);
  CHECK_RC(pthread_mutex_lock(&g_m), 0);
  CHECK(!a.returned);  /* still waiting: the cancel is pending */
  a.flag = 1;
  CHECK_RC(pthread_cond_signal(&g_c), 0);
  CHECK_RC(pthread_mutex_unlock(&g_m), 0);
  void* res = NULL;
  if (join_within(t, 30000, &res) != 0) FATAL("disabled waiter did not end");
  CHECK(res == PTHREAD_CANCELED);
  CHECK(a.returned);
  CHECK_RC(a.wait_rc, 0);
}

/* ---- E: pthread_mutex_lock is no cancellation point ---------------------- */

struct locker_arg {
  int lock_rc, got;
};

static void* blocked_locker(void* p) {
  struct locker_arg* a = (struct locker_arg*)p;
  a->lock_rc = pthread_mutex_lock(&g_m);
  a->got = 1;
  CHECK_RC(pthread_mutex_unlock(&g_m), 0);
  pthread_testcancel();
  return NULL;
}

static void cancel_blocked_locker(void) {
  struct locker_arg a;
  memset(&a, 0, sizeof(a));
  a.lock_rc = -1;
  CHECK_RC(pthread_mutex_lock(&g_m), 0);
  pthread_t t = shim_spawn(blocked_locker, &a);
  shim_sleep_ms(10);
  CHECK_RC(pthread_cancel(t), 0);
  shim_sleep_ms(10);
  CHECK_RC(pthread_tryjoin_np(t, NULL), EBUSY);  /* still blocked */
  CHECK_RC(pthread_mutex_unlock(&g_m), 0);
  void* res = NULL;
  if (join_within(t, 30000, &res) != 0) FATAL("blocked locker did not end");
  CHECK(res == PTHREAD_CANCELED);
  CHECK(a.got);
  CHECK_RC(a.lock_rc, 0);
}

/* ---- G: cancellation racing a timeout ------------------------------------ */

struct race_arg {
  struct cleanup_record rec;
  int wait_rc;
  int waiting;
};

static void* timing_out_waiter(void* p) {
  struct race_arg* a = (struct race_arg*)p;
  CHECK_RC(pthread_mutex_lock(&g_m), 0);
  a->waiting = 1;
  pthread_cleanup_push(unlock_in_cleanup, &a->rec);
  a->wait_rc = wait_once(kTimedRealtime, 2);
  pthread_cleanup_pop(0);
  CHECK_RC(pthread_mutex_unlock(&g_m), 0);
  for (;;) {  /* timed out first: the cancellation comes here */
    pthread_testcancel();
    shim_sleep_us(100);
  }
  return NULL;
}

static void cancel_racing_timeout(uint32_t* rng) {
  struct race_arg a;
  memset(&a, 0, sizeof(a));
  a.wait_rc = -1;
  a.rec.unlock_rc = -1;
  pthread_t t = shim_spawn(timing_out_waiter, &a);
  shim_sleep_us(shim_rand(rng) % 3000);
  CHECK_RC(pthread_cancel(t), 0);
  void* res = NULL;
  if (join_within(t, 30000, &res) != 0) FATAL("timing-out waiter did not end");
  CHECK(res == PTHREAD_CANCELED);
  if (a.rec.ran) {
    CHECK_RC(a.rec.unlock_rc, 0);
  } else if (a.waiting) {
    CHECK(a.wait_rc == ETIMEDOUT);
  }
}

/* ---- F: the condvar still works ----------------------------------------- */

static void check_still_works(void) {
  for (int k = 0; k < kWaitKinds; ++k) {
    struct waiter_arg a;
    memset(&a, 0, sizeof(a));
    a.kind = (enum WaitKind)k;
    pthread_t t = shim_spawn(cancellable_waiter, &a);
    if (!wait_until_waiting(&a.waiting, 1)) return;
    CHECK_RC(pthread_mutex_lock(&g_m), 0);
    a.flag = 1;
    CHECK_RC(pthread_cond_signal(cond_of(a.kind)), 0);
    CHECK_RC(pthread_mutex_unlock(&g_m), 0);
    void* res = NULL;
    if (join_within(t, 10000, &res) != 0) {
      SHIM_FAIL("kind %d: a signalled waiter did not wake after the cancellations", k);
      continue;
    }
    CHECK(res == NULL);
    CHECK_RC(a.wait_rc, 0);
  }
}

static int cancel_main(const char* name, int argc, char** argv) {
  shim_test_start(name, 110);
  const int iterations = argc > 1 ? atoi(argv[1]) : 300;
  pthread_mutexattr_t ma;
  CHECK_RC(pthread_mutexattr_init(&ma), 0);
  CHECK_RC(pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK), 0);
  CHECK_RC(pthread_mutex_init(&g_m, &ma), 0);
  CHECK_RC(pthread_mutexattr_destroy(&ma), 0);
  CHECK_RC(pthread_cond_init(&g_c, NULL), 0);
  pthread_condattr_t ca;
  CHECK_RC(pthread_condattr_init(&ca), 0);
  CHECK_RC(pthread_condattr_setclock(&ca, CLOCK_MONOTONIC), 0);
  CHECK_RC(pthread_cond_init(&g_c_mono, &ca), 0);
  CHECK_RC(pthread_condattr_destroy(&ca), 0);
  CHECK_RC(pthread_condattr_init(&ca), 0);
  CHECK_RC(pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED), 0);
  CHECK_RC(pthread_cond_init(&g_c_pshared, &ca), 0);
  CHECK_RC(pthread_condattr_destroy(&ca), 0);
  uint32_t rng = 0xC0FFEEu;

  /* Mode 2 hits its window (the woken waiter parked re-taking the mutex)
   * only when the waiter wakes after the main thread took the mutex: more
   * rounds of it. */
  for (int i = 0; i < 100; ++i) {
    for (int k = 0; k < kWaitKinds; ++k) {
      for (int mode = i < 20 ? 0 : 2; mode < 3; ++mode) {
        cancel_one((enum WaitKind)k, mode, i);
      }
    }
  }
  for (int i = 0; i < iterations; ++i) cancel_racing_signal(i, &rng);
  cancel_disabled();
  cancel_blocked_locker();
  for (int i = 0; i < 100; ++i) cancel_racing_timeout(&rng);
  check_still_works();
  printf("%s: %d signal/cancel races: W1 cancelled and W2 woken by the same "
         "signal %d times, W1 took the signal %d times\n",
         name, iterations, g_consumed_passed_on, g_w1_took_signal);
  CHECK_RC(pthread_cond_destroy(&g_c), 0);
  CHECK_RC(pthread_cond_destroy(&g_c_mono), 0);
  CHECK_RC(pthread_cond_destroy(&g_c_pshared), 0);
  CHECK_RC(pthread_mutex_destroy(&g_m), 0);
  return shim_test_finish();
}

#endif  /* PARKLOT_TESTS_PRELOAD_CANCEL_BODY_H_ */
