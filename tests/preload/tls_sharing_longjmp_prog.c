/* A task on its parent's TLS (a clone(CLONE_VM) child made without
 * CLONE_SETTLS, as in tls_sharing_prog.c) leaves a wait by siglongjmp from
 * a signal handler, and the object is released while the handler runs.
 * glibc keeps no per-waiter state: the release leaves the object free (the
 * mutex unlocked, the semaphore's unit in its count) and the child takes it
 * afterwards. Under the shim the release must not be handed to the child's
 * queue record while a handler runs on the child, which it would never
 * collect; the shim's handler wrapper runs on the child with the parent's
 * TLS, so it must mark the child's own record, not the parent's.
 *
 *   tls_sharing_longjmp_prog [ROUNDS]
 *
 * Each round, for pthread_mutex_lock and sem_wait: the parent makes the
 * object unavailable, the child blocks on it, the parent waits until the
 * child sleeps (its /proc state is S), signals it, and releases the object
 * while the child's handler waits; then the handler jumps, and the child
 * must acquire the object within 2 s. Run with PARKLOT_FAIR_NS=0 too,
 * where every release is a direct handoff. The child calls no stdio. */
#define _GNU_SOURCE 1
#include <sched.h>
#include <semaphore.h>
#include <setjmp.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "tests/preload/shim_test_util.h"

enum { kStackBytes = 256 * 1024 };
enum Kind { kMutex, kSem, kKinds };
static const char* const kKindName[] = {"pthread_mutex_lock", "sem_wait"};

static int g_rounds = 20;
static pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
static sem_t g_sem;
static sigjmp_buf g_jump;
/* Parent -> child: the kind of the next round (-1: exit), go. Child ->
 * parent: the step it reached, and its result. */
static int g_kind = -1;
static int g_round_seq;  /* bumped by the parent to start a round */
static int g_step;       /* 1 blocking, 2 in the handler, 3 jumped, 4 done */
static int g_go;         /* the handler may jump */
static int g_result;     /* the child's acquisition: 0 or an errno */

static int load(int* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static void store(int* p, int v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

static void on_usr1(int sig) {
  (void)sig;
  store(&g_step, 2);
  while (load(&g_go) == 0) sched_yield();
  siglongjmp(g_jump, 1);
}

static int child_main(void* arg) {
  (void)arg;
  for (int seen = 0;;) {
    while (load(&g_round_seq) == seen) sched_yield();
    seen = load(&g_round_seq);
    const int kind = load(&g_kind);
    if (kind < 0) return 0;
    if (sigsetjmp(g_jump, 1) == 0) {
      store(&g_step, 1);
      if (kind == kMutex) {
        pthread_mutex_lock(&g_mutex);
      } else {
        sem_wait(&g_sem);
      }
      /* Acquired without a jump: the parent released before signalling. */
      store(&g_result, -1);
      store(&g_step, 4);
      continue;
    }
    store(&g_step, 3);
    struct timespec d = shim_deadline_ms(CLOCK_REALTIME, 2000);
    int rc;
    if (kind == kMutex) {
      rc = pthread_mutex_timedlock(&g_mutex, &d);
      if (rc == 0) pthread_mutex_unlock(&g_mutex);
    } else {
      rc = sem_timedwait(&g_sem, &d) == 0 ? 0 : errno;
    }
    store(&g_result, rc);
    store(&g_step, 4);
  }
}

/* The child's scheduler state from /proc: 'S' while it sleeps in a wait. */
static char task_state(pid_t pid) {
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE* f = fopen(path, "r");
  if (f == NULL) return '?';
  const size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char* paren = strrchr(buf, ')');
  return paren != NULL && paren[1] == ' ' ? paren[2] : '?';
}

static void await_step(int want, const char* what) {
  const int64_t end = shim_now_ns(CLOCK_MONOTONIC) + 10000000000LL;
  while (load(&g_step) < want) {
    if (shim_now_ns(CLOCK_MONOTONIC) > end) FATAL("child never %s", what);
    sched_yield();
  }
}

static void* idle_thread(void* arg) { return arg; }

int main(int argc, char** argv) {
  shim_test_start("tls_sharing_longjmp", 60);
  if (argc > 1) g_rounds = atoi(argv[1]);
  /* glibc skips its atomics in a process it thinks single-threaded; one
   * thread, made and joined, ends that (see tls_sharing_prog.c). */
  pthread_join(shim_spawn(idle_thread, NULL), NULL);
  CHECK(sem_init(&g_sem, 0, 0) == 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sigemptyset(&sa.sa_mask);
  CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
  char* stack = mmap(NULL, kStackBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) FATAL("mmap: %s", strerror(errno));
  const pid_t child =
      clone(child_main, stack + kStackBytes, CLONE_VM | SIGCHLD, NULL);
  if (child < 0) FATAL("clone: %s", strerror(errno));
  int lost[kKinds] = {0, 0}, early = 0;
  for (int r = 0; r < g_rounds; ++r) {
    for (int kind = 0; kind < kKinds; ++kind) {
      if (kind == kMutex) pthread_mutex_lock(&g_mutex);
      store(&g_step, 0);
      store(&g_go, 0);
      store(&g_result, 0);
      store(&g_kind, kind);
      __atomic_fetch_add(&g_round_seq, 1, __ATOMIC_ACQ_REL);
      await_step(1, "started to block");
      /* Asleep in the wait (not spinning before it). */
      const int64_t end = shim_now_ns(CLOCK_MONOTONIC) + 10000000000LL;
      while (task_state(child) != 'S') {
        if (shim_now_ns(CLOCK_MONOTONIC) > end) FATAL("child never slept");
        shim_sleep_us(200);
      }
      shim_sleep_ms(2);
      CHECK(kill(child, SIGUSR1) == 0);
      await_step(2, "entered its handler");
      /* The release, while the handler runs on the blocked child. */
      if (kind == kMutex) {
        pthread_mutex_unlock(&g_mutex);
      } else {
        CHECK(sem_post(&g_sem) == 0);
      }
      store(&g_go, 1);
      await_step(4, "finished its round");
      const int rc = load(&g_result);
      if (rc == -1) {
        ++early;
      } else if (rc != 0) {
        ++lost[kind];
        SHIM_FAIL("round %d: %s: after the jump the child could not acquire "
                  "the released object: %s", r, kKindName[kind],
                  shim_errname(rc));
        /* Free it for the next round. */
        if (kind == kMutex) {
          struct timespec d = shim_deadline_ms(CLOCK_REALTIME, 100);
          if (pthread_mutex_timedlock(&g_mutex, &d) == 0) {
            pthread_mutex_unlock(&g_mutex);
          }
        }
      }
    }
  }
  store(&g_kind, -1);
  __atomic_fetch_add(&g_round_seq, 1, __ATOMIC_ACQ_REL);
  int wstatus = 0;
  CHECK(waitpid(child, &wstatus, 0) == child);
  CHECK(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
  CHECK(early == 0);
  printf("tls_sharing_longjmp: %d rounds; lost after the jump: mutex %d, "
         "semaphore %d\n", g_rounds, lost[kMutex], lost[kSem]);
  return shim_test_finish();
}
