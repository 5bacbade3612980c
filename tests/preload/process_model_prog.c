/* Tasks that share the process's memory but keep signal actions and a
 * cancellation state of their own: vfork children, clone(CLONE_VM |
 * CLONE_VFORK) children (posix_spawn's way), and clone(CLONE_VM) tasks
 * without CLONE_SIGHAND or CLONE_SETTLS, which run beside their creator on
 * its TLS. What such a task does to its own signal actions and what runs
 * on it must leave its creator's as they were, as under glibc (the kernel
 * keeps the actions per task; glibc keeps nothing of them in memory).
 *
 * Cases:
 *   vfork_reset       the child resets SIGHUP to SIG_DFL and _exits; the
 *                     parent's raise(SIGHUP) runs the parent's handler
 *   vfork_own_handler the child installs a handler of its own for SIGUSR1
 *                     and execs /bin/true; the parent's SIGUSR1 runs the
 *                     parent's handler; the child saw the parent's handler
 *                     as the old action
 *   vfork_nested      a vfork child's vfork child resets SIGHUP; then the
 *                     child does; the parent's handler still runs
 *   clone_vfork       clone(CLONE_VM | CLONE_VFORK) child resets SIGHUP
 *   clone_vm_reset    clone(CLONE_VM) task (no CLONE_SIGHAND, own stack,
 *                     the creator's TLS) resets SIGUSR2 while the creator
 *                     waits; the creator's SIGUSR2 runs the creator's
 *                     handler
 *   clone_vm_cancel   a signal handler runs on such a task while the
 *                     creator is in asynchronous cancellation mode; the
 *                     creator's cancel type reads as it set it, during
 *                     the handler and after
 *
 *   process_model_prog                   all cases
 */
#define _GNU_SOURCE 1
#include <sched.h>
#include <sys/wait.h>

#include "tests/preload/shim_test_util.h"

enum { kStackBytes = 256 * 1024 };

static volatile sig_atomic_t g_last_signal;
static void ParentHandler(int sig) { g_last_signal = sig; }
static void ChildHandler(int sig) { (void)sig; }

/* Raises `sig` in the calling thread and reports whether the handler the
 * parent installed ran for it. */
static int ParentHandlerRuns(int sig) {
  g_last_signal = 0;
  raise(sig);
  return g_last_signal == sig;
}

static void WaitChild(pid_t pid, int want_status) {
  int status = 0;
  if (waitpid(pid, &status, __WALL) != pid) {
    SHIM_FAIL("waitpid(%d): %s", (int)pid, strerror(errno));
    return;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != want_status) {
    SHIM_FAIL("child %d: status 0x%x, want exit %d", (int)pid, status,
              want_status);
  }
}

static void VforkReset(void) {
  signal(SIGHUP, ParentHandler);
  const pid_t pid = vfork();
  if (pid == 0) {
    signal(SIGHUP, SIG_DFL);
    _exit(0);
  }
  CHECK(pid > 0);
  WaitChild(pid, 0);
  CHECK(ParentHandlerRuns(SIGHUP));
}

static void VforkOwnHandler(void) {
  signal(SIGUSR1, ParentHandler);
  /* Written by the child (shared memory, as every vfork child's writes):
   * 1 when it saw the parent's handler as the old action. */
  volatile int saw_parents = 0;
  const pid_t pid = vfork();
  if (pid == 0) {
    struct sigaction act, old;
    memset(&act, 0, sizeof act);
    act.sa_handler = ChildHandler;
    sigemptyset(&act.sa_mask);
    if (sigaction(SIGUSR1, &act, &old) == 0 &&
        old.sa_handler == ParentHandler) {
      saw_parents = 1;
    }
    execl("/bin/true", "true", (char*)NULL);
    _exit(127);
  }
  CHECK(pid > 0);
  WaitChild(pid, 0);
  CHECK(saw_parents == 1);
  CHECK(ParentHandlerRuns(SIGUSR1));
  struct sigaction now;
  CHECK(sigaction(SIGUSR1, NULL, &now) == 0);
  CHECK(now.sa_handler == ParentHandler);
}

static void VforkNested(void) {
  signal(SIGHUP, ParentHandler);
  const pid_t pid = vfork();
  if (pid == 0) {
    const pid_t grandchild = vfork();
    if (grandchild == 0) {
      signal(SIGHUP, SIG_DFL);
      _exit(0);
    }
    int status;
    if (grandchild < 0 || waitpid(grandchild, &status, 0) != grandchild) {
      _exit(3);
    }
    /* Still a vfork child once its own child has gone. */
    signal(SIGHUP, SIG_IGN);
    _exit(0);
  }
  CHECK(pid > 0);
  WaitChild(pid, 0);
  CHECK(ParentHandlerRuns(SIGHUP));
}

static int ResetHup(void* arg) {
  (void)arg;
  signal(SIGHUP, SIG_DFL);
  return 0;
}

static void CloneVfork(void) {
  signal(SIGHUP, ParentHandler);
  char* stack = malloc(kStackBytes);
  if (stack == NULL) FATAL("malloc");
  const pid_t pid = clone(ResetHup, stack + kStackBytes,
                          CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
  CHECK(pid > 0);
  if (pid > 0) WaitChild(pid, 0);
  free(stack);
  CHECK(ParentHandlerRuns(SIGHUP));
}

/* The clone(CLONE_VM) task's side: steps shared with its creator. */
static volatile int g_step;

static int ResetUsr2(void* arg) {
  (void)arg;
  signal(SIGUSR2, SIG_DFL);
  __atomic_store_n(&g_step, 1, __ATOMIC_RELEASE);
  return 0;
}

static void CloneVmReset(void) {
  signal(SIGUSR2, ParentHandler);
  char* stack = malloc(kStackBytes);
  if (stack == NULL) FATAL("malloc");
  g_step = 0;
  const pid_t pid = clone(ResetUsr2, stack + kStackBytes, CLONE_VM | SIGCHLD,
                          NULL);
  CHECK(pid > 0);
  if (pid > 0) WaitChild(pid, 0);
  free(stack);
  CHECK(g_step == 1);
  CHECK(ParentHandlerRuns(SIGUSR2));
}

/* Runs on the task: tells the creator it is inside, waits for its go. */
static void HoldingHandler(int sig) {
  (void)sig;
  __atomic_store_n(&g_step, 2, __ATOMIC_RELEASE);
  while (__atomic_load_n(&g_step, __ATOMIC_ACQUIRE) != 3) sched_yield();
  __atomic_store_n(&g_step, 4, __ATOMIC_RELEASE);
}

static int WaitForHandler(void* arg) {
  (void)arg;
  __atomic_store_n(&g_step, 1, __ATOMIC_RELEASE);
  while (__atomic_load_n(&g_step, __ATOMIC_ACQUIRE) != 4) sched_yield();
  return 0;
}

static int WaitStep(int step) {
  const int64_t deadline = shim_now_ns(CLOCK_MONOTONIC) + 20000000000LL;
  while (__atomic_load_n(&g_step, __ATOMIC_ACQUIRE) != step) {
    if (shim_now_ns(CLOCK_MONOTONIC) > deadline) return 0;
    sched_yield();
  }
  return 1;
}

static void CloneVmCancel(void) {
  /* Installed before the task exists: it inherits the action. */
  signal(SIGUSR1, HoldingHandler);
  char* stack = malloc(kStackBytes);
  if (stack == NULL) FATAL("malloc");
  g_step = 0;
  const pid_t pid = clone(WaitForHandler, stack + kStackBytes,
                          CLONE_VM | SIGCHLD, NULL);
  if (pid <= 0) FATAL("clone: %s", strerror(errno));
  if (!WaitStep(1)) FATAL("the task did not start");
  int old = -1;
  CHECK_RC(pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &old), 0);
  CHECK(old == PTHREAD_CANCEL_DEFERRED);
  /* The task is a process of its own (no CLONE_THREAD): kill reaches it
   * alone. */
  CHECK(kill(pid, SIGUSR1) == 0);
  if (!WaitStep(2)) FATAL("the handler did not run on the task");
  old = -1;
  pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, &old);
  CHECK(old == PTHREAD_CANCEL_ASYNCHRONOUS);  /* as the creator set it */
  __atomic_store_n(&g_step, 3, __ATOMIC_RELEASE);
  WaitChild(pid, 0);
  old = -1;
  pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, &old);
  CHECK(old == PTHREAD_CANCEL_DEFERRED);  /* the task changed nothing */
  free(stack);
}

int main(void) {
  shim_test_start("process_model", 60);
  /* Something served, so that a statistics report has figures to print
   * (process_model_programs_test counts the reports). */
  static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
  CHECK_RC(pthread_mutex_lock(&mutex), 0);
  CHECK_RC(pthread_mutex_unlock(&mutex), 0);
  VforkReset();
  VforkOwnHandler();
  VforkNested();
  CloneVfork();
  CloneVmReset();
  CloneVmCancel();
  return shim_test_finish();
}
