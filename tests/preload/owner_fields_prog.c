/* glibc's records of a lock's holder, which debuggers, core-file tools and
 * glibc's pretty printers read: a held mutex's __data.__owner is its
 * holder's kernel thread id (every kind the shim runs: normal, adaptive,
 * error-checking, recursive; locked by lock, trylock, timedlock, and again
 * after a condvar wait), 0 once it is free and while a condvar wait has
 * released it; a write-locked rwlock's __data.__cur_writer is the writer's
 * id, 0 otherwise. A mutex's __data.__lock reads as glibc's lowlevellock
 * values: 1 held without waiters, 2 with a thread asleep waiting, 0 free.
 * And the state glibc's pretty printers read from an
 * rwlock's __data.__readers: readers counted from bit 3 outside a write
 * phase (bit 0), bits 0 and 1 set while a writer holds it, no writer bit
 * and no readers when free. As under glibc.
 *
 *   owner_fields_prog */
#include "tests/preload/shim_test_util.h"

enum How { kLock, kTrylock, kTimedlock, kHows };
static const char* const kHowName[] = {"lock", "trylock", "timedlock"};

/* The holder thread: takes the lock as told, says so, holds it until
 * released, unlocks, says so. */
static pthread_mutex_t* g_mutex;
static pthread_rwlock_t* g_rwlock;
static enum How g_how;
static int g_holder_tid;
static int g_step; /* 1 held, 2 release, 3 released */

static void Step(int step) { __atomic_store_n(&g_step, step, __ATOMIC_RELEASE); }
static void Await(int step) {
  const int64_t deadline = shim_now_ns(CLOCK_MONOTONIC) + 20000000000LL;
  while (__atomic_load_n(&g_step, __ATOMIC_ACQUIRE) != step) {
    if (shim_now_ns(CLOCK_MONOTONIC) > deadline) FATAL("step %d never came", step);
    sched_yield();
  }
}

static void* MutexHolder(void* arg) {
  (void)arg;
  g_holder_tid = (int)gettid();
  const struct timespec later = shim_deadline_ms(CLOCK_REALTIME, 10000);
  int rc = g_how == kLock      ? pthread_mutex_lock(g_mutex)
           : g_how == kTrylock ? pthread_mutex_trylock(g_mutex)
                               : pthread_mutex_timedlock(g_mutex, &later);
  CHECK_RC(rc, 0);
  Step(1);
  Await(2);
  CHECK_RC(pthread_mutex_unlock(g_mutex), 0);
  Step(3);
  return NULL;
}

/* Whether thread `tid` of this process is asleep (state S in its stat). */
static int ThreadSleeping(int tid) {
  char path[64], buf[512];
  snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
  FILE* f = fopen(path, "r");
  if (f == NULL) return 0;
  const size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char* close = strrchr(buf, ')');
  return close != NULL && close[1] == ' ' && close[2] == 'S';
}

/* A second thread that blocks on the held mutex, then takes and releases
 * it once the holder lets go. */
static int g_blocked_tid;
static void* MutexBlocked(void* arg) {
  (void)arg;
  __atomic_store_n(&g_blocked_tid, (int)gettid(), __ATOMIC_RELEASE);
  CHECK_RC(pthread_mutex_lock(g_mutex), 0);
  CHECK_RC(pthread_mutex_unlock(g_mutex), 0);
  return NULL;
}

/* glibc's lock word (__lock), which its pretty printers and debuggers
 * read: 1 while held with nobody waiting ("Acquired, possibly with no
 * waiters"), 2 once a thread sleeps waiting for it, 0 when free. */
static void CheckLockWord(pthread_mutex_t* m, const char* name,
                          const char* how) {
  if (m->__data.__lock != 1) {
    SHIM_FAIL("%s mutex, %s: __lock %d while held without waiters, want 1",
              name, how, m->__data.__lock);
  }
  __atomic_store_n(&g_blocked_tid, 0, __ATOMIC_RELEASE);
  pthread_t blocked = shim_spawn(MutexBlocked, NULL);
  const int64_t deadline = shim_now_ns(CLOCK_MONOTONIC) + 20000000000LL;
  int tid = 0;
  /* Until the waiter sleeps in the lock with its mark on the word (it may
   * spin first: adaptive kinds under glibc, every kind under the shim). */
  while ((tid = __atomic_load_n(&g_blocked_tid, __ATOMIC_ACQUIRE)) == 0 ||
         __atomic_load_n(&m->__data.__lock, __ATOMIC_ACQUIRE) != 2 ||
         !ThreadSleeping(tid)) {
    if (shim_now_ns(CLOCK_MONOTONIC) > deadline) {
      FATAL("%s mutex, %s: __lock %d, the waiter never slept on it", name,
            how, m->__data.__lock);
    }
    shim_sleep_ms(1);
  }
  if (m->__data.__lock != 2) {
    SHIM_FAIL("%s mutex, %s: __lock %d with a sleeping waiter, want 2", name,
              how, m->__data.__lock);
  }
  Step(2);
  Await(3);
  pthread_join(blocked, NULL);
  if (m->__data.__lock != 0) {
    SHIM_FAIL("%s mutex, %s: __lock %d once free, want 0", name, how,
              m->__data.__lock);
  }
}

static void CheckMutexKind(int type, const char* name) {
  for (int how = 0; how < kHows; ++how) {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, type);
    pthread_mutex_t m;
    CHECK_RC(pthread_mutex_init(&m, &attr), 0);
    pthread_mutexattr_destroy(&attr);
    g_mutex = &m;
    g_how = (enum How)how;
    Step(0);
    pthread_t t = shim_spawn(MutexHolder, NULL);
    Await(1);
    if (m.__data.__owner != g_holder_tid) {
      SHIM_FAIL("%s mutex, %s: __owner %d while held, want the holder's tid %d",
                name, kHowName[how], m.__data.__owner, g_holder_tid);
    }
    CheckLockWord(&m, name, kHowName[how]);
    if (m.__data.__owner != 0) {
      SHIM_FAIL("%s mutex, %s: __owner %d once free, want 0", name,
                kHowName[how], m.__data.__owner);
    }
    pthread_join(t, NULL);
    CHECK_RC(pthread_mutex_destroy(&m), 0);
  }
}

/* A condvar wait releases the mutex (owner 0 meanwhile) and re-takes it
 * (the waiter's id again). */
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static int g_signalled;

static void* CondWaiter(void* arg) {
  (void)arg;
  g_holder_tid = (int)gettid();
  CHECK_RC(pthread_mutex_lock(g_mutex), 0);
  Step(1);
  while (!g_signalled) CHECK_RC(pthread_cond_wait(&g_cond, g_mutex), 0);
  const int owner = g_mutex->__data.__owner;
  if (owner != g_holder_tid) {
    SHIM_FAIL("after pthread_cond_wait: __owner %d, want the waiter's tid %d",
              owner, g_holder_tid);
  }
  CHECK_RC(pthread_mutex_unlock(g_mutex), 0);
  return NULL;
}

static void CheckCondWait(int type) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_settype(&attr, type);
  pthread_mutex_t m;
  CHECK_RC(pthread_mutex_init(&m, &attr), 0);
  pthread_mutexattr_destroy(&attr);
  g_mutex = &m;
  g_signalled = 0;
  Step(0);
  pthread_t t = shim_spawn(CondWaiter, NULL);
  Await(1);
  /* The waiter released it inside the wait once this lock succeeds. */
  CHECK_RC(pthread_mutex_lock(&m), 0);
  if (m.__data.__owner != (int)gettid()) {
    SHIM_FAIL("during the wait: __owner %d, want the locker's tid %d",
              m.__data.__owner, (int)gettid());
  }
  g_signalled = 1;
  CHECK_RC(pthread_cond_signal(&g_cond), 0);
  CHECK_RC(pthread_mutex_unlock(&m), 0);
  pthread_join(t, NULL);
  CHECK(m.__data.__owner == 0);
  CHECK_RC(pthread_mutex_destroy(&m), 0);
}

static void* RwlockWriter(void* arg) {
  (void)arg;
  g_holder_tid = (int)gettid();
  const struct timespec later = shim_deadline_ms(CLOCK_REALTIME, 10000);
  int rc = g_how == kLock      ? pthread_rwlock_wrlock(g_rwlock)
           : g_how == kTrylock ? pthread_rwlock_trywrlock(g_rwlock)
                               : pthread_rwlock_timedwrlock(g_rwlock, &later);
  CHECK_RC(rc, 0);
  Step(1);
  Await(2);
  CHECK_RC(pthread_rwlock_unlock(g_rwlock), 0);
  Step(3);
  return NULL;
}

static void CheckRwlock(void) {
  for (int how = 0; how < kHows; ++how) {
    pthread_rwlock_t rw;
    CHECK_RC(pthread_rwlock_init(&rw, NULL), 0);
    g_rwlock = &rw;
    g_how = (enum How)how;
    Step(0);
    pthread_t t = shim_spawn(RwlockWriter, NULL);
    Await(1);
    if (rw.__data.__cur_writer != g_holder_tid) {
      SHIM_FAIL("rwlock, wr%s: __cur_writer %d while held, want %d",
                kHowName[how], rw.__data.__cur_writer, g_holder_tid);
    }
    Step(2);
    Await(3);
    CHECK(rw.__data.__cur_writer == 0);
    pthread_join(t, NULL);
    /* A read lock records no writer. */
    CHECK_RC(pthread_rwlock_rdlock(&rw), 0);
    CHECK(rw.__data.__cur_writer == 0);
    CHECK_RC(pthread_rwlock_unlock(&rw), 0);
    CHECK_RC(pthread_rwlock_destroy(&rw), 0);
  }
}

/* What glibc's printers report of an rwlock, from __readers alone. */
static void CheckReaders(const pthread_rwlock_t* rw, int writer, unsigned readers,
                         const char* what) {
  const unsigned r = rw->__data.__readers;
  const int write_locked = (r & 1) && (r & 2);
  const unsigned counted = (r & 1) ? 0 : r >> 3;
  if (write_locked != writer || counted != readers) {
    SHIM_FAIL("rwlock %s: __readers %#x reads as %s with %u readers", what, r,
              write_locked ? "write-locked" : "not write-locked", counted);
  }
}

static void CheckRwlockState(int kind, const char* name) {
  pthread_rwlockattr_t attr;
  CHECK_RC(pthread_rwlockattr_init(&attr), 0);
  CHECK_RC(pthread_rwlockattr_setkind_np(&attr, kind), 0);
  pthread_rwlock_t rw;
  CHECK_RC(pthread_rwlock_init(&rw, &attr), 0);
  CheckReaders(&rw, 0, 0, name);
  for (unsigned n = 1; n <= 3; ++n) {
    CHECK_RC(pthread_rwlock_rdlock(&rw), 0);
    CheckReaders(&rw, 0, n, name);
  }
  for (int n = 0; n < 3; ++n) CHECK_RC(pthread_rwlock_unlock(&rw), 0);
  CheckReaders(&rw, 0, 0, name);
  CHECK_RC(pthread_rwlock_wrlock(&rw), 0);
  CheckReaders(&rw, 1, 0, name);
  CHECK_RC(pthread_rwlock_unlock(&rw), 0);
  CheckReaders(&rw, 0, 0, name);
  CHECK_RC(pthread_rwlock_destroy(&rw), 0);
  CHECK_RC(pthread_rwlockattr_destroy(&attr), 0);
}

int main(void) {
  shim_test_start("owner_fields", 60);
  CheckMutexKind(PTHREAD_MUTEX_NORMAL, "normal");
  CheckMutexKind(PTHREAD_MUTEX_ADAPTIVE_NP, "adaptive");
  CheckMutexKind(PTHREAD_MUTEX_ERRORCHECK, "errorcheck");
  CheckMutexKind(PTHREAD_MUTEX_RECURSIVE, "recursive");
  CheckCondWait(PTHREAD_MUTEX_NORMAL);
  CheckCondWait(PTHREAD_MUTEX_RECURSIVE);
  CheckRwlock();
  CheckRwlockState(PTHREAD_RWLOCK_PREFER_READER_NP, "prefer-reader");
  CheckRwlockState(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP,
                   "prefer-writer-nonrecursive");
  /* A statically initialized mutex, the uncontended fast path. */
  static pthread_mutex_t fast = PTHREAD_MUTEX_INITIALIZER;
  CHECK_RC(pthread_mutex_lock(&fast), 0);
  CHECK(fast.__data.__owner == (int)gettid());
  CHECK_RC(pthread_mutex_unlock(&fast), 0);
  CHECK(fast.__data.__owner == 0);
  return shim_test_finish();
}
