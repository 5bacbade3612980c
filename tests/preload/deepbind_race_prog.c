/* Threads dlopen one library at once, some with RTLD_DEEPBIND and some
 * without, and check as soon as their dlopen returns that the library's
 * references to the shim's functions are what the program's global lookup
 * gives (glibc's own results agree: without the shim both are glibc's).
 * Meanwhile a churn thread dlopens and dlcloses other libraries, with the
 * flag and without. The shim's rebinding used to walk the whole link map
 * without the loader's lock (crashed against the churn), and a second
 * thread's dlopen of the library returned while the first was still
 * rebinding it.
 *
 *   deepbind_race_prog PROBE_LIB CHURN_LIB... */
#include "tests/preload/shim_test_util.h" /* first: _GNU_SOURCE */

enum { kThreads = 6, kRounds = 150 };

typedef struct {
  const char* name;
  void* fn;
} Probe;

static const char* g_probe_path;
static pthread_barrier_t g_start, g_opened;
static int g_churn_argc;
static char** g_churn_argv;
static int g_stop;

static void check_probe(void* h, int deep) {
  const Probe* table = (const Probe*)dlsym(h, "deepbind_probe_table");
  if (table == NULL) FATAL("dlsym deepbind_probe_table: %s", dlerror());
  for (const Probe* p = table; p->name != NULL; ++p) {
    void* global = dlsym(RTLD_DEFAULT, p->name);
    if (p->fn != global) {
      if (__atomic_load_n(&g_shim_test_failures, __ATOMIC_RELAXED) >= 3) {
        __atomic_fetch_add(&g_shim_test_failures, 1, __ATOMIC_RELAXED);
        return;
      }
      SHIM_FAIL("right after dlopen(%s): the library's %s is %p, the global "
                "lookup's %p",
                deep ? "RTLD_DEEPBIND" : "no flag", p->name, p->fn, global);
      return;
    }
  }
}

static void* opener(void* arg) {
  const int deep = (int)(intptr_t)arg % 2 == 0;
  for (int r = 0; r < kRounds; ++r) {
    pthread_barrier_wait(&g_start);
    void* h = dlopen(g_probe_path, RTLD_NOW | (deep ? RTLD_DEEPBIND : 0));
    if (h == NULL) FATAL("dlopen %s: %s", g_probe_path, dlerror());
    check_probe(h, deep);
    pthread_barrier_wait(&g_opened);
    dlclose(h);
  }
  return NULL;
}

static void* churn(void* arg) {
  (void)arg;
  uint32_t seed = 12345;
  while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
    const char* lib = g_churn_argv[shim_rand(&seed) % g_churn_argc];
    const int flags = RTLD_NOW | (shim_rand(&seed) % 2 ? RTLD_DEEPBIND : 0);
    void* h = dlopen(lib, flags);
    if (h == NULL) FATAL("dlopen %s: %s", lib, dlerror());
    dlclose(h);
  }
  return NULL;
}

int main(int argc, char** argv) {
  shim_test_start("deepbind_race", 50);
  if (argc < 3) FATAL("usage: deepbind_race_prog PROBE_LIB CHURN_LIB...");
  g_probe_path = argv[1];
  g_churn_argc = argc - 2;
  g_churn_argv = argv + 2;
  /* A DEEPBIND load first: the race of the process's first one against a
   * plain dlopen of the same library is not covered (see deepbind.cc). */
  void* first = dlopen(argv[2], RTLD_NOW | RTLD_DEEPBIND);
  if (first == NULL) FATAL("dlopen %s: %s", argv[2], dlerror());
  pthread_barrier_init(&g_start, NULL, kThreads);
  pthread_barrier_init(&g_opened, NULL, kThreads);
  pthread_t churner[2], t[kThreads];
  for (int i = 0; i < 2; ++i) churner[i] = shim_spawn(churn, NULL);
  for (int i = 0; i < kThreads; ++i) t[i] = shim_spawn(opener, (void*)(intptr_t)i);
  for (int i = 0; i < kThreads; ++i) pthread_join(t[i], NULL);
  __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
  for (int i = 0; i < 2; ++i) pthread_join(churner[i], NULL);
  dlclose(first);
  return shim_test_finish();
}
