/* Tasks that share their creator's thread-local storage: a raw
 * clone(CLONE_VM) child made without CLONE_SETTLS runs on its parent's TLS
 * (the kernel's robust_list selftest, some runtimes and sandboxes make such
 * tasks). glibc's semaphores, barriers, mutexes and condvars keep their
 * state in the object's words only, so under glibc the parent and such a
 * child meet at them; under the shim they must too, although both tasks
 * see one thread's parking-lot data (runtime/parking_lot.cc, tasks sharing
 * TLS).
 *
 *   tls_sharing_prog [ROUNDS] [STACK]
 *     STACK: heap (the child's stack is its own mapping, default) or
 *            parent (an array in the parent's own stack frame)
 *
 * Halfway, the parent forks (the fork child exits at once).
 *
 * With PARKLOT_SYSCALL_FUTEX=1 the raw syscall(SYS_futex) exchange is the
 * shim's too. The child calls no stdio: glibc's stdio locks take their
 * owner from TLS, which the child shares with the parent. */
#define _GNU_SOURCE 1
#include <linux/futex.h>
#include <sched.h>
#include <semaphore.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "tests/preload/shim_test_util.h"

enum { kStackBytes = 256 * 1024 };

static int g_rounds = 300;
static pthread_barrier_t g_barrier;
static sem_t g_to_child, g_to_parent;
static pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static int g_turn;           /* guarded by g_mutex: whose turn (0 parent) */
static long g_shared_count;  /* guarded by g_mutex */
static uint32_t g_word;      /* the raw futex exchange's word */
static int g_child_errors;   /* counted by the child, checked by the parent */

static void child_check(int ok) {
  if (!ok) __atomic_fetch_add(&g_child_errors, 1, __ATOMIC_RELAXED);
}

/* Waits until g_word holds `want`, through syscall(SYS_futex). */
static void futex_await(uint32_t want) {
  for (;;) {
    const uint32_t v = __atomic_load_n(&g_word, __ATOMIC_ACQUIRE);
    if (v == want) return;
    shim_futex(&g_word, FUTEX_WAIT_PRIVATE, v, NULL);
  }
}

static void futex_set(uint32_t v) {
  __atomic_store_n(&g_word, v, __ATOMIC_RELEASE);
  shim_futex(&g_word, FUTEX_WAKE_PRIVATE, 1, NULL);
}

/* One round: the two tasks meet at the barrier, pass a semaphore token
 * there and back, take turns under a mutex with a condvar, contend for the
 * mutex, and pass the futex word there and back. `me`: 0 parent, 1 child. */
static int round_trip(int me, int round) {
  int errors = 0;
  const int b = pthread_barrier_wait(&g_barrier);
  errors += b != 0 && b != PTHREAD_BARRIER_SERIAL_THREAD;
  if (me == 0) {
    errors += sem_post(&g_to_child) != 0;
    errors += sem_wait(&g_to_parent) != 0;
  } else {
    errors += sem_wait(&g_to_child) != 0;
    errors += sem_post(&g_to_parent) != 0;
  }
  pthread_mutex_lock(&g_mutex);
  while (g_turn != me) pthread_cond_wait(&g_cond, &g_mutex);
  g_turn = 1 - me;
  pthread_cond_signal(&g_cond);
  pthread_mutex_unlock(&g_mutex);
  for (int i = 0; i < 50; ++i) {
    pthread_mutex_lock(&g_mutex);
    ++g_shared_count;
    pthread_mutex_unlock(&g_mutex);
  }
  const uint32_t base = (uint32_t)round * 2;
  if (me == 0) {
    futex_set(base + 1);
    futex_await(base + 2);
  } else {
    futex_await(base + 1);
    futex_set(base + 2);
  }
  return errors;
}

static void* idle_thread(void* arg) { return arg; }

static int child_main(void* arg) {
  (void)arg;
  for (int r = 0; r < g_rounds; ++r) child_check(round_trip(1, r) == 0);
  return 0;
}

int main(int argc, char** argv) {
  shim_test_start("tls_sharing", 60);
  if (argc > 1) g_rounds = atoi(argv[1]);
  const int on_parent_stack = argc > 2 && strcmp(argv[2], "parent") == 0;
  /* A process that never made a second pthread is single-threaded to
   * glibc, whose lock paths then skip their atomic instructions (its
   * SINGLE_THREAD_P test): it counts no clone() child. One thread, made
   * and joined, ends that for good, as in the programs that make such
   * tasks alongside threads. */
  pthread_join(shim_spawn(idle_thread, NULL), NULL);
  CHECK_RC(pthread_barrier_init(&g_barrier, NULL, 2), 0);
  CHECK(sem_init(&g_to_child, 0, 0) == 0);
  CHECK(sem_init(&g_to_parent, 0, 0) == 0);
  char local_stack[on_parent_stack ? kStackBytes : 1];
  char* stack = local_stack;
  if (!on_parent_stack) {
    stack = mmap(NULL, kStackBytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) FATAL("mmap: %s", strerror(errno));
  }
  /* CLONE_VM without CLONE_SETTLS (or CLONE_THREAD): the child shares the
   * parent's memory and its fs base, so its TLS is the parent's. */
  const pid_t child =
      clone(child_main, stack + kStackBytes, CLONE_VM | SIGCHLD, NULL);
  if (child < 0) FATAL("clone: %s", strerror(errno));
  int errors = 0;
  for (int r = 0; r < g_rounds; ++r) {
    errors += round_trip(0, r);
    if (r == g_rounds / 2) {
      /* A fork in the parent leaves the sharing as it was. */
      const pid_t p = fork();
      if (p == 0) _exit(0);
      CHECK(p > 0 && waitpid(p, NULL, 0) == p);
    }
  }
  int wstatus = 0;
  CHECK(waitpid(child, &wstatus, 0) == child);
  CHECK(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
  CHECK(errors == 0);
  CHECK(__atomic_load_n(&g_child_errors, __ATOMIC_RELAXED) == 0);
  CHECK(g_shared_count == 2L * 50 * g_rounds);
  printf("tls_sharing: %d rounds, child stack on the %s\n", g_rounds,
         on_parent_stack ? "parent's stack" : "heap");
  return shim_test_finish();
}
