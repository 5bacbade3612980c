/* Every served function under every symbol version glibc 2.36 defines for
 * it: dlsym and dlvsym (each version) must both reach the shim, as must
 * references a program binds to a compat version at link time; the old
 * condvar ABI (pthread_cond_*@GLIBC_2.2.5) must stay glibc's.
 *
 *   symbol_versions_prog --list   prints "NAME VERSION" for every entry
 *                                 (symbol_versions_test.sh compares the list
 *                                 with objdump -T of libc.so.6 and the shim)
 *   symbol_versions_prog          the checks, under the shim */
#include "shim_test_util.h"

#include <semaphore.h>
#include <threads.h>

static const char* const kServed[][2] = {
#define V225(n) {#n, "GLIBC_2.2.5"}
#define V34(n, compat) {#n, "GLIBC_2.34"}, {#n, compat}
    V225(pthread_mutex_init), V225(pthread_mutex_destroy),
    V225(pthread_mutex_lock), V225(pthread_mutex_unlock),
    V34(pthread_mutex_trylock, "GLIBC_2.2.5"),
    V34(pthread_mutex_timedlock, "GLIBC_2.2.5"),
    V34(pthread_mutex_clocklock, "GLIBC_2.30"),
    {"pthread_cond_init", "GLIBC_2.3.2"}, {"pthread_cond_destroy", "GLIBC_2.3.2"},
    {"pthread_cond_wait", "GLIBC_2.3.2"}, {"pthread_cond_timedwait", "GLIBC_2.3.2"},
    {"pthread_cond_signal", "GLIBC_2.3.2"}, {"pthread_cond_broadcast", "GLIBC_2.3.2"},
    V34(pthread_cond_clockwait, "GLIBC_2.30"),
    V34(pthread_rwlock_init, "GLIBC_2.2.5"), V34(pthread_rwlock_destroy, "GLIBC_2.2.5"),
    V34(pthread_rwlock_rdlock, "GLIBC_2.2.5"), V34(pthread_rwlock_wrlock, "GLIBC_2.2.5"),
    V34(pthread_rwlock_tryrdlock, "GLIBC_2.2.5"),
    V34(pthread_rwlock_trywrlock, "GLIBC_2.2.5"),
    V34(pthread_rwlock_timedrdlock, "GLIBC_2.2.5"),
    V34(pthread_rwlock_timedwrlock, "GLIBC_2.2.5"),
    V34(pthread_rwlock_clockrdlock, "GLIBC_2.30"),
    V34(pthread_rwlock_clockwrlock, "GLIBC_2.30"),
    V34(pthread_rwlock_unlock, "GLIBC_2.2.5"),
    V34(pthread_barrier_init, "GLIBC_2.2.5"), V34(pthread_barrier_wait, "GLIBC_2.2.5"),
    V34(pthread_barrier_destroy, "GLIBC_2.2.5"),
    V34(pthread_once, "GLIBC_2.2.5"), V34(call_once, "GLIBC_2.28"),
    V34(sem_init, "GLIBC_2.2.5"), V34(sem_destroy, "GLIBC_2.2.5"),
    V34(sem_wait, "GLIBC_2.2.5"), V34(sem_trywait, "GLIBC_2.2.5"),
    V34(sem_timedwait, "GLIBC_2.2.5"), V34(sem_clockwait, "GLIBC_2.30"),
    V34(sem_post, "GLIBC_2.2.5"), V34(sem_getvalue, "GLIBC_2.2.5"),
    V34(mtx_init, "GLIBC_2.28"), V34(mtx_lock, "GLIBC_2.28"),
    V34(mtx_trylock, "GLIBC_2.28"), V34(mtx_timedlock, "GLIBC_2.28"),
    V34(mtx_unlock, "GLIBC_2.28"), V34(mtx_destroy, "GLIBC_2.28"),
    V34(cnd_init, "GLIBC_2.28"), V34(cnd_wait, "GLIBC_2.28"),
    V34(cnd_timedwait, "GLIBC_2.28"), V34(cnd_signal, "GLIBC_2.28"),
    V34(cnd_broadcast, "GLIBC_2.28"), V34(cnd_destroy, "GLIBC_2.28"),
    V34(dlopen, "GLIBC_2.2.5"), V34(dlmopen, "GLIBC_2.3.4"),
    V34(dlsym, "GLIBC_2.2.5"), V34(dlvsym, "GLIBC_2.2.5"),
    V225(_exit), V225(syscall), V225(clone), V225(vfork), V225(__vfork),
    V225(sigaction), V225(__sigaction),
    V225(signal), V225(bsd_signal),
    V225(ssignal), V225(siginterrupt), V225(sysv_signal), V225(__sysv_signal),
    V225(sigset), V225(sigignore),
    V225(sched_setscheduler), V225(sched_setparam),
    V225(pthread_setschedparam), V34(pthread_setschedprio, "GLIBC_2.3.4"),
    V225(pthread_attr_setschedpolicy),
#undef V225
#undef V34
};

/* The old condvar ABI: glibc's, never the shim's. */
static const char* const kGlibcOnly[] = {
    "pthread_cond_init",   "pthread_cond_destroy", "pthread_cond_wait",
    "pthread_cond_timedwait", "pthread_cond_signal", "pthread_cond_broadcast",
};

/* References bound at link time to compat versions, as a program linked
 * against an older glibc has them. */
#define OLD(ret, name, ver, args) \
  ret old_##name args;            \
  __asm__(".symver old_" #name ", " #name "@" ver);
OLD(int, sem_init, "GLIBC_2.2.5", (sem_t*, int, unsigned))
OLD(int, sem_wait, "GLIBC_2.2.5", (sem_t*))
OLD(int, sem_post, "GLIBC_2.2.5", (sem_t*))
OLD(int, pthread_mutex_trylock, "GLIBC_2.2.5", (pthread_mutex_t*))
OLD(int, pthread_rwlock_rdlock, "GLIBC_2.2.5", (pthread_rwlock_t*))
OLD(int, pthread_once, "GLIBC_2.2.5", (pthread_once_t*, void (*)(void)))
OLD(int, mtx_lock, "GLIBC_2.28", (mtx_t*))
OLD(int, pthread_cond_wait, "GLIBC_2.2.5", (pthread_cond_t*, pthread_mutex_t*))
OLD(int, pthread_cond_signal, "GLIBC_2.2.5", (pthread_cond_t*))
/* glibc's __pthread_* aliases (compat-only since 2.34), bound by binaries
 * linked before: the shim's, at the public function's address. */
OLD(int, __pthread_mutex_lock, "GLIBC_2.2.5", (pthread_mutex_t*))
OLD(int, __pthread_mutex_unlock, "GLIBC_2.2.5", (pthread_mutex_t*))
OLD(int, __pthread_rwlock_wrlock, "GLIBC_2.2.5", (pthread_rwlock_t*))
OLD(int, __pthread_rwlock_rdlock, "GLIBC_2.2.5", (pthread_rwlock_t*))
OLD(int, __pthread_rwlock_unlock, "GLIBC_2.2.5", (pthread_rwlock_t*))
static const char* const kAliases[] = {
    "__pthread_mutex_init", "__pthread_mutex_destroy", "__pthread_mutex_lock",
    "__pthread_mutex_trylock", "__pthread_mutex_unlock", "__pthread_once",
    "__pthread_rwlock_init", "__pthread_rwlock_destroy",
    "__pthread_rwlock_rdlock", "__pthread_rwlock_wrlock",
    "__pthread_rwlock_tryrdlock", "__pthread_rwlock_trywrlock",
    "__pthread_rwlock_unlock",
};

/* A binary linked before glibc 2.34 takes an rwlock through the old
 * aliases while the rest of the program (and its libraries) use the public
 * names: one lock, as under glibc. */
static pthread_rwlock_t g_rw_mix = PTHREAD_RWLOCK_INITIALIZER;
static long g_rw_mix_count;
static void* RwMixThread(void* arg) {
  const int old = arg != NULL;
  for (int i = 0; i < 50000; i++) {
    if (old) {
      old___pthread_rwlock_wrlock(&g_rw_mix);
      ++g_rw_mix_count;
      pthread_rwlock_unlock(&g_rw_mix);
      old___pthread_rwlock_rdlock(&g_rw_mix);
      old___pthread_rwlock_unlock(&g_rw_mix);
    } else {
      pthread_rwlock_wrlock(&g_rw_mix);
      ++g_rw_mix_count;
      old___pthread_rwlock_unlock(&g_rw_mix);
    }
  }
  return NULL;
}

/* Two threads take one mutex through the old alias and release it through
 * the public name (and the other way): as under glibc, one lock. */
static pthread_mutex_t g_mix = PTHREAD_MUTEX_INITIALIZER;
static long g_mix_count;
static void* MixThread(void* arg) {
  const int old_lock = arg != NULL;
  for (int i = 0; i < 100000; i++) {
    if (old_lock) {
      old___pthread_mutex_lock(&g_mix);
      ++g_mix_count;
      pthread_mutex_unlock(&g_mix);
    } else {
      pthread_mutex_lock(&g_mix);
      ++g_mix_count;
      old___pthread_mutex_unlock(&g_mix);
    }
  }
  return NULL;
}

static const char* ObjectOf(const void* p) {
  Dl_info info;
  if (p == NULL) return "(null)";
  if (dladdr(p, &info) == 0 || info.dli_fname == NULL) return "(unknown)";
  return info.dli_fname;
}

static int InShim(const void* p) {
  return strstr(ObjectOf(p), "libparklot_preload") != NULL;
}

static int InLibc(const void* p) {
  return strstr(ObjectOf(p), "libc.so.6") != NULL;
}

static void ExpectShim(const char* what, const void* p) {
  if (!InShim(p)) SHIM_FAIL("%s is %p in %s, not the shim's", what, p, ObjectOf(p));
}

int main(int argc, char** argv) {
  const size_t n = sizeof(kServed) / sizeof(kServed[0]);
  if (argc > 1 && strcmp(argv[1], "--list") == 0) {
    for (size_t i = 0; i < n; i++) printf("%s %s\n", kServed[i][0], kServed[i][1]);
    for (size_t i = 0; i < sizeof(kAliases) / sizeof(kAliases[0]); i++) {
      printf("%s GLIBC_2.2.5\n", kAliases[i]);
    }
    for (size_t i = 0; i < sizeof(kGlibcOnly) / sizeof(kGlibcOnly[0]); i++) {
      printf("%s GLIBC_2.2.5 glibc\n", kGlibcOnly[i]);
    }
    return 0;
  }
  shim_test_start("symbol_versions_prog", 30);
  char what[128];
  for (size_t i = 0; i < n; i++) {
    const char* name = kServed[i][0];
    const char* ver = kServed[i][1];
    void* d = dlsym(RTLD_DEFAULT, name);
    void* v = dlvsym(RTLD_DEFAULT, name, ver);
    snprintf(what, sizeof what, "dlsym(\"%s\")", name);
    ExpectShim(what, d);
    snprintf(what, sizeof what, "dlvsym(\"%s\", \"%s\")", name, ver);
    ExpectShim(what, v);
    if (d != v) SHIM_FAIL("%s@%s: dlsym %p and dlvsym %p differ", name, ver, d, v);
  }
  for (size_t i = 0; i < sizeof(kGlibcOnly) / sizeof(kGlibcOnly[0]); i++) {
    void* v = dlvsym(RTLD_DEFAULT, kGlibcOnly[i], "GLIBC_2.2.5");
    if (!InLibc(v)) {
      SHIM_FAIL("dlvsym(\"%s\", \"GLIBC_2.2.5\") is in %s, not glibc's old condvar",
                kGlibcOnly[i], ObjectOf(v));
    }
  }
  ExpectShim("sem_init@GLIBC_2.2.5", (void*)old_sem_init);
  ExpectShim("sem_wait@GLIBC_2.2.5", (void*)old_sem_wait);
  ExpectShim("sem_post@GLIBC_2.2.5", (void*)old_sem_post);
  ExpectShim("pthread_mutex_trylock@GLIBC_2.2.5", (void*)old_pthread_mutex_trylock);
  ExpectShim("pthread_rwlock_rdlock@GLIBC_2.2.5", (void*)old_pthread_rwlock_rdlock);
  ExpectShim("pthread_once@GLIBC_2.2.5", (void*)old_pthread_once);
  ExpectShim("mtx_lock@GLIBC_2.28", (void*)old_mtx_lock);
  for (size_t i = 0; i < sizeof(kAliases) / sizeof(kAliases[0]); i++) {
    void* v = dlvsym(RTLD_DEFAULT, kAliases[i], "GLIBC_2.2.5");
    snprintf(what, sizeof what, "dlvsym(\"%s\", \"GLIBC_2.2.5\")", kAliases[i]);
    ExpectShim(what, v);
    void* pub = dlsym(RTLD_DEFAULT, kAliases[i] + 2);
    if (v != pub) SHIM_FAIL("%s@GLIBC_2.2.5 is %p, %s is %p", kAliases[i], v, kAliases[i] + 2, pub);
  }
  ExpectShim("__pthread_mutex_lock@GLIBC_2.2.5", (void*)old___pthread_mutex_lock);
  {
    pthread_t a = shim_spawn(MixThread, (void*)1), b = shim_spawn(MixThread, NULL);
    CHECK_RC(pthread_join(a, NULL), 0);
    CHECK_RC(pthread_join(b, NULL), 0);
    CHECK(g_mix_count == 200000);
  }
  ExpectShim("__pthread_rwlock_wrlock@GLIBC_2.2.5", (void*)old___pthread_rwlock_wrlock);
  {
    pthread_t a = shim_spawn(RwMixThread, (void*)1), b = shim_spawn(RwMixThread, NULL);
    CHECK_RC(pthread_join(a, NULL), 0);
    CHECK_RC(pthread_join(b, NULL), 0);
    CHECK(g_rw_mix_count == 100000);
  }
  if (!InLibc((void*)old_pthread_cond_wait) || !InLibc((void*)old_pthread_cond_signal)) {
    SHIM_FAIL("pthread_cond_wait@GLIBC_2.2.5 is in %s, not glibc's",
              ObjectOf((void*)old_pthread_cond_wait));
  }
  /* The compat entry points work on the shim's objects. */
  sem_t s;
  CHECK_RC(old_sem_init(&s, 0, 0), 0);
  CHECK_RC(old_sem_post(&s), 0);
  CHECK_RC(old_sem_wait(&s), 0);
  CHECK_RC(sem_trywait(&s) == -1 ? errno : 0, EAGAIN);
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  CHECK_RC(old_pthread_mutex_trylock(&m), 0);
  CHECK_RC(pthread_mutex_trylock(&m), EBUSY);
  CHECK_RC(pthread_mutex_unlock(&m), 0);
  printf("%zu served name@version pairs checked\n", n);
  return shim_test_finish();
}
