/* A program that sandboxes itself as firecracker, systemd's
 * SystemCallFilter= and browser sandboxes do: right after start-up it
 * installs a seccomp filter that allows only the system calls glibc makes
 * for this program, and traps every other one (SIGSYS; the handler names
 * the call and exits 4, where a kill filter would just end the process).
 * The allowlist was taken from glibc (strace -f of this program against
 * plain glibc), and the --glibc-too run proves it is enough there. Then it
 * uses every primitive the shim serves, from 64 threads (registrations and
 * table growths), with timed waits, thread exits and, under
 * PARKLOT_SYSCALL_FUTEX=1, raw private futex waits and wakes. docs/design.md
 * section 6, invariant 9: after start-up the shim makes no system call glibc
 * would not make for the same program (its table growth once probed
 * sys_membarrier: SIGSYS). */
#include "tests/preload/shim_test_util.h"  /* first: _GNU_SOURCE */

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <semaphore.h>
#include <stddef.h>
#include <sys/prctl.h>

enum { kThreads = 64, kRounds = 400 };

static pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_errorcheck = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static pthread_rwlock_t g_rwlock = PTHREAD_RWLOCK_INITIALIZER;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_barrier_t g_barrier;
static sem_t g_sem;
static long g_count;
static long g_reads;
static int g_once_runs;
static uint32_t g_futex_word;

static void once_fn(void) { ++g_once_runs; }

static void* worker(void* arg) {
  const long me = (long)arg;
  CHECK_RC(pthread_once(&g_once, once_fn), 0);
  for (int i = 0; i < kRounds; ++i) {
    CHECK_RC(pthread_mutex_lock(&g_mutex), 0);
    ++g_count;
    if (i % 8 == 0) CHECK_RC(pthread_cond_broadcast(&g_cond), 0);
    if (i % 64 == me % 64) {
      struct timespec soon = shim_deadline_ms(CLOCK_REALTIME, 1);
      const int rc = pthread_cond_timedwait(&g_cond, &g_mutex, &soon);
      CHECK(rc == 0 || rc == ETIMEDOUT);
    }
    CHECK_RC(pthread_mutex_unlock(&g_mutex), 0);
    if (i % 4 == 0) {
      CHECK_RC(pthread_rwlock_rdlock(&g_rwlock), 0);
      __atomic_fetch_add(&g_reads, 1, __ATOMIC_RELAXED);
      CHECK_RC(pthread_rwlock_unlock(&g_rwlock), 0);
    } else if (i % 16 == 1) {
      CHECK_RC(pthread_rwlock_wrlock(&g_rwlock), 0);
      CHECK_RC(pthread_rwlock_unlock(&g_rwlock), 0);
    }
    if (i % 32 == 0) {
      CHECK_RC(sem_post(&g_sem), 0);
      struct timespec soon = shim_deadline_ms(CLOCK_REALTIME, 50);
      CHECK(sem_timedwait(&g_sem, &soon) == 0 || errno == ETIMEDOUT);
    }
    if (i % 50 == 0) {
      /* Error-checking mutexes check their owner (the shim reads the
       * thread id glibc keeps, never gettid). */
      CHECK_RC(pthread_mutex_lock(&g_errorcheck), 0);
      CHECK_RC(pthread_mutex_lock(&g_errorcheck), EDEADLK);
      CHECK_RC(pthread_cond_broadcast(&g_cond), 0);
      CHECK_RC(pthread_mutex_unlock(&g_errorcheck), 0);
      CHECK_RC(pthread_mutex_unlock(&g_errorcheck), EPERM);
    }
    if (i % 40 == 0) {
      /* Raw private futex calls: served under PARKLOT_SYSCALL_FUTEX=1. */
      struct timespec rel = {0, 100000};
      const long rc = shim_futex(&g_futex_word, FUTEX_WAIT_PRIVATE, 0, &rel);
      CHECK(rc == 0 || errno == ETIMEDOUT || errno == EAGAIN);
      shim_futex(&g_futex_word, FUTEX_WAKE_PRIVATE, 1, NULL);
    }
  }
  const int rc = pthread_barrier_wait(&g_barrier);
  CHECK(rc == 0 || rc == PTHREAD_BARRIER_SERIAL_THREAD);
  return NULL;
}

static void on_sigsys(int sig, siginfo_t* info, void* uc) {
  (void)sig;
  (void)uc;
  char msg[96];
  const int n = snprintf(msg, sizeof(msg),
                         "FAIL: system call %d is not in glibc's allowlist\n",
                         info->si_syscall);
  ssize_t w = write(STDERR_FILENO, msg, (size_t)n);
  (void)w;
  _exit(4);
}

#define ALLOW(nr)                                    \
  BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), \
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

/* What glibc calls for this program after main begins (strace -f against
 * plain glibc, PARKLOT_SYSCALL_FUTEX=1 or not): threads, their stacks and
 * exits, waits and wakes, timed sleeps, line-buffered stdout. */
static void install_glibc_allowlist(void) {
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      ALLOW(SYS_futex),
      ALLOW(SYS_mmap),
      ALLOW(SYS_munmap),
      ALLOW(SYS_mprotect),
      ALLOW(SYS_madvise),
      ALLOW(SYS_brk),
      ALLOW(SYS_clone),
      ALLOW(SYS_clone3),
      ALLOW(SYS_set_robust_list),
      ALLOW(SYS_rseq),
      ALLOW(SYS_rt_sigprocmask),
      ALLOW(SYS_rt_sigaction),
      ALLOW(SYS_rt_sigreturn),
      ALLOW(SYS_exit),
      ALLOW(SYS_exit_group),
      ALLOW(SYS_write),
      ALLOW(SYS_clock_gettime),
      ALLOW(SYS_clock_nanosleep),
      ALLOW(SYS_nanosleep),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
  };
  struct sock_fprog prog = {sizeof(filter) / sizeof(filter[0]), filter};
  struct sigaction sa = {0};
  sa.sa_sigaction = on_sigsys;
  sa.sa_flags = SA_SIGINFO;
  CHECK(sigaction(SIGSYS, &sa, NULL) == 0);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
    FATAL("seccomp filter: %s", strerror(errno));
  }
}

int main(void) {
  shim_test_start("sandbox_allowlist", 60);
  CHECK_RC(pthread_barrier_init(&g_barrier, NULL, kThreads), 0);
  CHECK(sem_init(&g_sem, 0, 0) == 0);
  fflush(stdout);
  install_glibc_allowlist();
  pthread_t t[kThreads];
  for (long i = 0; i < kThreads; ++i) t[i] = shim_spawn(worker, (void*)i);
  for (int i = 0; i < kThreads; ++i) pthread_join(t[i], NULL);
  CHECK(g_count == (long)kThreads * kRounds);
  CHECK(g_once_runs == 1);
  return shim_test_finish();
}
