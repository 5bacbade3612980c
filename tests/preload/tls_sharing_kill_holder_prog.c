/* Tasks on their parent's TLS (clone(CLONE_VM) children made without
 * CLONE_SETTLS) killed at random moments while they post and wait: a
 * SIGKILL may land while such a task holds one of the lot's bucket locks,
 * or in the middle of a queue change. Every later user of that bucket must
 * still get through, as under glibc, where such a kill leaves nothing
 * behind but the killed tasks' own objects.
 *
 *   tls_sharing_kill_holder_prog ROUNDS
 *     Each round: two tasks ping-pong on two private semaphores (every
 *     sem_wait parks, every sem_post unparks); after a random delay the
 *     parent kills both and reaps them, then ping-pongs with a thread on
 *     a semaphore pair, a condvar and a mutex of its own. Run with
 *     PARKLOT_POLICY=fixed:1 every key shares the killed tasks' bucket.
 *     The watchdog fails the program if any round hangs.
 *
 * The children call no stdio (its locks take their owner from TLS). */
#define _GNU_SOURCE 1
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "tests/preload/shim_test_util.h"

enum { kStackBytes = 64 * 1024 };

struct Pair {
  sem_t a, b;
};
static struct Pair g_pair;

static long g_exchanges; /* diagnostics: exchanges in all rounds */

static int ping_main(void* arg) {
  (void)arg;
  /* A parent that fails (its watchdog) takes its tasks with it. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  for (;;) {
    __atomic_fetch_add(&g_exchanges, 1, __ATOMIC_RELAXED);
    sem_post(&g_pair.a);
    while (sem_wait(&g_pair.b) != 0) {
    }
  }
  return 0;
}

static int pong_main(void* arg) {
  (void)arg;
  /* A parent that fails (its watchdog) takes its tasks with it. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  for (;;) {
    while (sem_wait(&g_pair.a) != 0) {
    }
    sem_post(&g_pair.b);
  }
  return 0;
}

static char* g_stacks[2];

static pid_t spawn_task(int i, int (*fn)(void*)) {
  if (g_stacks[i] == NULL) {
    g_stacks[i] = mmap(NULL, kStackBytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (g_stacks[i] == MAP_FAILED) FATAL("mmap: %s", strerror(errno));
  }
  /* CLONE_VM without CLONE_SETTLS: the task runs on the caller's TLS. */
  const pid_t t = clone(fn, g_stacks[i] + kStackBytes, CLONE_VM | SIGCHLD, NULL);
  if (t < 0) FATAL("clone: %s", strerror(errno));
  return t;
}

static void kill_and_reap(pid_t t) {
  kill(t, SIGKILL);
  int ws = 0;
  while (waitpid(t, &ws, 0) != t) {
  }
  CHECK(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
}

/* The survivors' check: every object hashes to the bucket the killed
 * tasks used (fixed:1), and each of these waits parks. */
static sem_t g_s1, g_s2;
static pthread_mutex_t g_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_c = PTHREAD_COND_INITIALIZER;
static int g_turn;
enum { kCheckRounds = 20 };

static void* partner_main(void* arg) {
  (void)arg;
  for (int i = 0; i < kCheckRounds; ++i) {
    while (sem_wait(&g_s1) != 0) {
    }
    sem_post(&g_s2);
    pthread_mutex_lock(&g_m);
    while (g_turn != 2 * i + 1) pthread_cond_wait(&g_c, &g_m);
    g_turn = 2 * i + 2;
    pthread_cond_broadcast(&g_c);
    pthread_mutex_unlock(&g_m);
  }
  return NULL;
}

static void survivors_check(void) {
  sem_init(&g_s1, 0, 0);
  sem_init(&g_s2, 0, 0);
  g_turn = 0;
  pthread_t t = shim_spawn(partner_main, NULL);
  for (int i = 0; i < kCheckRounds; ++i) {
    sem_post(&g_s1);
    while (sem_wait(&g_s2) != 0) {
    }
    pthread_mutex_lock(&g_m);
    g_turn = 2 * i + 1;
    pthread_cond_broadcast(&g_c);
    while (g_turn != 2 * i + 2) pthread_cond_wait(&g_c, &g_m);
    pthread_mutex_unlock(&g_m);
  }
  CHECK(pthread_join(t, NULL) == 0);
  sem_destroy(&g_s1);
  sem_destroy(&g_s2);
}

int main(int argc, char** argv) {
  if (argc != 2) FATAL("usage: tls_sharing_kill_holder_prog ROUNDS");
  const int rounds = atoi(argv[1]);
  shim_test_start("tls_sharing_kill_holder_prog", 50);
  unsigned seed = (unsigned)getpid();
  for (int r = 0; r < rounds; ++r) {
    sem_init(&g_pair.a, 0, 0);
    sem_init(&g_pair.b, 0, 0);
    const pid_t ping = spawn_task(0, ping_main);
    const pid_t pong = spawn_task(1, pong_main);
    /* Once they have exchanged a while (both tasks parked and unparked
     * many times), a random 0-100 us later: a sleep lets them run where
     * the CPUs are few. */
    const long start = __atomic_load_n(&g_exchanges, __ATOMIC_RELAXED);
    while (__atomic_load_n(&g_exchanges, __ATOMIC_RELAXED) - start < 20) {
      shim_sleep_us(50);
    }
    const int64_t until = shim_now_ns(CLOCK_MONOTONIC) + rand_r(&seed) % 100000;
    while (shim_now_ns(CLOCK_MONOTONIC) < until) {
    }
    kill_and_reap(ping);
    kill_and_reap(pong);
    survivors_check();
  }
  printf("tls_sharing_kill_holder_prog: %d rounds, %ld exchanges\n", rounds,
         __atomic_load_n(&g_exchanges, __ATOMIC_RELAXED));
  return shim_test_finish();
}
