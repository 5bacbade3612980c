/* Every libc function the shim calls, interposed by the program: each one
 * defined here (exported with -rdynamic, so the loader's global scope finds
 * it before libc's), holding a pthread mutex of the program's around the
 * real function, as Firefox's executable does with getenv. The allocator
 * (malloc, realloc, free), which the shim leaves to the program, is wrapped
 * the same way.
 *
 * The shim must never reach these during its start-up or inside a lock
 * section (docs/design.md section 6, invariant 11): there each would take
 * a pthread lock while the shim's own start-up or bucket lock is held, and
 * wait on itself. The list is the shim's own (preload/own_libc_functions.h),
 * so a function the shim comes to call is interposed here too.
 *
 * The program then runs a contended workload through every primitive the
 * shim serves, from several threads and a fork child, with the wrappers'
 * mutex itself contended (every wrapped call of every thread takes it).
 * Run in several modes (statistics, deadlock detection, served futexes):
 * it must finish, with the right counts, within the watchdog. */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sched.h>
#include <semaphore.h>
#include <stdarg.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "tests/preload/shim_test_util.h"

int __register_atfork(void (*prepare)(void), void (*parent)(void),
                      void (*child)(void), void* dso_handle);
int __cxa_atexit(void (*fn)(void*), void* arg, void* dso_handle);
void __stack_chk_fail(void) __attribute__((noreturn));
void _pthread_cleanup_push(struct _pthread_cleanup_buffer* buffer,
                           void (*routine)(void*), void* arg);
void _pthread_cleanup_pop(struct _pthread_cleanup_buffer* buffer, int execute);
void* __libc_malloc(size_t n);
void* __libc_realloc(void* p, size_t n);
void __libc_free(void* p);

/* The interposers' lock: recursive, since a wrapped function may call
 * another (fwrite calls malloc). Taken through pthread_mutex_lock, which
 * the shim serves. */
static pthread_mutex_t g_wrap_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static long g_wrapped_calls;

static void WrapEnter(void) {
  pthread_mutex_lock(&g_wrap_lock);
  ++g_wrapped_calls;
}
static void WrapLeave(void) { pthread_mutex_unlock(&g_wrap_lock); }

/* The next definition after the program's: the shim exports none of these
 * (it defines them hidden), so this is libc's. */
static void* Next(const char* name) {
  void* p = dlsym(RTLD_NEXT, name);
  if (p == NULL) {
    static const char msg[] = "FAIL: no next definition of a wrapped name\n";
    syscall(SYS_write, 2, msg, sizeof(msg) - 1);
    syscall(SYS_exit_group, 3);
  }
  return p;
}

#define REAL_FN(name)                                               \
  static __typeof__(&name) Real_##name(void) {                      \
    static __typeof__(&name) fn;                                    \
    __typeof__(&name) f = __atomic_load_n(&fn, __ATOMIC_RELAXED);   \
    if (f == NULL) {                                                \
      f = (__typeof__(&name))Next(#name);                           \
      __atomic_store_n(&fn, f, __ATOMIC_RELAXED);                   \
    }                                                               \
    return f;                                                       \
  }
#define OWN(ret, name, params, args) \
  REAL_FN(name)                      \
  ret name params {                  \
    WrapEnter();                     \
    ret r = Real_##name() args;      \
    WrapLeave();                     \
    return r;                        \
  }
#define OWN_MEM(ret, name, params, args, fallback) OWN(ret, name, params, args)
#define OWN_VOID(name, params, args) \
  REAL_FN(name)                      \
  void name params {                 \
    WrapEnter();                     \
    Real_##name() args;              \
    WrapLeave();                     \
  }
#define OWN_NORETURN(name) \
  REAL_FN(name)            \
  void name(void) {        \
    WrapEnter();           \
    Real_##name()();       \
    __builtin_unreachable(); \
  }

#include "preload/own_libc_functions.h"

int snprintf(char* s, size_t n, const char* f, ...) {
  va_list ap;
  va_start(ap, f);
  const int r = vsnprintf(s, n, f, ap);
  va_end(ap);
  return r;
}
int sprintf(char* s, const char* f, ...) {
  va_list ap;
  va_start(ap, f);
  const int r = vsprintf(s, f, ap);
  va_end(ap);
  return r;
}
REAL_FN(open)
int open(const char* path, int flags, ...) {
  mode_t mode = 0;
  if ((flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE) {
    va_list ap;
    va_start(ap, flags);
    mode = va_arg(ap, mode_t);
    va_end(ap);
  }
  WrapEnter();
  const int r = Real_open()(path, flags, mode);
  WrapLeave();
  return r;
}

/* The allocator, through glibc's own entry points (dlsym may allocate). */
void* malloc(size_t n) {
  WrapEnter();
  void* p = __libc_malloc(n);
  WrapLeave();
  return p;
}
void* realloc(void* old, size_t n) {
  WrapEnter();
  void* p = __libc_realloc(old, n);
  WrapLeave();
  return p;
}
void free(void* p) {
  WrapEnter();
  __libc_free(p);
  WrapLeave();
}

/* The workload: every primitive the shim serves, contended. */
enum { kThreads = 4, kRounds = 3000 };
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static pthread_rwlock_t g_rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_barrier_t g_barrier;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static sem_t g_sem;
static long g_count, g_rw_count, g_once_runs, g_turn;

static void OnceRoutine(void) { ++g_once_runs; }

static void* Worker(void* arg) {
  const long me = (long)arg;
  pthread_once(&g_once, OnceRoutine);
  for (int i = 0; i < kRounds; ++i) {
    pthread_mutex_lock(&g_mu);
    ++g_count;
    if (i % 64 == 0) {
      /* Turns in order: every thread waits for its own on the condvar. */
      while (g_turn % kThreads != me) pthread_cond_wait(&g_cv, &g_mu);
      ++g_turn;
      pthread_cond_broadcast(&g_cv);
    }
    pthread_mutex_unlock(&g_mu);
    if (i % 8 == 0) {
      pthread_rwlock_wrlock(&g_rw);
      ++g_rw_count;
      pthread_rwlock_unlock(&g_rw);
    } else {
      pthread_rwlock_rdlock(&g_rw);
      pthread_rwlock_unlock(&g_rw);
    }
    sem_post(&g_sem);
    sem_wait(&g_sem);
    if (i % 500 == 0) pthread_barrier_wait(&g_barrier);
  }
  return NULL;
}

int main(void) {
  shim_test_start("interposed_imports", 60);
  CHECK(getenv("HOME") == NULL || strlen(getenv("HOME")) > 0);
  CHECK_RC(pthread_barrier_init(&g_barrier, NULL, kThreads), 0);
  CHECK_RC(sem_init(&g_sem, 0, 0), 0);
  pthread_t t[kThreads];
  for (long i = 0; i < kThreads; ++i) t[i] = shim_spawn(Worker, (void*)i);
  for (int i = 0; i < kThreads; ++i) CHECK_RC(pthread_join(t[i], NULL), 0);
  CHECK(g_count == (long)kThreads * kRounds);
  CHECK(g_rw_count == (long)kThreads * ((kRounds + 7) / 8));
  CHECK(g_once_runs == 1);
  CHECK(g_turn == (long)kThreads * ((kRounds + 63) / 64));

  /* A fork child locks what its parent's threads used. */
  const pid_t child = fork();
  if (child == 0) {
    pthread_mutex_lock(&g_mu);
    pthread_mutex_unlock(&g_mu);
    pthread_rwlock_wrlock(&g_rw);
    pthread_rwlock_unlock(&g_rw);
    _exit(g_count == (long)kThreads * kRounds ? 0 : 1);
  }
  int status = 0;
  CHECK(child > 0 && waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(g_wrapped_calls > 0);
  printf("interposed_imports: %ld wrapped calls\n", g_wrapped_calls);
  return shim_test_finish();
}
