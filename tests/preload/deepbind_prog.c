/* A library loaded with dlopen(RTLD_DEEPBIND) looks symbols up in its own
 * scope first, libc included, so its pthread calls went to glibc while the
 * program's went to the shim: one mutex locked by both sides hung (each
 * parks where the other never wakes) or lost updates. The shim's dlopen
 * now binds such a library's pthread functions to the shim, as without the
 * flag.
 *
 * Two threads lock the program's mutex through the library and two
 * directly; then a thread waits on a condvar through the library while the
 * main thread signals it directly, and the reverse. For each library given
 * (built with lazy and with immediate binding). Then each library again by
 * its bare name, found on the program's RUNPATH.
 *
 * --dlmopen loads through dlmopen(LM_ID_BASE, ...), which the shim covers
 * as dlopen. Built with -DDEEPBIND_TAKE_ADDRESS as a non-PIE program, it
 * takes &pthread_mutex_lock, which makes the program's PLT entry the
 * function's address everywhere (the shim used to leave such a program's
 * libraries bound to glibc).
 *
 *   deepbind_prog [--dlmopen] LIBRARY... */
#include "tests/preload/shim_test_util.h"  /* first: _GNU_SOURCE */

enum { kThreads = 4, kIterations = 100000 };

typedef void (*LockFn)(pthread_mutex_t*);
typedef int (*WaitFn)(pthread_cond_t*, pthread_mutex_t*);
typedef int (*SignalFn)(pthread_cond_t*);

static LockFn g_lib_lock, g_lib_unlock;
static WaitFn g_lib_wait;
static SignalFn g_lib_signal;
static pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static long g_counter;
static int g_ready, g_done;

static void* locker(void* arg) {
  const int through_library = (int)(intptr_t)arg;
  for (int i = 0; i < kIterations; ++i) {
    if (through_library) {
      g_lib_lock(&g_mutex);
      ++g_counter;
      g_lib_unlock(&g_mutex);
    } else {
      pthread_mutex_lock(&g_mutex);
      ++g_counter;
      pthread_mutex_unlock(&g_mutex);
    }
  }
  return NULL;
}

/* Waits for g_ready, through the library or directly. */
static void* waiter(void* arg) {
  const int through_library = (int)(intptr_t)arg;
  pthread_mutex_lock(&g_mutex);
  while (!g_ready) {
    CHECK_RC(through_library ? g_lib_wait(&g_cond, &g_mutex)
                             : pthread_cond_wait(&g_cond, &g_mutex),
             0);
  }
  g_done = 1;
  pthread_mutex_unlock(&g_mutex);
  return NULL;
}

static void handshake(int wait_through_library) {
  g_ready = g_done = 0;
  pthread_t t = shim_spawn(waiter, (void*)(intptr_t)wait_through_library);
  shim_sleep_ms(20);  /* let it wait */
  pthread_mutex_lock(&g_mutex);
  g_ready = 1;
  CHECK_RC(wait_through_library ? pthread_cond_signal(&g_cond)
                                : g_lib_signal(&g_cond),
           0);
  pthread_mutex_unlock(&g_mutex);
  pthread_join(t, NULL);
  CHECK(g_done == 1);
}

#ifdef DEEPBIND_TAKE_ADDRESS
int (*volatile g_lock_address)(pthread_mutex_t*) = pthread_mutex_lock;
#endif

int main(int argc, char** argv) {
  shim_test_start("deepbind", 30);
  const int use_dlmopen = argc > 1 && strcmp(argv[1], "--dlmopen") == 0;
  if (use_dlmopen) {
    --argc;
    ++argv;
  }
  if (argc < 2) FATAL("usage: deepbind_prog [--dlmopen] LIBRARY...");
  for (int a = 1; a < argc; ++a) {
    void* h = use_dlmopen
                  ? dlmopen(LM_ID_BASE, argv[a], RTLD_LAZY | RTLD_DEEPBIND)
                  : dlopen(argv[a], RTLD_LAZY | RTLD_DEEPBIND);
    if (h == NULL) FATAL("dlopen %s: %s", argv[a], dlerror());
    g_lib_lock = (LockFn)dlsym(h, "deepbind_lock");
    g_lib_unlock = (LockFn)dlsym(h, "deepbind_unlock");
    g_lib_wait = (WaitFn)dlsym(h, "deepbind_cond_wait");
    g_lib_signal = (SignalFn)dlsym(h, "deepbind_cond_signal");
    if (!g_lib_lock || !g_lib_unlock || !g_lib_wait || !g_lib_signal) {
      FATAL("%s lacks the test's functions", argv[a]);
    }
    g_counter = 0;
    pthread_t t[kThreads];
    for (int i = 0; i < kThreads; ++i) {
      t[i] = shim_spawn(locker, (void*)(intptr_t)(i & 1));
    }
    for (int i = 0; i < kThreads; ++i) pthread_join(t[i], NULL);
    if (g_counter != (long)kThreads * kIterations) {
      SHIM_FAIL("%s: counter %ld, want %ld (lost updates)", argv[a], g_counter,
                (long)kThreads * kIterations);
    }
    handshake(1);
    handshake(0);
    printf("deepbind: %s ok\n", argv[a]);
  }
  /* Bare names are found on the program's own RUNPATH ($ORIGIN), which
   * glibc picks by dlopen's return address: the shim's dlopen keeps the
   * program as the caller, with the flag and without. */
  for (int a = 1; a < argc; ++a) {
    const char* base = strrchr(argv[a], '/');
    base = base != NULL ? base + 1 : argv[a];
    for (int deep = 0; deep < 2; ++deep) {
      void* h = dlopen(base, RTLD_NOW | (deep ? RTLD_DEEPBIND : 0));
      if (h == NULL) {
        SHIM_FAIL("dlopen(\"%s\"%s) on the program's RUNPATH: %s", base,
                  deep ? ", RTLD_DEEPBIND" : "", dlerror());
      }
    }
  }
  return shim_test_finish();
}
