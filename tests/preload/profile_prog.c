/* Contention with known call sites, for profile_test.sh (PARKLOT_PROFILE).
 * Every lock is taken and released in functions of their own, never
 * inlined, so that the profile's frames name them.
 *
 *   profile_prog two_locks  two mutexes, two threads each: take_alpha /
 *                           drop_alpha and take_beta / drop_beta, alpha held
 *                           three times as long; prints wall_ns=N at the end
 *   profile_prog kinds      one contended lock of each other kind the shim
 *                           serves (recursive, errorcheck and timed mutex
 *                           locks, read and write rwlock locks, a semaphore,
 *                           a barrier) and a condvar wait, which must not be
 *                           profiled: wait_X takes each, release_X ends it
 *   profile_prog fork       a fork child contends too and leaves by _exit;
 *                           prints parent=PID child=PID
 *   profile_prog maps       prints the bytes of anonymous memory mapped at
 *                           the start of main
 *   profile_prog long_waits two mutexes of few long waits: two threads
 *                           each, holding their lock 8 ms at a time, about
 *                           35 contended acquisitions per lock in 0.6 s;
 *                           prints alpha=ADDR beta=ADDR and wall_ns=N
 *   profile_prog one_wait   one contended wait, tens of microseconds long
 *
 * two_locks also prints alpha=ADDR beta=ADDR (the profile's lock frames).
 *
 * A watchdog (alarm) ends a hung run. */
#define _GNU_SOURCE 1
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))
/* After a lock call that ends a function: keeps the call from becoming a
 * tail jump, which would leave the function's frame out of every stack. */
#define NOT_A_TAIL_CALL() __asm__ volatile("" ::: "memory")

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Work the compiler cannot remove, about `ns` long. */
static void spin_for(int64_t ns) {
  const int64_t end = now_ns() + ns;
  while (now_ns() < end) {
  }
}

static void fail(const char* what, int rc) {
  fprintf(stderr, "profile_prog: %s: %s\n", what, strerror(rc));
  exit(2);
}

/* --- Waits the holder sees begin -------------------------------------- */

/* Which wait the waiter is about to enter (a number that grows from wait
 * to wait), and the waiter's thread id: a holder releases only once it has
 * seen the waiter asleep in that wait (await_asleep). Released on a timer
 * instead, a waiter the scheduler ran late (a loaded machine, both threads
 * on one CPU) found the lock free and did not contend at all. */
static int g_step = -1;
static pid_t g_waiter_tid;

/* The waiter's side: the calling thread is the waiter, about to enter
 * wait `step`. */
static void enter(int step) {
  __atomic_store_n(&g_waiter_tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELAXED);
  __atomic_store_n(&g_step, step, __ATOMIC_RELEASE);
}

/* The state letter of thread `tid` in /proc/self/task/TID/stat ('?' if
 * unreadable). */
static char thread_state(pid_t tid) {
  char path[64], buf[512];
  snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
  FILE* f = fopen(path, "r");
  if (f == NULL) return '?';
  const size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = 0;
  const char* paren = strrchr(buf, ')'); /* the name may hold spaces */
  return paren != NULL && paren[1] == ' ' ? paren[2] : '?';
}

/* The holder's side: returns once the waiter entered wait `step` and then
 * slept. Past enter() it makes no blocking call but the wait, so it is
 * parked there (its spinning, if any, is over). */
static void await_asleep(int step) {
  while (__atomic_load_n(&g_step, __ATOMIC_ACQUIRE) != step) {
  }
  while (thread_state(__atomic_load_n(&g_waiter_tid, __ATOMIC_RELAXED)) !=
         'S') {
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
  }
}

/* --- two_locks --------------------------------------------------------- */

static pthread_mutex_t g_alpha = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_beta = PTHREAD_MUTEX_INITIALIZER;
static int64_t g_until;

NOINLINE void take_alpha(void) {
  pthread_mutex_lock(&g_alpha);
  NOT_A_TAIL_CALL();
}
NOINLINE void drop_alpha(void) {
  pthread_mutex_unlock(&g_alpha);
  NOT_A_TAIL_CALL();
}
NOINLINE void take_beta(void) {
  pthread_mutex_lock(&g_beta);
  NOT_A_TAIL_CALL();
}
NOINLINE void drop_beta(void) {
  pthread_mutex_unlock(&g_beta);
  NOT_A_TAIL_CALL();
}

static void* alpha_thread(void* arg) {
  (void)arg;
  while (now_ns() < g_until) {
    take_alpha();
    spin_for(60000);
    drop_alpha();
    spin_for(2000);
  }
  return NULL;
}

static void* beta_thread(void* arg) {
  (void)arg;
  while (now_ns() < g_until) {
    take_beta();
    spin_for(20000);
    drop_beta();
    spin_for(2000);
  }
  return NULL;
}

static void run_threads(void* (*fns[])(void*), int n) {
  pthread_t t[16];
  for (int i = 0; i < n; ++i) {
    const int rc = pthread_create(&t[i], NULL, fns[i], NULL);
    if (rc != 0) fail("pthread_create", rc);
  }
  for (int i = 0; i < n; ++i) pthread_join(t[i], NULL);
}

static void print_locks(void) {
  printf("alpha=%#lx beta=%#lx\n", (unsigned long)(uintptr_t)&g_alpha,
         (unsigned long)(uintptr_t)&g_beta);
}

static void two_locks(int64_t run_ns) {
  print_locks();
  const int64_t start = now_ns();
  g_until = start + run_ns;
  void* (*fns[])(void*) = {alpha_thread, alpha_thread, beta_thread,
                           beta_thread};
  run_threads(fns, 4);
  printf("wall_ns=%lld\n", (long long)(now_ns() - start));
}

/* --- long_waits, one_wait ---------------------------------------------- */

static void sleep_ns(long ns) {
  struct timespec ts = {0, ns};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* Holds `m` 8 ms at a time, then lets the other thread in (1 ms outside):
 * its other thread waits about 8 ms at each of its acquisitions. */
static void hold_long(pthread_mutex_t* m) {
  while (now_ns() < g_until) {
    pthread_mutex_lock(m);
    sleep_ns(8000000);
    pthread_mutex_unlock(m);
    sleep_ns(1000000);
  }
}
static void* long_alpha(void* arg) {
  (void)arg;
  hold_long(&g_alpha);
  return NULL;
}
static void* long_beta(void* arg) {
  (void)arg;
  hold_long(&g_beta);
  return NULL;
}

static void long_waits(void) {
  print_locks();
  const int64_t start = now_ns();
  g_until = start + 600000000;
  void* (*fns[])(void*) = {long_alpha, long_alpha, long_beta, long_beta};
  run_threads(fns, 4);
  printf("wall_ns=%lld\n", (long long)(now_ns() - start));
}

static int g_holding;

static void* one_holder(void* arg) {
  (void)arg;
  pthread_mutex_lock(&g_alpha);
  __atomic_store_n(&g_holding, 1, __ATOMIC_RELEASE);
  await_asleep(0);
  pthread_mutex_unlock(&g_alpha);
  return NULL;
}

/* main waits for the lock the other thread holds until main sleeps on it:
 * one contended wait, tens of microseconds long. */
static void one_wait(void) {
  pthread_t t;
  const int rc = pthread_create(&t, NULL, one_holder, NULL);
  if (rc != 0) fail("pthread_create", rc);
  while (!__atomic_load_n(&g_holding, __ATOMIC_ACQUIRE)) {
  }
  enter(0);
  pthread_mutex_lock(&g_alpha);
  pthread_mutex_unlock(&g_alpha);
  pthread_join(t, NULL);
}

/* --- kinds ------------------------------------------------------------- */

static pthread_mutex_t g_recursive;
static pthread_mutex_t g_errorcheck;
static pthread_mutex_t g_timed = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t g_rw = PTHREAD_RWLOCK_INITIALIZER;
static sem_t g_sem;
static pthread_barrier_t g_barrier;
static pthread_mutex_t g_cond_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static int g_cond_ready;

/* The waiter's side: each of these waits for the holder. */
NOINLINE void wait_recursive(void) {
  pthread_mutex_lock(&g_recursive);
  pthread_mutex_lock(&g_recursive); /* held twice: two unlocks release it */
  pthread_mutex_unlock(&g_recursive);
  pthread_mutex_unlock(&g_recursive);
  NOT_A_TAIL_CALL();
}
NOINLINE void wait_errorcheck(void) {
  pthread_mutex_lock(&g_errorcheck);
  pthread_mutex_unlock(&g_errorcheck);
  NOT_A_TAIL_CALL();
}
NOINLINE void wait_timed(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += 30;
  const int rc = pthread_mutex_timedlock(&g_timed, &ts);
  if (rc != 0) fail("pthread_mutex_timedlock", rc);
  pthread_mutex_unlock(&g_timed);
  NOT_A_TAIL_CALL();
}
NOINLINE void wait_rdlock(void) {
  pthread_rwlock_rdlock(&g_rw);
  pthread_rwlock_unlock(&g_rw);
  NOT_A_TAIL_CALL();
}
NOINLINE void wait_wrlock(void) {
  pthread_rwlock_wrlock(&g_rw);
  pthread_rwlock_unlock(&g_rw);
  NOT_A_TAIL_CALL();
}
NOINLINE void wait_sem(void) {
  while (sem_wait(&g_sem) != 0) {
    if (errno != EINTR) fail("sem_wait", errno);
  }
}
NOINLINE void wait_barrier(void) {
  pthread_barrier_wait(&g_barrier);
  NOT_A_TAIL_CALL();
}
NOINLINE void wait_cond(void) {
  pthread_mutex_lock(&g_cond_mutex);
  while (!g_cond_ready) pthread_cond_wait(&g_cond, &g_cond_mutex);
  g_cond_ready = 0;
  pthread_mutex_unlock(&g_cond_mutex);
  NOT_A_TAIL_CALL();
}

/* The holder's side: each ends one of the waits above. */
NOINLINE void release_recursive(void) {
  pthread_mutex_unlock(&g_recursive);
  NOT_A_TAIL_CALL();
}
NOINLINE void release_errorcheck(void) {
  pthread_mutex_unlock(&g_errorcheck);
  NOT_A_TAIL_CALL();
}
NOINLINE void release_timed(void) {
  pthread_mutex_unlock(&g_timed);
  NOT_A_TAIL_CALL();
}
NOINLINE void release_rw(void) {
  pthread_rwlock_unlock(&g_rw);
  NOT_A_TAIL_CALL();
}
NOINLINE void post_sem(void) {
  sem_post(&g_sem);
  NOT_A_TAIL_CALL();
}
NOINLINE void arrive_barrier(void) {
  pthread_barrier_wait(&g_barrier);
  NOT_A_TAIL_CALL();
}
NOINLINE void signal_cond(void) {
  pthread_mutex_lock(&g_cond_mutex);
  g_cond_ready = 1;
  pthread_cond_signal(&g_cond);
  pthread_mutex_unlock(&g_cond_mutex);
  NOT_A_TAIL_CALL();
}
/* Where the two threads meet between rounds. */
NOINLINE void sync_barrier(void) {
  pthread_barrier_wait(&g_barrier);
  NOT_A_TAIL_CALL();
}

enum { kRounds = 40, kStepsPerRound = 8 };

/* Each round one thread holds every lock and releases each once the other
 * thread sleeps waiting for it, in the order it waits for them; then they
 * swap. */
static void* kinds_thread(void* arg) {
  const int me = (int)(intptr_t)arg;
  for (int round = 0; round < kRounds; ++round) {
    if ((round & 1) == me) {
      pthread_mutex_lock(&g_recursive);
      pthread_mutex_lock(&g_errorcheck);
      pthread_mutex_lock(&g_timed);
      pthread_rwlock_wrlock(&g_rw);
      sync_barrier();
      await_asleep(round * kStepsPerRound + 0);
      spin_for(1000000);
      release_recursive();
      await_asleep(round * kStepsPerRound + 1);
      spin_for(1000000);
      release_errorcheck();
      await_asleep(round * kStepsPerRound + 2);
      spin_for(1000000);
      release_timed();
      await_asleep(round * kStepsPerRound + 3);
      spin_for(1000000);
      release_rw();
      await_asleep(round * kStepsPerRound + 4);
      spin_for(1000000);
      post_sem();
      await_asleep(round * kStepsPerRound + 5);
      spin_for(1000000);
      arrive_barrier();
      spin_for(1000000);
      signal_cond();
    } else {
      sync_barrier();
      enter(round * kStepsPerRound + 0);
      wait_recursive();
      enter(round * kStepsPerRound + 1);
      wait_errorcheck();
      enter(round * kStepsPerRound + 2);
      wait_timed();
      enter(round * kStepsPerRound + 3);
      if (round % 4 < 2) {
        wait_rdlock();
      } else {
        wait_wrlock();
      }
      enter(round * kStepsPerRound + 4);
      wait_sem();
      enter(round * kStepsPerRound + 5);
      wait_barrier();
      wait_cond();
    }
    sync_barrier();
  }
  return NULL;
}

static void kinds(void) {
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&g_recursive, &a);
  pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
  pthread_mutex_init(&g_errorcheck, &a);
  pthread_mutexattr_destroy(&a);
  if (sem_init(&g_sem, 0, 0) != 0) fail("sem_init", errno);
  const int rc = pthread_barrier_init(&g_barrier, NULL, 2);
  if (rc != 0) fail("pthread_barrier_init", rc);
  pthread_t t[2];
  for (intptr_t i = 0; i < 2; ++i) {
    const int rc2 = pthread_create(&t[i], NULL, kinds_thread, (void*)i);
    if (rc2 != 0) fail("pthread_create", rc2);
  }
  for (int i = 0; i < 2; ++i) pthread_join(t[i], NULL);
}

/* --- fork ---------------------------------------------------------------- */

static void fork_run(void) {
  two_locks(100000000); /* the parent's samples, before the fork */
  fflush(stdout);
  const pid_t child = fork();
  if (child < 0) fail("fork", errno);
  if (child == 0) {
    two_locks(100000000);
    fflush(stdout);
    _exit(0);
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    fprintf(stderr, "profile_prog: the child failed\n");
    exit(2);
  }
  printf("parent=%d child=%d\n", (int)getpid(), (int)child);
}

/* --- maps ---------------------------------------------------------------- */

/* The bytes of anonymous memory mapped now: a sum, since neighbouring
 * anonymous mappings merge into one as address space randomization
 * happens to place them. */
static void maps(void) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (f == NULL) fail("/proc/self/maps", errno);
  unsigned long total = 0;
  char line[4096];
  while (fgets(line, sizeof(line), f) != NULL) {
    unsigned long lo, hi, inode;
    int path_at = 0;
    if (sscanf(line, "%lx-%lx %*s %*s %*s %lu %n", &lo, &hi, &inode,
               &path_at) < 3) {
      continue;
    }
    /* Anonymous: no inode and no name (not [heap], [stack], ...). */
    if (inode == 0 && (line[path_at] == '\n' || line[path_at] == '\0')) {
      total += hi - lo;
    }
  }
  fclose(f);
  printf("anonymous_bytes=%lu\n", total);
}

int main(int argc, char** argv) {
  alarm(60);
  if (argc != 2) {
    fprintf(stderr, "usage: profile_prog "
            "two_locks|kinds|fork|maps|long_waits|one_wait\n");
    return 2;
  }
  if (strcmp(argv[1], "maps") == 0) {
    maps();
  } else if (strcmp(argv[1], "two_locks") == 0) {
    two_locks(600000000);
  } else if (strcmp(argv[1], "kinds") == 0) {
    kinds();
  } else if (strcmp(argv[1], "long_waits") == 0) {
    long_waits();
  } else if (strcmp(argv[1], "one_wait") == 0) {
    one_wait();
  } else if (strcmp(argv[1], "fork") == 0) {
    fork_run();
  } else {
    fprintf(stderr, "profile_prog: unknown mode %s\n", argv[1]);
    return 2;
  }
  return 0;
}
