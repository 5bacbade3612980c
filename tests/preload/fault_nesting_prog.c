/* Faults on served futex calls while another signal's handler interrupts
 * the shim's SIGSEGV handler, and the program's own SIGSEGV handler's mask.
 *
 * 1. A thread loops on FUTEX_WAIT_PRIVATE on a PROT_NONE word, untimed and
 *    with a bad timeout pointer (the kernel's EFAULT each time); SIGUSR1,
 *    sent to it as fast as the main thread can, runs a handler that makes
 *    the same calls. Under PARKLOT_SYSCALL_FUTEX=1 each call faults inside
 *    the shim and its SIGSEGV handler resumes it; a SIGUSR1 that lands
 *    while that handler runs makes its own call fault there. The shim once
 *    ran its handler with SIGSEGV blocked, so that nested fault ended the
 *    process (the kernel kills a task that faults with SIGSEGV blocked).
 *    Every call must answer EFAULT, as the kernel does, and the process
 *    must live.
 * 2. The program's SIGSEGV handler, for a fault of its own, runs with
 *    SIGSEGV blocked, and with SA_NODEFER unblocked, as under glibc; the
 *    flags read back through sigaction() are the ones set.
 * Run against glibc too (--glibc-too): the same answers. */
#include "tests/preload/shim_test_util.h" /* first: _GNU_SOURCE */

#include <linux/futex.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <sys/mman.h>

static void* g_none;                       /* a PROT_NONE page */
static const struct timespec* g_bad_ts;    /* a timeout pointer there */
static atomic_long g_wrong, g_handled;
static atomic_int g_stop;

/* The call's answer as -errno, errno kept (a handler must keep it). */
static long Wait(const struct timespec* ts) {
  const int saved = errno;
  const long r = shim_futex(g_none, FUTEX_WAIT_PRIVATE, 0, ts);
  const long answer = r < 0 ? -errno : r;
  errno = saved;
  return answer;
}

static void OnUsr1(int sig) {
  (void)sig;
  if (Wait(NULL) != -EFAULT) atomic_fetch_add(&g_wrong, 1);
  if (Wait(g_bad_ts) != -EFAULT) atomic_fetch_add(&g_wrong, 1);
  atomic_fetch_add(&g_handled, 1);
}

static void* Waiter(void* arg) {
  (void)arg;
  while (!atomic_load(&g_stop)) {
    if (Wait(NULL) != -EFAULT) atomic_fetch_add(&g_wrong, 1);
    if (Wait(g_bad_ts) != -EFAULT) atomic_fetch_add(&g_wrong, 1);
  }
  return NULL;
}

static sigjmp_buf g_back;
static volatile sig_atomic_t g_segv_blocked = -1;

static void OnSegv(int sig) {
  (void)sig;
  sigset_t now;
  pthread_sigmask(SIG_SETMASK, NULL, &now);
  g_segv_blocked = sigismember(&now, SIGSEGV);
  siglongjmp(g_back, 1);
}

/* Faults on the PROT_NONE page under a handler set with `flags`; returns
 * whether SIGSEGV was blocked inside it. */
static int BlockedInHandler(int flags) {
  struct sigaction act;
  memset(&act, 0, sizeof act);
  act.sa_handler = OnSegv;
  act.sa_flags = flags;
  CHECK(sigaction(SIGSEGV, &act, NULL) == 0);
  struct sigaction back;
  CHECK(sigaction(SIGSEGV, NULL, &back) == 0);
  CHECK(back.sa_handler == OnSegv);
  CHECK((back.sa_flags & (SA_NODEFER | SA_SIGINFO | SA_RESETHAND)) == flags);
  g_segv_blocked = -1;
  if (sigsetjmp(g_back, 1) == 0) {
    *(volatile int*)g_none = 1;
    FATAL("no fault on a PROT_NONE page");
  }
  return g_segv_blocked;
}

int main(void) {
  shim_test_start("fault_nesting_prog", 120);
  g_none = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(g_none != MAP_FAILED);
  g_bad_ts = (const struct timespec*)g_none;

  struct sigaction usr1;
  memset(&usr1, 0, sizeof usr1);
  usr1.sa_handler = OnUsr1;
  usr1.sa_flags = SA_RESTART;
  CHECK(sigaction(SIGUSR1, &usr1, NULL) == 0);
  const pthread_t t = shim_spawn(Waiter, NULL);
  for (int i = 0; i < 100000; ++i) pthread_kill(t, SIGUSR1);
  atomic_store(&g_stop, 1);
  pthread_join(t, NULL);
  printf("handler runs: %ld\n", (long)atomic_load(&g_handled));
  CHECK(atomic_load(&g_handled) > 0);
  CHECK(atomic_load(&g_wrong) == 0);

  CHECK(BlockedInHandler(0) == 1);
  CHECK(BlockedInHandler(SA_NODEFER) == 0);
  return shim_test_finish();
}
