/* Every way out of a condvar wait leaves the mutex exactly as glibc's wait
 * does, for every mutex kind and recursion depth.
 *
 * A waiter locks the mutex `depth` times (depth > 1 only for the recursive
 * kind) and waits on a condvar; it leaves the wait by thread cancellation
 * (with the mutex free or held by another thread when the cancel comes),
 * by a timeout, by a notification, or after a signal handler interrupted
 * the wait (it returns 0, never EINTR). Then, in the cancellation's cleanup handler or
 * after the wait returned, the waiter checks what glibc gives: the mutex
 * held by it, `depth` unlocks that each succeed and the last of which
 * releases it (another thread's trylock says EBUSY until then), EPERM for
 * one more unlock where the kind checks the owner, and another thread able
 * to lock it afterwards.
 *
 * glibc's unlock inside the wait releases one level of a recursive mutex:
 * held more than once it stays held through the wait (another thread's
 * trylock is EBUSY). Held once, it is released, and the main thread locks
 * and unlocks it during the wait (which reset the shim's recursion count
 * before the fix: tests the count is restored on every way out).
 *
 * Mutexes: the shim's own (private), glibc's robust and process-shared ones
 * (the shim waits on its condvar with glibc's unlock and lock). Condvars:
 * pthread_cond_wait, timedwait (CLOCK_REALTIME), clockwait
 * (CLOCK_MONOTONIC), and a process-shared condvar (glibc's, waited on
 * through the shim's stand-in mutex). Run with --glibc-too: every
 * expectation is glibc's own. */
#include "tests/preload/shim_test_util.h"

enum Kind { kNormal, kAdaptive, kErrorcheck, kRecursive1, kRecursive2,
            kRecursive3, kKinds };
static const char* const kKindName[] = {"normal", "adaptive", "errorcheck",
                                        "recursive depth 1",
                                        "recursive depth 2",
                                        "recursive depth 3"};
enum Flavour { kPrivate, kRobust, kPshared, kFlavours };
static const char* const kFlavourName[] = {"private", "robust", "pshared"};
enum How { kWait, kTimedwait, kClockwait, kPsharedCond, kHows };
static const char* const kHowName[] = {"cond_wait", "cond_timedwait",
                                       "cond_clockwait", "pshared cond"};
enum Exit { kCancel, kCancelWhileHeld, kTimeout, kNotify, kInterrupt, kExits };
static const char* const kExitName[] = {"cancel", "cancel while held",
                                        "timeout", "notify", "interrupt"};

struct wait_case {
  pthread_mutex_t m;
  pthread_cond_t c;
  enum Kind kind;
  enum Flavour flavour;
  enum How how;
  enum Exit exit;
  int type;
  int depth;
  int waiting;      /* set by the waiter just before it waits */
  int checked;      /* the waiter ran verify() */
  int wait_rc;
};

static void describe(const struct wait_case* k, char* buf, size_t n) {
  snprintf(buf, n, "%s %s mutex, %s, %s", kFlavourName[k->flavour],
           kKindName[k->kind], kHowName[k->how], kExitName[k->exit]);
}

#define CASE_CHECK_RC(k, expr, want)                                       \
  do {                                                                     \
    const int rc_ = (expr);                                                \
    if (rc_ != (want)) {                                                   \
      char what_[160];                                                     \
      describe((k), what_, sizeof(what_));                                 \
      SHIM_FAIL("%s: %s returned %d (%s), want %s", what_, #expr, rc_,    \
                shim_errname(rc_), shim_errname(want));                    \
    }                                                                      \
  } while (0)

/* Another thread's pthread_mutex_trylock (released again if it got it). */
static void* trylock_main(void* p) {
  pthread_mutex_t* m = (pthread_mutex_t*)p;
  const int rc = pthread_mutex_trylock(m);
  if (rc == 0 && pthread_mutex_unlock(m) != 0) return (void*)(intptr_t)-1;
  return (void*)(intptr_t)rc;
}
static int other_trylock(pthread_mutex_t* m) {
  void* res = NULL;
  pthread_join(shim_spawn(trylock_main, m), &res);
  return (int)(intptr_t)res;
}

/* Whether an unlock by a thread that does not hold the mutex is EPERM. */
static int unlock_checks_owner(const struct wait_case* k) {
  return k->type != PTHREAD_MUTEX_NORMAL &&
                 k->type != PTHREAD_MUTEX_ADAPTIVE_NP
             ? 1
             : k->flavour == kRobust;
}

/* On the waiter, after the wait (in the cleanup handler if cancelled): the
 * mutex is held `depth` times by this thread, as glibc re-takes it. */
static void verify(struct wait_case* k) {
  CASE_CHECK_RC(k, other_trylock(&k->m), EBUSY);
  if (k->type == PTHREAD_MUTEX_ERRORCHECK) {
    CASE_CHECK_RC(k, pthread_mutex_lock(&k->m), EDEADLK);
  }
  for (int i = 0; i < k->depth; ++i) {
    CASE_CHECK_RC(k, pthread_mutex_unlock(&k->m), 0);
    if (i + 1 < k->depth) CASE_CHECK_RC(k, other_trylock(&k->m), EBUSY);
  }
  if (unlock_checks_owner(k)) CASE_CHECK_RC(k, pthread_mutex_unlock(&k->m), EPERM);
  CASE_CHECK_RC(k, other_trylock(&k->m), 0);
  __atomic_store_n(&k->checked, 1, __ATOMIC_RELEASE);
}

static void cleanup(void* p) {
  int old;
  /* Its own joins are cancellation points; the cancellation is being
   * acted on already. */
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
  verify((struct wait_case*)p);
}

static int wait_once(struct wait_case* k, int64_t timeout_ms) {
  struct timespec dl;
  switch (k->how) {
    case kWait:
      return pthread_cond_wait(&k->c, &k->m);
    case kClockwait:
      dl = shim_deadline_ms(CLOCK_MONOTONIC, timeout_ms);
      return pthread_cond_clockwait(&k->c, &k->m, CLOCK_MONOTONIC, &dl);
    default:
      dl = shim_deadline_ms(CLOCK_REALTIME, timeout_ms);
      return pthread_cond_timedwait(&k->c, &k->m, &dl);
  }
}

static void* waiter(void* p) {
  struct wait_case* k = (struct wait_case*)p;
  for (int i = 0; i < k->depth; ++i) CASE_CHECK_RC(k, pthread_mutex_lock(&k->m), 0);
  if (k->exit == kCancel || k->exit == kCancelWhileHeld) {
    pthread_cleanup_push(cleanup, k);
    __atomic_store_n(&k->waiting, 1, __ATOMIC_RELEASE);
    for (;;) {  /* never notified: leaves only by the cancellation */
      const int rc = wait_once(k, 60000);
      if (rc != 0) {
        k->wait_rc = rc;
        break;
      }
    }
    pthread_cleanup_pop(0);
    return NULL;
  }
  __atomic_store_n(&k->waiting, 1, __ATOMIC_RELEASE);
  /* A timeout ends the wait; so does a notification, or a spurious
   * wake-up (also one after the signal handler): every one is a way out. */
  k->wait_rc = wait_once(k, k->exit == kTimeout ? 30 : 60000);
  verify(k);
  return NULL;
}

static void on_usr1(int sig) { (void)sig; }

static void init_mutex(struct wait_case* k) {
  pthread_mutexattr_t a;
  CHECK_RC(pthread_mutexattr_init(&a), 0);
  CHECK_RC(pthread_mutexattr_settype(&a, k->type), 0);
  if (k->flavour == kRobust) {
    CHECK_RC(pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST), 0);
  }
  if (k->flavour == kPshared) {
    CHECK_RC(pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED), 0);
  }
  CHECK_RC(pthread_mutex_init(&k->m, &a), 0);
  CHECK_RC(pthread_mutexattr_destroy(&a), 0);
}

static void init_cond(struct wait_case* k) {
  pthread_condattr_t a;
  CHECK_RC(pthread_condattr_init(&a), 0);
  if (k->how == kPsharedCond) {
    CHECK_RC(pthread_condattr_setpshared(&a, PTHREAD_PROCESS_SHARED), 0);
  }
  CHECK_RC(pthread_cond_init(&k->c, &a), 0);
  CHECK_RC(pthread_condattr_destroy(&a), 0);
}

static void run_case(enum Kind kind, enum Flavour flavour, enum How how,
                     enum Exit exit) {
  static struct wait_case k;  /* static: a cancelled waiter's stack unwinds */
  memset(&k, 0, sizeof(k));
  k.kind = kind;
  k.flavour = flavour;
  k.how = how;
  k.exit = exit;
  k.wait_rc = -1;
  k.type = kind == kNormal       ? PTHREAD_MUTEX_NORMAL
           : kind == kAdaptive   ? PTHREAD_MUTEX_ADAPTIVE_NP
           : kind == kErrorcheck ? PTHREAD_MUTEX_ERRORCHECK
                                 : PTHREAD_MUTEX_RECURSIVE;
  k.depth = kind == kRecursive2 ? 2 : kind == kRecursive3 ? 3 : 1;
  init_mutex(&k);
  init_cond(&k);
  char what[160];
  describe(&k, what, sizeof(what));

  pthread_t t = shim_spawn(waiter, &k);
  while (!__atomic_load_n(&k.waiting, __ATOMIC_ACQUIRE)) shim_sleep_us(200);
  int held = 0;
  if (k.depth == 1) {
    /* Succeeds once the waiter released the mutex inside the wait. */
    CASE_CHECK_RC(&k, pthread_mutex_lock(&k.m), 0);
    held = 1;
  } else {
    shim_sleep_ms(5);
    /* glibc's wait released one level only. A timed wait may have ended
     * and its waiter released every level meanwhile on a loaded machine:
     * a trylock that got the mutex then sees the waiter's result, stored
     * before those unlocks, and proves nothing. */
    const int rc = other_trylock(&k.m);
    if (rc != EBUSY && __atomic_load_n(&k.wait_rc, __ATOMIC_ACQUIRE) == -1) {
      CASE_CHECK_RC(&k, rc, EBUSY);
    }
  }
  if (exit == kCancel || exit == kCancelWhileHeld) {
    if (exit == kCancel && held) {
      CASE_CHECK_RC(&k, pthread_mutex_unlock(&k.m), 0);
      held = 0;
    }
    CASE_CHECK_RC(&k, pthread_cancel(t), 0);
    if (held) {
      shim_sleep_ms(3);
      /* The cleanup cannot run before the waiter has the mutex again. */
      if (__atomic_load_n(&k.checked, __ATOMIC_ACQUIRE)) {
        SHIM_FAIL("%s: the cleanup handler ran while the main thread held "
                  "the mutex", what);
      }
    }
  }
  if (exit == kInterrupt) {
    for (int i = 0; i < 3; ++i) {
      CASE_CHECK_RC(&k, pthread_kill(t, SIGUSR1), 0);
      shim_sleep_ms(1);
    }
  }
  if (held) CASE_CHECK_RC(&k, pthread_mutex_unlock(&k.m), 0);
  if (exit == kNotify || exit == kInterrupt) {
    /* Until the waiter is out (a waiter still holding a recursive mutex
     * may not have reached the wait yet). */
    for (int i = 0; i < 10000 && !__atomic_load_n(&k.checked, __ATOMIC_ACQUIRE); ++i) {
      CASE_CHECK_RC(&k, pthread_cond_signal(&k.c), 0);
      shim_sleep_ms(1);
    }
  }
  void* res = NULL;
  struct timespec dl = shim_deadline_ms(CLOCK_REALTIME, 20000);
  if (pthread_timedjoin_np(t, &res, &dl) != 0) FATAL("%s: the waiter did not end", what);
  if (exit == kCancel || exit == kCancelWhileHeld) {
    if (res != PTHREAD_CANCELED) {
      SHIM_FAIL("%s: not cancelled (wait returned %d %s)", what, k.wait_rc,
                shim_errname(k.wait_rc));
    }
  } else if (exit == kTimeout) {
    if (k.wait_rc != ETIMEDOUT && k.wait_rc != 0) {
      SHIM_FAIL("%s: wait returned %d (%s)", what, k.wait_rc, shim_errname(k.wait_rc));
    }
  } else if (k.wait_rc != 0) {
    SHIM_FAIL("%s: wait returned %d (%s)", what, k.wait_rc, shim_errname(k.wait_rc));
  }
  if (!k.checked) SHIM_FAIL("%s: the waiter never checked the mutex", what);
  /* Free for anyone, and no thread counts as its user any more. */
  struct timespec soon = shim_deadline_ms(CLOCK_REALTIME, 1000);
  CASE_CHECK_RC(&k, pthread_mutex_timedlock(&k.m, &soon), 0);
  CASE_CHECK_RC(&k, pthread_mutex_unlock(&k.m), 0);
  CASE_CHECK_RC(&k, pthread_mutex_destroy(&k.m), 0);
  CASE_CHECK_RC(&k, pthread_cond_destroy(&k.c), 0);
}

int main(int argc, char** argv) {
  shim_test_start("cond_exit", 110);
  const int rounds = argc > 1 ? atoi(argv[1]) : 1;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_usr1;  /* no SA_RESTART: a wait still never says EINTR */
  sigaction(SIGUSR1, &sa, NULL);
  int cases = 0;
  for (int r = 0; r < rounds; ++r) {
    for (int f = 0; f < kFlavours; ++f) {
      for (int kind = 0; kind < kKinds; ++kind) {
        for (int how = 0; how < kHows; ++how) {
          for (int e = 0; e < kExits; ++e) {
            /* Only a mutex the waiter released can be held by another. */
            if (e == kCancelWhileHeld && kind >= kRecursive2) continue;
            if (e == kTimeout && how == kWait) continue;
            run_case((enum Kind)kind, (enum Flavour)f, (enum How)how, (enum Exit)e);
            ++cases;
          }
        }
      }
    }
  }
  printf("cond_exit: %d cases\n", cases);
  return shim_test_finish();
}
