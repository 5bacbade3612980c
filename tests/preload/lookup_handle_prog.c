/* Lookups through libc's and libpthread's handles (docs/design.md §5.17):
 * dlsym and dlvsym must answer the function the program's direct calls
 * reach for every served name (under the shim: the shim's), so that a
 * plugin host or an FFI layer that resolves pthread functions through a
 * handle runs the same protocol on one object as the rest of the program.
 * Everything else answers as glibc: other names, the old condvar ABI,
 * errors and dlerror().
 *
 * Two threads contend on one mutex, one locking through the handle's
 * pointers and the other directly; a condvar and a semaphore are signalled
 * through one side and waited through the other. Against plain glibc
 * (run_under_shim.sh --glibc-too) every expectation holds as well. */
#include "shim_test_util.h"

#include <semaphore.h>
#include <threads.h>

typedef int (*MutexFn)(pthread_mutex_t*);
typedef int (*CondWaitFn)(pthread_cond_t*, pthread_mutex_t*);
typedef int (*CondFn)(pthread_cond_t*);
typedef int (*SemFn)(sem_t*);
typedef int (*OnceFn)(pthread_once_t*, void (*)(void));

static const char* ObjectOf(const void* p) {
  Dl_info info;
  if (p == NULL) return "(null)";
  if (dladdr(p, &info) == 0 || info.dli_fname == NULL) return "(unknown)";
  return info.dli_fname;
}

static int InLibc(const void* p) { return strstr(ObjectOf(p), "libc.so.6") != NULL; }

/* name VERSION pairs glibc 2.36 defines (objdump -T libc.so.6); NULL: the
 * plain dlsym. */
static const char* const kNames[][2] = {
    {"pthread_mutex_lock", NULL},       {"pthread_mutex_lock", "GLIBC_2.2.5"},
    {"pthread_mutex_unlock", NULL},     {"pthread_mutex_trylock", NULL},
    {"pthread_mutex_trylock", "GLIBC_2.2.5"}, {"pthread_mutex_trylock", "GLIBC_2.34"},
    {"pthread_mutex_timedlock", NULL},  {"pthread_mutex_clocklock", "GLIBC_2.30"},
    {"pthread_cond_wait", NULL},        {"pthread_cond_wait", "GLIBC_2.3.2"},
    {"pthread_cond_timedwait", NULL},   {"pthread_cond_signal", "GLIBC_2.3.2"},
    {"pthread_cond_broadcast", NULL},   {"pthread_cond_clockwait", "GLIBC_2.30"},
    {"pthread_cond_init", "GLIBC_2.3.2"}, {"pthread_cond_destroy", NULL},
    {"pthread_rwlock_rdlock", NULL},    {"pthread_rwlock_wrlock", "GLIBC_2.2.5"},
    {"pthread_rwlock_unlock", "GLIBC_2.34"}, {"pthread_barrier_wait", NULL},
    {"pthread_once", NULL},             {"pthread_once", "GLIBC_2.2.5"},
    {"sem_wait", NULL},                 {"sem_wait", "GLIBC_2.2.5"},
    {"sem_post", "GLIBC_2.34"},         {"sem_timedwait", NULL},
    {"mtx_lock", NULL},                 {"mtx_lock", "GLIBC_2.28"},
    {"cnd_wait", NULL},                 {"call_once", "GLIBC_2.28"},
    {"__pthread_mutex_lock", "GLIBC_2.2.5"}, {"__pthread_once", "GLIBC_2.2.5"},
    {"sigaction", NULL},                {"dlsym", "GLIBC_2.2.5"},
};

static void* Lookup(void* h, const char* name, const char* ver) {
  return ver == NULL ? dlsym(h, name) : dlvsym(h, name, ver);
}

/* --- a mutex, locked through the handle in one thread, directly in the
 * other --- */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static MutexFn g_lock, g_unlock;
static long g_count;
enum { kIters = 200000 };

static void* Contend(void* by_handle) {
  for (int i = 0; i < kIters; i++) {
    if (by_handle != NULL) {
      g_lock(&g_mu);
      ++g_count;
      g_unlock(&g_mu);
    } else {
      pthread_mutex_lock(&g_mu);
      ++g_count;
      pthread_mutex_unlock(&g_mu);
    }
  }
  return NULL;
}

/* --- a condvar ping-pong: one thread waits and signals through the
 * handle, the other directly --- */
static pthread_mutex_t g_cm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_turn;  /* 0: the direct thread's, 1: the handle thread's */
static CondWaitFn g_wait;
static CondFn g_signal;
enum { kRounds = 20000 };

static void* PingPong(void* by_handle) {
  const int me = by_handle != NULL;
  for (int i = 0; i < kRounds; i++) {
    if (me) g_lock(&g_cm); else pthread_mutex_lock(&g_cm);
    while (g_turn != me) {
      if (me) g_wait(&g_cv, &g_cm); else pthread_cond_wait(&g_cv, &g_cm);
    }
    g_turn = !me;
    if (me) g_signal(&g_cv); else pthread_cond_signal(&g_cv);
    if (me) g_unlock(&g_cm); else pthread_mutex_unlock(&g_cm);
  }
  return NULL;
}

/* --- a semaphore: posted through the handle, waited directly --- */
static sem_t g_sem;
static SemFn g_post;
static void* Poster(void* arg) {
  (void)arg;
  for (int i = 0; i < kRounds; i++) g_post(&g_sem);
  return NULL;
}

static int g_once_runs;
static void OnceInit(void) { ++g_once_runs; }

static void CheckHandle(const char* soname) {
  void* h = dlopen(soname, RTLD_NOW);
  if (h == NULL) FATAL("dlopen(%s): %s", soname, dlerror());
  char what[160];
  for (size_t i = 0; i < sizeof(kNames) / sizeof(kNames[0]); i++) {
    const char* name = kNames[i][0];
    const char* ver = kNames[i][1];
    void* got = Lookup(h, name, ver);
    /* What a direct call reaches: the global scope's. */
    void* want = Lookup(RTLD_DEFAULT, name, ver);
    snprintf(what, sizeof what, "%s: %s(\"%s\"%s%s)", soname,
             ver == NULL ? "dlsym" : "dlvsym", name, ver == NULL ? "" : ", ",
             ver == NULL ? "" : ver);
    if (got == NULL || got != want) {
      SHIM_FAIL("%s is %p in %s; the program's calls reach %p in %s", what, got,
                ObjectOf(got), want, ObjectOf(want));
    }
  }
  /* The old condvar ABI stays glibc's, through any handle. */
  void* old_wait = dlvsym(h, "pthread_cond_wait", "GLIBC_2.2.5");
  if (!InLibc(old_wait) || old_wait == dlsym(RTLD_DEFAULT, "pthread_cond_wait")) {
    SHIM_FAIL("%s: pthread_cond_wait@GLIBC_2.2.5 is %p in %s, not glibc's old one",
              soname, old_wait, ObjectOf(old_wait));
  }
  /* A version glibc does not define for the name: no answer, an error. */
  dlerror();
  if (dlvsym(h, "pthread_mutex_lock", "GLIBC_2.99") != NULL ||
      dlerror() == NULL) {
    SHIM_FAIL("%s: dlvsym(pthread_mutex_lock, GLIBC_2.99) found something", soname);
  }
  /* Names the shim does not serve: glibc's own. */
  if (!InLibc(dlsym(h, "getpid"))) SHIM_FAIL("%s: getpid is not glibc's", soname);
  /* dlerror(): a missing name sets it (once), a later success clears it. */
  if (dlsym(h, "parklot_no_such_symbol") != NULL) SHIM_FAIL("found a missing name");
  const char* e = dlerror();
  if (e == NULL || strstr(e, "parklot_no_such_symbol") == NULL) {
    SHIM_FAIL("%s: dlerror() after a missing name: %s", soname, e ? e : "(null)");
  }
  if (dlerror() != NULL) SHIM_FAIL("%s: dlerror() not cleared by reading it", soname);
  (void)dlsym(h, "parklot_no_such_symbol");
  if (dlsym(h, "pthread_mutex_lock") == NULL) SHIM_FAIL("pthread_mutex_lock missing");
  e = dlerror();
  if (e != NULL) SHIM_FAIL("%s: a successful dlsym left the error: %s", soname, e);
  /* errno: as glibc leaves it on a successful lookup. */
  errno = 4321;
  (void)dlsym(h, "pthread_cond_signal");
  if (errno != 4321) SHIM_FAIL("%s: dlsym changed errno to %d", soname, errno);

  /* The mutex, both ways at once. */
  g_lock = (MutexFn)dlsym(h, "pthread_mutex_lock");
  g_unlock = (MutexFn)dlvsym(h, "pthread_mutex_unlock", "GLIBC_2.2.5");
  g_wait = (CondWaitFn)dlvsym(h, "pthread_cond_wait", "GLIBC_2.3.2");
  g_signal = (CondFn)dlsym(h, "pthread_cond_signal");
  g_post = (SemFn)dlvsym(h, "sem_post", "GLIBC_2.2.5");
  OnceFn once = (OnceFn)dlsym(h, "pthread_once");
  if (g_lock == NULL || g_unlock == NULL || g_wait == NULL || g_signal == NULL ||
      g_post == NULL || once == NULL) {
    FATAL("%s: a lookup failed: %s", soname, dlerror());
  }
  g_count = 0;
  pthread_t a, b;
  CHECK_RC(pthread_create(&a, NULL, Contend, (void*)1), 0);
  CHECK_RC(pthread_create(&b, NULL, Contend, NULL), 0);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  if (g_count != 2L * kIters) {
    SHIM_FAIL("%s: mutex through the handle and directly: count %ld, want %ld",
              soname, g_count, 2L * kIters);
  }
  /* A lock taken through the handle is held for a direct trylock. */
  g_lock(&g_mu);
  CHECK_RC(pthread_mutex_trylock(&g_mu), EBUSY);
  CHECK_RC(g_unlock(&g_mu), 0);
  CHECK_RC(pthread_mutex_trylock(&g_mu), 0);
  CHECK_RC(pthread_mutex_unlock(&g_mu), 0);

  /* The condvar, signalled through one side and waited through the other. */
  g_turn = 0;
  CHECK_RC(pthread_create(&a, NULL, PingPong, (void*)1), 0);
  CHECK_RC(pthread_create(&b, NULL, PingPong, NULL), 0);
  pthread_join(a, NULL);
  pthread_join(b, NULL);

  /* The semaphore. */
  CHECK_RC(sem_init(&g_sem, 0, 0), 0);
  CHECK_RC(pthread_create(&a, NULL, Poster, NULL), 0);
  for (int i = 0; i < kRounds; i++) CHECK_RC(sem_wait(&g_sem), 0);
  pthread_join(a, NULL);
  CHECK_RC(sem_trywait(&g_sem), -1);
  CHECK_RC(sem_destroy(&g_sem), 0);

  /* Once: through the handle, then directly: one run. */
  pthread_once_t o = PTHREAD_ONCE_INIT;
  g_once_runs = 0;
  CHECK_RC(once(&o, OnceInit), 0);
  CHECK_RC(pthread_once(&o, OnceInit), 0);
  if (g_once_runs != 1) SHIM_FAIL("%s: once ran %d times", soname, g_once_runs);
  dlclose(h);
}

int main(void) {
  shim_test_start("lookup_handle_prog", 40);
  /* RTLD_NEXT and RTLD_DEFAULT from the program: what its calls reach. */
  if (dlsym(RTLD_NEXT, "pthread_mutex_lock") != dlsym(RTLD_DEFAULT, "pthread_mutex_lock")) {
    SHIM_FAIL("RTLD_NEXT's pthread_mutex_lock is in %s",
              ObjectOf(dlsym(RTLD_NEXT, "pthread_mutex_lock")));
  }
  if (!InLibc(dlsym(RTLD_NEXT, "getpid"))) SHIM_FAIL("RTLD_NEXT's getpid is not glibc's");
  CheckHandle("libc.so.6");
  CheckHandle("libpthread.so.0");
  return shim_test_finish();
}
