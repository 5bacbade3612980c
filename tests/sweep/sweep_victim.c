/* The program sweep_driver runs under the shim and ptrace.
 *
 *   sweep_victim PATH ACTION
 *     PATH:   mutex | cond | sem | rwlock | futex | clone | single
 *     ACTION: none | lock | notify | post | wake | jump | kill
 *   SWEEP_RECORD=1: the driver sends no signal (its record run)
 *
 * One task (the main thread, or for `clone` a clone(CLONE_VM) task on the
 * main thread's TLS) runs PATH once between two int3 markers, contended by
 * a partner thread that lets it go only once it sleeps, so that every run
 * takes the same slow path. The driver single-steps between the markers,
 * and in a later run stops the task at one instruction and sends SIGUSR1
 * (whose handler does ACTION) or, for `kill`, SIGKILL.
 *
 * Afterwards the program checks that every wake the handler sent arrived,
 * that the path's own partner finished, and that the lot still serves
 * contended waits (the bucket table is one bucket, PARKLOT_POLICY=fixed:1,
 * so every object shares the bucket the path used). `single` is the mutex
 * path in a process that has one thread until the path ends (no partner:
 * the shim's single-threaded path, uncontended; actions none, lock and
 * jump; the handler's mutex has no holder). Exit status: 0 passed,
 * 1 a check failed, 3 the watchdog fired (a hang). */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <linux/futex.h>
#include <sched.h>
#include <semaphore.h>
#include <setjmp.h>
#include <sys/mman.h>
#include <sys/single_threaded.h>
#include <sys/wait.h>

#include "tests/preload/shim_test_util.h"

/* What the markers leave in %rax for the driver (sweep_driver.cc). */
#define SWEEP_BEGIN_MAGIC 0x5eeb0001L
#define SWEEP_END_MAGIC 0x5eeb0002L

enum Path { kMutex, kCond, kSem, kRwlock, kFutex, kClone, kSingle };
enum Action { kNone, kLock, kNotify, kPost, kWake, kJump, kKill };
static const char* const kPaths[] = {"mutex", "cond", "sem", "rwlock",
                                     "futex", "clone", "single"};
static const char* const kActions[] = {"none", "lock", "notify", "post",
                                       "wake", "jump", "kill"};

static enum Path g_path;
static enum Action g_action;
static int g_record; /* SWEEP_RECORD=1 */

/* The path's state, kept so that a run redone after siglongjmp knows
 * what the interrupted attempt finished. */
static volatile int g_phase;
static volatile int g_jumped;
static sigjmp_buf g_jump;
static pid_t g_path_tid;     /* the task that runs the path */
static int g_path_entered;   /* set just before the begin marker */

/* The end marker: the driver stops stepping when %rip reaches it. */
__attribute__((noinline, noipa)) static void sweep_end(void) {
  __asm__ volatile("int3" : : "a"(SWEEP_END_MAGIC) : "memory");
}

/* The begin marker: tells the driver the end marker's address, the shim's
 * TLS block of this task (for its lock-section depth and the futex path's
 * re-entry count) and whether that TLS is another task's. */
static void sweep_begin(int shared_tls) {
  void* tls = NULL;
  Dl_info info;
  void* active = dlsym(RTLD_DEFAULT, "parklot_preload_active");
  if (active != NULL && dladdr(active, &info) != 0) {
    void* h = dlopen(info.dli_fname, RTLD_NOLOAD | RTLD_LAZY);
    if (h != NULL) dlinfo(h, RTLD_DI_TLS_DATA, &tls);
  }
  __atomic_store_n(&g_path_entered, 1, __ATOMIC_RELEASE);
  __asm__ volatile("int3"
                   :
                   : "a"(SWEEP_BEGIN_MAGIC), "b"(tls), "c"(&sweep_end),
                     "d"((long)shared_tls)
                   : "memory");
}

/* Whether task `tid` sleeps (S) or is gone: /proc/TID/stat works for
 * threads and for clone tasks alike. */
static int task_sleeping_or_gone(pid_t tid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)tid);
  FILE* f = fopen(path, "r");
  if (f == NULL) return 1;
  char buf[512];
  const size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char* p = strrchr(buf, ')');
  return p == NULL || p[2] == 'S' || p[2] == 'Z' || p[2] == 'X';
}

static void await_sleeping(pid_t tid) {
  while (!task_sleeping_or_gone(tid)) shim_sleep_us(200);
}

/* Waits (up to 2 s) for *counter to reach want; 0 if it never did. */
static int await_count(const int* counter, int want) {
  for (int i = 0; i < 10000; ++i) {
    if (__atomic_load_n(counter, __ATOMIC_ACQUIRE) >= want) return 1;
    shim_sleep_us(200);
  }
  return __atomic_load_n(counter, __ATOMIC_ACQUIRE) >= want;
}

/* The partner of the path: holds what the path needs until the path's
 * task sleeps, then lets it go. */
static pthread_mutex_t g_m1;  /* errorcheck: a redo can tell it owns it */
static pthread_mutex_t g_cm;  /* errorcheck, the cond path's mutex */
static pthread_cond_t g_c1 = PTHREAD_COND_INITIALIZER;
static int g_flag1;
static sem_t g_s1;
static int g_s1_posted;
static pthread_rwlock_t g_rw1 = PTHREAD_RWLOCK_INITIALIZER;
static int g_fw, g_fw_b;  /* futex words */
static int g_partner_ready;

static void* path_partner(void* arg) {
  (void)arg;
  if (g_path == kMutex || g_path == kClone) CHECK_RC(pthread_mutex_lock(&g_m1), 0);
  if (g_path == kRwlock) CHECK_RC(pthread_rwlock_rdlock(&g_rw1), 0);
  __atomic_store_n(&g_partner_ready, 1, __ATOMIC_RELEASE);
  while (!__atomic_load_n(&g_path_entered, __ATOMIC_ACQUIRE)) shim_sleep_us(200);
  await_sleeping(g_path_tid);
  switch (g_path) {
    case kMutex:
    case kClone:
      /* A killed task may have been queued for it: the unlock must still
       * return (it takes the bucket lock). */
      CHECK_RC(pthread_mutex_unlock(&g_m1), 0);
      break;
    case kCond:
      CHECK_RC(pthread_mutex_lock(&g_cm), 0);
      g_flag1 = 1;
      CHECK_RC(pthread_cond_signal(&g_c1), 0);
      CHECK_RC(pthread_mutex_unlock(&g_cm), 0);
      break;
    case kSem:
      CHECK(sem_post(&g_s1) == 0);
      __atomic_store_n(&g_s1_posted, 1, __ATOMIC_RELEASE);
      break;
    case kRwlock:
      CHECK_RC(pthread_rwlock_unlock(&g_rw1), 0);
      break;
    case kFutex:
      __atomic_store_n(&g_fw, 1, __ATOMIC_RELEASE);
      shim_futex(&g_fw, FUTEX_WAKE_PRIVATE, 1, NULL);
      /* Then the path's served wake wakes this thread. */
      while (__atomic_load_n(&g_fw_b, __ATOMIC_ACQUIRE) == 0) {
        shim_futex(&g_fw_b, FUTEX_WAIT_PRIVATE, 0, NULL);
      }
      break;
    case kSingle:  /* no partner: the process keeps one thread */
      break;
  }
  return NULL;
}

/* The path itself. Every step may be redone after a siglongjmp out of the
 * one before it, so each accepts what the interrupted attempt left: the
 * errorcheck mutexes answer EDEADLK to a second lock and EPERM to a second
 * unlock. */
static void run_path(void) {
  const int redo = g_jumped;
  int rc;
  switch (g_path) {
    case kMutex:
    case kClone:
    case kSingle:
      if (g_phase == 0) {
        rc = pthread_mutex_lock(&g_m1);
        if (!(rc == 0 || (redo && rc == EDEADLK))) SHIM_FAIL("mutex lock: %d", rc);
        g_phase = 1;
      }
      if (g_phase == 1) {
        rc = pthread_mutex_unlock(&g_m1);
        if (!(rc == 0 || (redo && rc == EPERM))) SHIM_FAIL("mutex unlock: %d", rc);
        g_phase = 2;
      }
      break;
    case kCond:
      if (g_phase == 0) {
        rc = pthread_mutex_lock(&g_cm);
        if (!(rc == 0 || (redo && rc == EDEADLK))) SHIM_FAIL("cond lock: %d", rc);
        g_phase = 1;
      }
      if (g_phase == 1) {
        while (!g_flag1) CHECK_RC(pthread_cond_wait(&g_c1, &g_cm), 0);
        g_phase = 2;
      }
      if (g_phase == 2) {
        rc = pthread_mutex_unlock(&g_cm);
        if (!(rc == 0 || (redo && rc == EPERM))) SHIM_FAIL("cond unlock: %d", rc);
        g_phase = 3;
      }
      break;
    case kSem:
      if (!redo) {
        CHECK(sem_wait(&g_s1) == 0);
        break;
      }
      /* The interrupted wait may have taken the unit already: then it is
       * posted and the value is 0 (a lost unit shows up the same way; the
       * other actions check that). */
      for (;;) {
        const struct timespec d = shim_deadline_ms(CLOCK_REALTIME, 100);
        if (sem_timedwait(&g_s1, &d) == 0) break;
        int v = -1;
        sem_getvalue(&g_s1, &v);
        if (__atomic_load_n(&g_s1_posted, __ATOMIC_ACQUIRE) && v == 0) break;
      }
      break;
    case kRwlock:
      if (g_phase == 0) {
        rc = pthread_rwlock_wrlock(&g_rw1);
        if (!(rc == 0 || (redo && rc == EDEADLK))) SHIM_FAIL("wrlock: %d", rc);
        g_phase = 1;
      }
      if (g_phase == 1) {
        /* After a jump out of the unlock, take it again if it was let go
         * (nobody else takes it any more), so there is one to let go. */
        if (redo) (void)pthread_rwlock_trywrlock(&g_rw1);
        CHECK_RC(pthread_rwlock_unlock(&g_rw1), 0);
        g_phase = 2;
      }
      break;
    case kFutex:
      while (__atomic_load_n(&g_fw, __ATOMIC_ACQUIRE) == 0) {
        shim_futex(&g_fw, FUTEX_WAIT_PRIVATE, 0, NULL);
      }
      __atomic_store_n(&g_fw_b, 1, __ATOMIC_RELEASE);
      shim_futex(&g_fw_b, FUTEX_WAKE_PRIVATE, 1, NULL);
      break;
  }
}

/* The handler's objects, each with a thread of its own that waits on it
 * (or, for `lock`, holds the mutex often) so that the handler's call has
 * work for the lot: a queued waiter to wake, a holder to wait for. */
static pthread_mutex_t g_m2 = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_cm2 = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_c2 = PTHREAD_COND_INITIALIZER;
static sem_t g_s2;
static int g_fw2;
static int g_stop;
static pid_t g_ap_tid;
static int g_handler_runs, g_handler_done;
static int g_c2_sent, g_c2_seen, g_s2_taken, g_fw2_seen;

static void on_usr1(int sig) {
  (void)sig;
  __atomic_fetch_add(&g_handler_runs, 1, __ATOMIC_RELEASE);
  switch (g_action) {
    case kLock:
      pthread_mutex_lock(&g_m2);
      pthread_mutex_unlock(&g_m2);
      break;
    case kNotify:
      __atomic_fetch_add(&g_c2_sent, 1, __ATOMIC_RELEASE);
      pthread_cond_signal(&g_c2);
      break;
    case kPost:
      sem_post(&g_s2);
      break;
    case kWake:
      __atomic_fetch_add(&g_fw2, 1, __ATOMIC_RELEASE);
      shim_futex(&g_fw2, FUTEX_WAKE_PRIVATE, 1, NULL);
      break;
    case kJump:
      g_jumped = 1;
      /* Back to before the interrupted step; run_path redoes what is
       * left (a cond wait redoes its lock too). */
      if (g_path == kCond && g_phase == 1) g_phase = 0;
      siglongjmp(g_jump, 1);
    default:
      break;
  }
  __atomic_fetch_add(&g_handler_done, 1, __ATOMIC_RELEASE);
}

static void on_trap(int sig) { (void)sig; } /* int3 without the driver */

static void* action_partner(void* arg) {
  (void)arg;
  __atomic_store_n(&g_ap_tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
  switch (g_action) {
    case kLock:
      while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&g_m2);
        shim_sleep_us(1000);
        pthread_mutex_unlock(&g_m2);
        shim_sleep_us(300);
      }
      break;
    case kNotify:
      pthread_mutex_lock(&g_cm2);
      while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
        const int sent = __atomic_load_n(&g_c2_sent, __ATOMIC_ACQUIRE);
        if (sent != g_c2_seen) {
          __atomic_store_n(&g_c2_seen, sent, __ATOMIC_RELEASE);
          continue;
        }
        pthread_cond_wait(&g_c2, &g_cm2);
      }
      pthread_mutex_unlock(&g_cm2);
      break;
    case kPost:
      for (;;) {
        while (sem_wait(&g_s2) != 0) {
        }
        if (__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) break;
        __atomic_fetch_add(&g_s2_taken, 1, __ATOMIC_RELEASE);
      }
      break;
    case kWake:
      for (;;) {
        const int v = __atomic_load_n(&g_fw2, __ATOMIC_ACQUIRE);
        if (v != g_fw2_seen) __atomic_store_n(&g_fw2_seen, v, __ATOMIC_RELEASE);
        if (__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) break;
        shim_futex(&g_fw2, FUTEX_WAIT_PRIVATE, (unsigned)v, NULL);
      }
      break;
    default:
      break;
  }
  return NULL;
}

static int clone_main(void* arg) {
  (void)arg;
  g_path_tid = (pid_t)syscall(SYS_gettid);
  sweep_begin(1);
  run_path();
  sweep_end();
  return 0;
}

/* The lot still serves contended waits on its one bucket: a semaphore
 * ping-pong (every round parks) and a mutex both threads hammer. */
static sem_t g_ping, g_pong;
static pthread_mutex_t g_m3 = PTHREAD_MUTEX_INITIALIZER;
static int g_m3_count;

static void* pong_main(void* arg) {
  (void)arg;
  for (int i = 0; i < 20; ++i) {
    while (sem_wait(&g_ping) != 0) {
    }
    pthread_mutex_lock(&g_m3);
    ++g_m3_count;
    pthread_mutex_unlock(&g_m3);
    sem_post(&g_pong);
  }
  return NULL;
}

static void final_round(void) {
  sem_init(&g_ping, 0, 0);
  sem_init(&g_pong, 0, 0);
  pthread_t t = shim_spawn(pong_main, NULL);
  for (int i = 0; i < 20; ++i) {
    sem_post(&g_ping);
    pthread_mutex_lock(&g_m3);
    ++g_m3_count;
    pthread_mutex_unlock(&g_m3);
    while (sem_wait(&g_pong) != 0) {
    }
  }
  pthread_join(t, NULL);
  CHECK(g_m3_count == 40);
}

static int lookup(const char* s, const char* const* names, int n) {
  for (int i = 0; i < n; ++i) {
    if (strcmp(s, names[i]) == 0) return i;
  }
  FATAL("unknown name %s", s);
}

int main(int argc, char** argv) {
  if (argc != 3) FATAL("usage: sweep_victim PATH ACTION");
  g_path = (enum Path)lookup(argv[1], kPaths, 7);
  g_action = (enum Action)lookup(argv[2], kActions, 7);
  g_record = getenv("SWEEP_RECORD") != NULL;
  const char* w = getenv("SWEEP_WATCHDOG_S");
  shim_test_start("sweep_victim", w != NULL ? (unsigned)atoi(w) : 5);

  pthread_mutexattr_t ma;
  pthread_mutexattr_init(&ma);
  pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
  pthread_mutex_init(&g_m1, &ma);
  pthread_mutex_init(&g_cm, &ma);
  sem_init(&g_s1, 0, 0);
  sem_init(&g_s2, 0, 0);
  signal(SIGTRAP, on_trap);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sigaction(SIGUSR1, &sa, NULL);

  /* The handler's waiter sleeps before the path starts, so the handler
   * always finds it queued. */
  pthread_t ap = 0;
  if (g_action != kNone && g_action != kJump && g_action != kKill &&
      g_path != kSingle) {
    ap = shim_spawn(action_partner, NULL);
    while (!__atomic_load_n(&g_ap_tid, __ATOMIC_ACQUIRE)) shim_sleep_us(200);
    if (g_action != kLock) await_sleeping(g_ap_tid);
  }
  g_path_tid = g_path == kClone ? 0 : (pid_t)syscall(SYS_gettid);
  pthread_t pp = 0;
  if (g_path != kSingle) {
    pp = shim_spawn(path_partner, NULL);
    while (!__atomic_load_n(&g_partner_ready, __ATOMIC_ACQUIRE)) shim_sleep_us(200);
  } else if (!__libc_single_threaded) {
    FATAL("single: the process has more than one thread before the path");
  }

  if (g_path == kClone) {
    enum { kStackBytes = 256 * 1024 };
    char* stack = mmap(NULL, kStackBytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) FATAL("mmap: %s", strerror(errno));
    /* CLONE_VM without CLONE_SETTLS: the task runs on this thread's TLS. */
    const pid_t t = clone(clone_main, stack + kStackBytes, CLONE_VM | SIGCHLD, NULL);
    if (t < 0) FATAL("clone: %s", strerror(errno));
    int ws = 0;
    while (waitpid(t, &ws, 0) != t) {
    }
    if (g_action == kKill && !g_record) {
      CHECK(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
    } else {
      CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    }
  } else {
    sigsetjmp(g_jump, 1);
    if (!g_jumped) sweep_begin(0);
    run_path();
    sweep_end();
  }
  if (pp != 0) pthread_join(pp, NULL);
  if (g_path == kSingle) CHECK(__libc_single_threaded);

  /* Every wake the handler sent arrived. The driver's record run
   * (SWEEP_RECORD=1) sends no signal. */
  if (g_record) g_action = kNone;
  if (g_action != kNone && g_action != kKill) {
    if (!await_count(&g_handler_runs, 1)) SHIM_FAIL("the handler never ran");
  }
  switch (g_action) {
    case kLock:
      if (!await_count(&g_handler_done, 1)) SHIM_FAIL("the handler's lock never returned");
      break;
    case kNotify:
      if (!await_count(&g_c2_seen, 1)) SHIM_FAIL("lost wake-up: the handler's cond signal");
      break;
    case kPost:
      if (!await_count(&g_s2_taken, 1)) SHIM_FAIL("lost wake-up: the handler's sem_post");
      break;
    case kWake:
      if (!await_count(&g_fw2_seen, 1)) SHIM_FAIL("lost wake-up: the handler's FUTEX_WAKE");
      break;
    case kJump:
      CHECK(g_jumped);
      break;
    default:
      break;
  }
  /* The mutex path left its mutex free: a jump out of it left it either
   * not taken or taken with its holder recorded, and the redo let it go. */
  if (g_path == kMutex || g_path == kSingle) {
    CHECK_RC(pthread_mutex_trylock(&g_m1), 0);
    CHECK_RC(pthread_mutex_unlock(&g_m1), 0);
  }
  if (g_path == kSem) {
    int v = -1;
    sem_getvalue(&g_s1, &v);
    CHECK(v == 0);
  }

  if (ap != 0) {
    __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
    pthread_mutex_lock(&g_cm2);
    pthread_cond_broadcast(&g_c2);
    pthread_mutex_unlock(&g_cm2);
    sem_post(&g_s2);
    __atomic_fetch_add(&g_fw2, 1, __ATOMIC_RELEASE);
    shim_futex(&g_fw2, FUTEX_WAKE_PRIVATE, 1, NULL);
    pthread_join(ap, NULL);
  }
  final_round();
  return shim_test_finish();
}
