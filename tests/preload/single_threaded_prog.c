/* The single-threaded mutex path (docs/design.md section 5.4): while the
 * process has one thread, the shim locks and unlocks normal mutexes with
 * plain loads and stores, as glibc does. It must end before a second task
 * can take a mutex, however that task is made:
 *   thread  pthread_create
 *   timer   a thread glibc makes itself (timer_create with SIGEV_THREAD),
 *           which the shim never sees being made
 *   clone   clone(CLONE_VM) without CLONE_SETTLS: a task glibc does not
 *           count as a thread (its own lock takes the single-threaded path
 *           in it, so this case runs under the shim alone)
 * Each case runs in a fork child of the single-threaded parent, so that each
 * starts with one thread. In each, the main thread takes the mutex on the
 * single-threaded path, makes the second task, holds the mutex 30 ms (the
 * task must not get in), then both run kRounds critical sections that
 * update a plain counter; the counter must come out exact. Each case runs
 * kRepeats times: a lock taken by two tasks at once shows in about two
 * runs of three (a clone task with the path left on lost 50,000-134,000
 * updates of 4,000,000 when it did). */
#include "tests/preload/shim_test_util.h" /* first: _GNU_SOURCE */

#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/single_threaded.h>
#include <sys/wait.h>
#include <time.h>

enum { kRounds = 2000000, kRepeats = 8 };

static pthread_mutex_t g_m = PTHREAD_MUTEX_INITIALIZER;
static volatile long g_count;
static volatile int g_task_started, g_task_done;

/* A critical section long enough that two holders at once lose updates. */
static void Rounds(void) {
  for (int i = 0; i < kRounds; ++i) {
    CHECK_RC(pthread_mutex_lock(&g_m), 0);
    const long c = g_count;
    __asm__ volatile("" ::: "memory");
    g_count = c + 1;
    CHECK_RC(pthread_mutex_unlock(&g_m), 0);
  }
}

static void TaskBody(void) {
  __atomic_store_n(&g_task_started, 1, __ATOMIC_RELEASE);
  Rounds();
  __atomic_store_n(&g_task_done, 1, __ATOMIC_RELEASE);
}

static void* ThreadMain(void* arg) {
  (void)arg;
  TaskBody();
  return NULL;
}

static void TimerMain(union sigval v) {
  (void)v;
  TaskBody();
}

static int CloneMain(void* arg) {
  (void)arg;
  TaskBody();
  return 0;
}

/* Holds the mutex, taken while the process had one thread, for 30 ms after
 * the task started: the task must not have counted meanwhile. */
static void HoldWhileTaskStarts(void) {
  for (int i = 0; i < 10000 && !__atomic_load_n(&g_task_started, __ATOMIC_ACQUIRE); ++i) {
    shim_sleep_us(200);
  }
  CHECK(__atomic_load_n(&g_task_started, __ATOMIC_ACQUIRE));
  shim_sleep_ms(30);
  CHECK(g_count == 0);
  CHECK_RC(pthread_mutex_unlock(&g_m), 0);
}

static void RunCase(const char* name) {
  CHECK(__libc_single_threaded);
  /* Warm the path: lock and unlock while alone, then take it. */
  for (int i = 0; i < 1000; ++i) {
    CHECK_RC(pthread_mutex_lock(&g_m), 0);
    CHECK_RC(pthread_mutex_unlock(&g_m), 0);
  }
  CHECK_RC(pthread_mutex_lock(&g_m), 0);
  pid_t clone_pid = -1;
  pthread_t thread;
  timer_t timer;
  char* stack = NULL;
  if (strcmp(name, "thread") == 0) {
    CHECK_RC(pthread_create(&thread, NULL, ThreadMain, NULL), 0);
  } else if (strcmp(name, "timer") == 0) {
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_THREAD;
    ev.sigev_notify_function = TimerMain;
    CHECK(timer_create(CLOCK_MONOTONIC, &ev, &timer) == 0);
    const struct itimerspec at = {{0, 0}, {0, 1000000}};
    CHECK(timer_settime(timer, 0, &at, NULL) == 0);
  } else {
    const size_t size = 1 << 20;
    stack = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
    CHECK(stack != MAP_FAILED);
    clone_pid = clone(CloneMain, stack + size, CLONE_VM | SIGCHLD, NULL);
    CHECK(clone_pid > 0);
  }
  HoldWhileTaskStarts();
  Rounds();
  if (strcmp(name, "thread") == 0) {
    CHECK_RC(pthread_join(thread, NULL), 0);
  } else if (strcmp(name, "timer") == 0) {
    while (!__atomic_load_n(&g_task_done, __ATOMIC_ACQUIRE)) shim_sleep_us(500);
    CHECK(timer_delete(timer) == 0);
  } else {
    int status = 0;
    CHECK(waitpid(clone_pid, &status, 0) == clone_pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  if (g_count != 2L * kRounds) {
    SHIM_FAIL("%s: counted %ld, want %ld", name, g_count, 2L * kRounds);
  }
}

int main(void) {
  shim_test_start("single_threaded_prog", 60);
  const char* cases[] = {"thread", "timer", "clone"};
  for (size_t k = 0; k < kRepeats * sizeof cases / sizeof cases[0]; ++k) {
    const size_t i = k % (sizeof cases / sizeof cases[0]);
    /* glibc's own lock takes its single-threaded path in a clone task. */
    if (g_shim_test_glibc && strcmp(cases[i], "clone") == 0) continue;
    fflush(NULL);
    const pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
      shim_test_watchdog(50);
      RunCase(cases[i]);
      _exit(shim_test_finish());
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      SHIM_FAIL("case %s: status %#x", cases[i], status);
    } else {
      printf("case %s: passed\n", cases[i]);
    }
  }
  return shim_test_finish();
}
