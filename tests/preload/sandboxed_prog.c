/* A program that sandboxes itself after start-up with a seccomp filter
 * denying sys_membarrier (EPERM), as in-process sandboxes deny system calls
 * they did not list, then runs 64 threads on a contended mutex and
 * condvar. Under glibc alone nothing needs membarrier. Under the shim the
 * threads' registrations grow the lot's table, whose retirement of the old
 * table waits for a liburcu-bp grace period; liburcu-bp had chosen
 * sys_membarrier at start-up and ended the process when the call failed
 * ("urcu-bp.c:smp_mb_master ... Unrecoverable error: Operation not
 * permitted", exit 134). Growth is an optimisation (docs/design.md section 6,
 * invariant 7): the table must keep serving at its size instead. */
#include "tests/preload/shim_test_util.h"  /* first: _GNU_SOURCE */

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>

enum { kThreads = 64, kRounds = 2000 };

static pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static long g_count;

static void* worker(void* arg) {
  (void)arg;
  for (int i = 0; i < kRounds; ++i) {
    CHECK_RC(pthread_mutex_lock(&g_mutex), 0);
    ++g_count;
    if (i % 8 == 0) CHECK_RC(pthread_cond_broadcast(&g_cond), 0);
    CHECK_RC(pthread_mutex_unlock(&g_mutex), 0);
  }
  return NULL;
}

/* Denies membarrier with EPERM; allows everything else. */
static void deny_membarrier(void) {
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_membarrier, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {sizeof(filter) / sizeof(filter[0]), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
    FATAL("seccomp filter: %s", strerror(errno));
  }
  errno = 0;
  CHECK(syscall(SYS_membarrier, 0, 0) == -1 && errno == EPERM);
}

int main(void) {
  shim_test_start("sandboxed", 60);
  deny_membarrier();
  pthread_t t[kThreads];
  for (int i = 0; i < kThreads; ++i) t[i] = shim_spawn(worker, NULL);
  for (int i = 0; i < kThreads; ++i) pthread_join(t[i], NULL);
  CHECK(g_count == (long)kThreads * kRounds);
  return shim_test_finish();
}
