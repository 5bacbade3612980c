/* Many tasks on their parent's TLS (clone(CLONE_VM) children made without
 * CLONE_SETTLS, as in tls_sharing_prog.c), tasks killed while they wait,
 * and fork children of such a TLS. Under glibc each of these tasks waits in
 * the kernel on the object's own word; under the shim each must behave the
 * same, however many there are and however they end.
 *
 *   tls_sharing_tasks_prog crowd HOLDERS LATE
 *     HOLDERS tasks wait on one semaphore that is posted only after LATE
 *     more tasks have each waited for (and taken) a unit of another, and
 *     LATE/4 of them also timed out on a third that is never posted:
 *     with more waiting tasks than the shim has guest records, a late task
 *     must not wait for a record held by a holder that waits for it.
 *   tls_sharing_tasks_prog killed ROUNDS KINDS
 *     Each round: a task waits on a mutex (held by the parent, KINDS has
 *     m), a condvar (c), a semaphore (s) or a futex word (f), in turn; a
 *     second task waits behind it; the first is killed (SIGKILL) and
 *     reaped; one release (unlock, signal, post, wake) must reach the
 *     second task, which checks it within 20 s. Rounds beyond the guest
 *     records claim the records that killed tasks left. glibc serves
 *     m, s and f so; its condvar does not (a killed waiter's count stays
 *     in the condvar, and a later signal can be lost), so c runs under
 *     the shim only.
 *   tls_sharing_tasks_prog fork
 *     The TLS owner, and then a task on its TLS, each fork while other
 *     tasks on that TLS wait; the fork child locks, waits on a condvar
 *     and a semaphore, creates a thread, forks again, and must exit 0.
 *
 * The children call no stdio (its locks take their owner from TLS). */
#define _GNU_SOURCE 1
#include <linux/futex.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "tests/preload/shim_test_util.h"

enum { kStackBytes = 64 * 1024, kMaxTasks = 512 };

static int g_child_errors;  /* counted by the children, checked by main */

static void child_check(int ok) {
  if (!ok) __atomic_fetch_add(&g_child_errors, 1, __ATOMIC_RELAXED);
}

static pid_t spawn_task(int (*fn)(void*), void* arg) {
  char* stack = mmap(NULL, kStackBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) FATAL("mmap: %s", strerror(errno));
  /* CLONE_VM without CLONE_SETTLS: the task runs on the caller's TLS. */
  const pid_t t = clone(fn, stack + kStackBytes, CLONE_VM | SIGCHLD, arg);
  if (t < 0) FATAL("clone: %s", strerror(errno));
  return t;
}

static void reap(pid_t t) {
  int wstatus = 0;
  CHECK(waitpid(t, &wstatus, 0) == t);
  CHECK(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
}

/* Whether task `tid` (of this process group of CLONE_VM tasks: each is a
 * process of its own) is asleep: state S in /proc/TID/stat. */
static int task_sleeping(pid_t tid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)tid);
  FILE* f = fopen(path, "r");
  if (f == NULL) return 0;
  char buf[512];
  const size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char* p = strrchr(buf, ')');
  return p != NULL && p[1] == ' ' && p[2] == 'S';
}

/* Waits (up to 20 s) until task `tid` sleeps, then 50 ms more. */
static void await_sleeping(pid_t tid) {
  for (int i = 0; i < 20000 && !task_sleeping(tid); ++i) shim_sleep_ms(1);
  CHECK(task_sleeping(tid));
  shim_sleep_ms(50);
}

/* crowd */

static sem_t g_hold, g_go, g_never;
static int g_late_done;

static int holder_main(void* arg) {
  (void)arg;
  child_check(sem_wait(&g_hold) == 0);
  return 0;
}

static int late_main(void* arg) {
  const long i = (long)arg;
  if (i % 4 == 0) {
    const struct timespec d = shim_deadline_ms(CLOCK_REALTIME, 100);
    child_check(sem_timedwait(&g_never, &d) == -1 && errno == ETIMEDOUT);
  }
  child_check(sem_wait(&g_go) == 0);
  __atomic_fetch_add(&g_late_done, 1, __ATOMIC_RELEASE);
  return 0;
}

static void crowd(int holders, int late) {
  static pid_t tasks[kMaxTasks];
  CHECK(holders + late <= kMaxTasks);
  CHECK(sem_init(&g_hold, 0, 0) == 0);
  CHECK(sem_init(&g_go, 0, 0) == 0);
  CHECK(sem_init(&g_never, 0, 0) == 0);
  int n = 0;
  for (int i = 0; i < holders; ++i) tasks[n++] = spawn_task(holder_main, NULL);
  /* Every holder waits before the first late task does. */
  for (int i = 0; i < holders; ++i) await_sleeping(tasks[i]);
  for (long i = 0; i < late; ++i) {
    tasks[n++] = spawn_task(late_main, (void*)i);
    CHECK(sem_post(&g_go) == 0);
  }
  const int64_t give_up = shim_now_ns(CLOCK_MONOTONIC) + 40000000000LL;
  while (__atomic_load_n(&g_late_done, __ATOMIC_ACQUIRE) < late &&
         shim_now_ns(CLOCK_MONOTONIC) < give_up) {
    shim_sleep_ms(2);
  }
  CHECK(__atomic_load_n(&g_late_done, __ATOMIC_ACQUIRE) == late);
  if (__atomic_load_n(&g_late_done, __ATOMIC_ACQUIRE) != late) {
    FATAL("crowd: only %d of %d late tasks passed (holders %d)",
          __atomic_load_n(&g_late_done, __ATOMIC_ACQUIRE), late, holders);
  }
  for (int i = 0; i < holders; ++i) CHECK(sem_post(&g_hold) == 0);
  for (int i = 0; i < n; ++i) reap(tasks[i]);
  printf("crowd: %d holders, %d late tasks passed\n", holders, late);
}

/* killed */

static pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static sem_t g_sem;
static uint32_t g_word;
static int g_kind;    /* what this round's tasks wait on: 0..3 */
static int g_passed;  /* the second task got the release */
static int g_cond_go; /* guarded by g_mutex */

static int waiter_main(void* arg) {
  const int second = arg != NULL;
  const struct timespec d = shim_deadline_ms(CLOCK_REALTIME, 20000);
  int ok = 0;
  switch (g_kind) {
    case 0:
      ok = pthread_mutex_timedlock(&g_mutex, &d) == 0;
      if (ok) pthread_mutex_unlock(&g_mutex);
      break;
    case 1:
      pthread_mutex_lock(&g_mutex);
      ok = 1;
      while (!g_cond_go && ok) {
        ok = pthread_cond_timedwait(&g_cond, &g_mutex, &d) == 0;
      }
      pthread_mutex_unlock(&g_mutex);
      break;
    case 2:
      ok = sem_timedwait(&g_sem, &d) == 0;
      break;
    case 3: {
      const struct timespec rel = {20, 0};
      while (__atomic_load_n(&g_word, __ATOMIC_ACQUIRE) == 0) {
        if (shim_futex(&g_word, FUTEX_WAIT_PRIVATE, 0, &rel) != 0 &&
            errno == ETIMEDOUT) {
          break;
        }
      }
      ok = __atomic_load_n(&g_word, __ATOMIC_ACQUIRE) != 0;
      break;
    }
  }
  if (second) {
    child_check(ok);
    if (ok) __atomic_store_n(&g_passed, 1, __ATOMIC_RELEASE);
  }
  return 0;
}

static void killed(int rounds, const char* kinds) {
  CHECK(sem_init(&g_sem, 0, 0) == 0);
  const size_t nkinds = strlen(kinds);
  if (nkinds == 0) FATAL("killed: no kinds");
  for (int r = 0; r < rounds; ++r) {
    const char* k = strchr("mcsf", kinds[r % nkinds]);
    if (k == NULL) FATAL("killed: unknown kind %c", kinds[r % nkinds]);
    g_kind = (int)(k - "mcsf");
    g_passed = 0;
    g_cond_go = 0;
    __atomic_store_n(&g_word, 0, __ATOMIC_RELEASE);
    if (g_kind == 0) pthread_mutex_lock(&g_mutex);
    const pid_t first = spawn_task(waiter_main, NULL);
    await_sleeping(first);
    const pid_t second = spawn_task(waiter_main, (void*)1);
    await_sleeping(second);
    CHECK(kill(first, SIGKILL) == 0);
    int wstatus = 0;
    CHECK(waitpid(first, &wstatus, 0) == first);
    CHECK(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL);
    switch (g_kind) {
      case 0:
        pthread_mutex_unlock(&g_mutex);
        break;
      case 1:
        /* One signal, as glibc's waiters see it: the live one consumes it. */
        pthread_mutex_lock(&g_mutex);
        g_cond_go = 1;
        pthread_cond_signal(&g_cond);
        pthread_mutex_unlock(&g_mutex);
        break;
      case 2:
        CHECK(sem_post(&g_sem) == 0);
        break;
      case 3:
        __atomic_store_n(&g_word, 1, __ATOMIC_RELEASE);
        shim_futex(&g_word, FUTEX_WAKE_PRIVATE, 1, NULL);
        break;
    }
    reap(second);
    if (!__atomic_load_n(&g_passed, __ATOMIC_ACQUIRE)) {
      FATAL("killed: round %d (kind %d): the release did not reach the live "
            "waiter",
            r, g_kind);
    }
  }
  printf("killed: %d rounds, every release reached the live waiter\n",
         rounds);
}

/* fork */

static sem_t g_fork_hold;
static pthread_mutex_t g_fork_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_fork_cond = PTHREAD_COND_INITIALIZER;
static int g_fork_flag; /* guarded by g_fork_mutex */
static int g_fork_status_from_task = -1;

static void* flag_thread(void* arg) {
  (void)arg;
  pthread_mutex_lock(&g_fork_mutex);
  g_fork_flag = 1;
  pthread_cond_signal(&g_fork_cond);
  pthread_mutex_unlock(&g_fork_mutex);
  return NULL;
}

/* What a fork child does: its locks, a condvar, a semaphore and a thread
 * must work, and so must another fork. Returns the exit status. */
static int fork_child_body(int depth) {
  /* A watchdog of its own: a hang is a failure, not a silent wait. */
  alarm(20);
  sem_t s;
  if (sem_init(&s, 0, 0) != 0) return 10;
  pthread_mutex_lock(&g_fork_mutex);
  g_fork_flag = 0;
  pthread_t t;
  if (pthread_create(&t, NULL, flag_thread, NULL) != 0) return 11;
  while (!g_fork_flag) pthread_cond_wait(&g_fork_cond, &g_fork_mutex);
  pthread_mutex_unlock(&g_fork_mutex);
  if (pthread_join(t, NULL) != 0) return 12;
  if (sem_post(&s) != 0 || sem_wait(&s) != 0) return 13;
  const struct timespec d = shim_deadline_ms(CLOCK_REALTIME, 20);
  if (sem_timedwait(&s, &d) != -1 || errno != ETIMEDOUT) return 14;
  if (depth > 0) {
    const pid_t p = fork();
    if (p < 0) return 15;
    if (p == 0) _exit(fork_child_body(depth - 1));
    int wstatus = 0;
    if (waitpid(p, &wstatus, 0) != p) return 16;
    if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) return 17;
  }
  return 0;
}

static int fork_status(pid_t p) {
  int wstatus = 0;
  if (waitpid(p, &wstatus, 0) != p) return -1;
  if (WIFSIGNALED(wstatus)) return 1000 + WTERMSIG(wstatus);
  return WEXITSTATUS(wstatus);
}

static int forking_task_main(void* arg) {
  (void)arg;
  /* The task parks once first (a section of its own, a guest record). */
  child_check(sem_wait(&g_fork_hold) == 0);
  const pid_t p = fork();
  if (p == 0) _exit(fork_child_body(1));
  __atomic_store_n(&g_fork_status_from_task, p < 0 ? -2 : fork_status(p),
                   __ATOMIC_RELEASE);
  return 0;
}

static void forks(void) {
  CHECK(sem_init(&g_fork_hold, 0, 0) == 0);
  CHECK(sem_init(&g_hold, 0, 0) == 0);
  /* Tasks on this TLS that wait while the owner forks. */
  pid_t waiting[3];
  for (int i = 0; i < 3; ++i) waiting[i] = spawn_task(holder_main, NULL);
  for (int i = 0; i < 3; ++i) await_sleeping(waiting[i]);
  /* The owner forks. */
  const pid_t p = fork();
  if (p == 0) _exit(fork_child_body(1));
  const int owner_child = fork_status(p);
  if (owner_child != 0) SHIM_FAIL("the TLS owner's fork child: status %d", owner_child);
  /* A task on this TLS forks. */
  const pid_t task = spawn_task(forking_task_main, NULL);
  CHECK(sem_post(&g_fork_hold) == 0);
  reap(task);
  const int task_child =
      __atomic_load_n(&g_fork_status_from_task, __ATOMIC_ACQUIRE);
  if (task_child != 0) SHIM_FAIL("the task's fork child: status %d", task_child);
  for (int i = 0; i < 3; ++i) CHECK(sem_post(&g_hold) == 0);
  for (int i = 0; i < 3; ++i) reap(waiting[i]);
  printf("fork: the owner's and the task's fork children exited 0\n");
}

static void* idle_thread(void* arg) { return arg; }

int main(int argc, char** argv) {
  shim_test_start("tls_sharing_tasks", 55);
  if (argc < 2) FATAL("usage: tls_sharing_tasks_prog crowd|killed|fork ...");
  /* As tls_sharing_prog: a process that never made a second pthread is
   * single-threaded to glibc, which then counts no clone() child. */
  pthread_join(shim_spawn(idle_thread, NULL), NULL);
  if (strcmp(argv[1], "crowd") == 0 && argc == 4) {
    crowd(atoi(argv[2]), atoi(argv[3]));
  } else if (strcmp(argv[1], "killed") == 0 && argc == 4) {
    killed(atoi(argv[2]), argv[3]);
  } else if (strcmp(argv[1], "fork") == 0) {
    forks();
  } else {
    FATAL("unknown mode %s", argv[1]);
  }
  CHECK(__atomic_load_n(&g_child_errors, __ATOMIC_RELAXED) == 0);
  return shim_test_finish();
}
