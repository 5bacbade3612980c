/* pthread_once and C11 call_once across fork(), as glibc does them: a child
 * forked while a thread of the parent runs an init routine (no thread of
 * the child will ever finish it) runs the routine itself, exactly once; a
 * once completed before the fork stays completed; the parent is not
 * disturbed. Also with waiters parked in pthread_once at the fork, for a
 * chain of forks (each child forks again while its own thread runs an
 * init), and for forks at random moments around an init. Children report
 * by exit status; a hung child is killed by its alarm.
 *
 *   once_fork_prog [RACE_ROUNDS]   (default 300) */
#include <sys/wait.h>
#include <threads.h>

#include "tests/preload/shim_test_util.h"

/* Waits for a forked child; returns its exit status, or 100 + the signal
 * that ended it (SIGALRM = it hung). */
static int wait_child(pid_t pid) {
  int st = 0;
  if (waitpid(pid, &st, 0) != pid) return 99;
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  return 100 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* In a child: a hang ends it by SIGALRM (not by the parent's watchdog
 * handler, which would exit with a status of its own). */
static void child_alarm(unsigned seconds) {
  signal(SIGALRM, SIG_DFL);
  alarm(seconds);
}

/* --- An init routine held in progress by a thread of the parent. ------- */

static volatile int g_started, g_finish, g_parent_runs, g_child_runs;

static void slow_init(void) {
  __atomic_fetch_add(&g_parent_runs, 1, __ATOMIC_SEQ_CST);
  __atomic_store_n(&g_started, 1, __ATOMIC_SEQ_CST);
  while (!__atomic_load_n(&g_finish, __ATOMIC_SEQ_CST)) shim_sleep_us(200);
}
static void child_init(void) {
  __atomic_fetch_add(&g_child_runs, 1, __ATOMIC_SEQ_CST);
}
static void never_init(void) {
  __atomic_fetch_add(&g_child_runs, 100, __ATOMIC_SEQ_CST);
}

static pthread_once_t g_once;
static once_flag g_flag;
static pthread_once_t g_done_once = PTHREAD_ONCE_INIT;
static int g_use_c11;

static void call_the_once(void (*fn)(void)) {
  if (g_use_c11) {
    call_once(&g_flag, fn);
  } else {
    pthread_once(&g_once, fn);
  }
}

static void* run_slow_init(void* arg) {
  (void)arg;
  call_the_once(slow_init);
  return NULL;
}

static volatile int g_waiters_in;
static void* wait_in_once(void* arg) {
  (void)arg;
  __atomic_fetch_add(&g_waiters_in, 1, __ATOMIC_SEQ_CST);
  call_the_once(never_init); /* returns when slow_init finishes */
  return NULL;
}

/* In the child: the in-progress once runs child_init, once. */
static int child_checks(void) {
  child_alarm(10);
  call_the_once(child_init);
  call_the_once(child_init);
  if (g_child_runs != 1) return 2;
  pthread_once(&g_done_once, never_init); /* completed before the fork */
  if (g_child_runs != 1) return 3;
  return 0;
}

static void fork_during_init(int c11, int waiters) {
  printf("fork while %s runs, %d waiter(s) parked\n",
         c11 ? "call_once" : "pthread_once", waiters);
  const pthread_once_t fresh_once = PTHREAD_ONCE_INIT;
  const once_flag fresh_flag = ONCE_FLAG_INIT;
  g_once = fresh_once;
  g_flag = fresh_flag;
  g_use_c11 = c11;
  g_started = g_finish = g_parent_runs = g_child_runs = g_waiters_in = 0;
  pthread_t runner = shim_spawn(run_slow_init, NULL);
  while (!__atomic_load_n(&g_started, __ATOMIC_SEQ_CST)) shim_sleep_us(200);
  pthread_t w[4];
  for (int i = 0; i < waiters; ++i) w[i] = shim_spawn(wait_in_once, NULL);
  while (__atomic_load_n(&g_waiters_in, __ATOMIC_SEQ_CST) < waiters) {
    shim_sleep_us(200);
  }
  shim_sleep_ms(20); /* let them reach their wait */
  const pid_t pid = fork();
  if (pid < 0) FATAL("fork: %s", strerror(errno));
  if (pid == 0) _exit(child_checks());
  const int rc = wait_child(pid);
  if (rc != 0) SHIM_FAIL("child exit %d (%s)", rc, rc == 100 + SIGALRM ? "hung in the once" : "check failed");
  __atomic_store_n(&g_finish, 1, __ATOMIC_SEQ_CST);
  CHECK_RC(pthread_join(runner, NULL), 0);
  for (int i = 0; i < waiters; ++i) CHECK_RC(pthread_join(w[i], NULL), 0);
  CHECK(g_parent_runs == 1);
  CHECK(g_child_runs == 0);
}

/* --- A chain: each child forks again while its own thread runs an init. */

static int chain_level(int level, int levels) {
  if (level == levels) return 0;
  const pthread_once_t fresh_once = PTHREAD_ONCE_INIT;
  g_once = fresh_once;
  g_use_c11 = 0;
  g_started = g_finish = g_child_runs = 0;
  pthread_t runner;
  if (pthread_create(&runner, NULL, run_slow_init, NULL) != 0) return 40;
  while (!__atomic_load_n(&g_started, __ATOMIC_SEQ_CST)) shim_sleep_us(200);
  const pid_t pid = fork();
  if (pid < 0) return 41;
  if (pid == 0) {
    child_alarm(20);
    pthread_once(&g_once, child_init);
    if (g_child_runs != 1) _exit(42);
    _exit(chain_level(level + 1, levels));
  }
  const int rc = wait_child(pid);
  __atomic_store_n(&g_finish, 1, __ATOMIC_SEQ_CST);
  pthread_join(runner, NULL);
  return rc;
}

/* --- Forks at random moments around an init. -------------------------- */

static pthread_once_t g_race_once;
static volatile int g_race_runs, g_race_child_runs;
static uint32_t g_race_spin;
static void race_init(void) {
  for (uint32_t i = 0; i < g_race_spin; ++i) __asm__ volatile("pause");
  __atomic_fetch_add(&g_race_runs, 1, __ATOMIC_SEQ_CST);
}
static void race_child_init(void) {
  __atomic_fetch_add(&g_race_child_runs, 1, __ATOMIC_SEQ_CST);
}
static void* race_runner(void* arg) {
  (void)arg;
  pthread_once(&g_race_once, race_init);
  return NULL;
}

static void fork_races(int rounds) {
  printf("%d forks at random moments around pthread_once\n", rounds);
  uint32_t rng = 12345;
  int ran[2] = {0, 0};
  for (int r = 0; r < rounds; ++r) {
    const pthread_once_t fresh = PTHREAD_ONCE_INIT;
    g_race_once = fresh;
    g_race_runs = g_race_child_runs = 0;
    g_race_spin = shim_rand(&rng) % 100000;
    const uint32_t delay = shim_rand(&rng) % 100000;
    pthread_t t = shim_spawn(race_runner, NULL);
    for (uint32_t i = 0; i < delay; ++i) __asm__ volatile("pause");
    const pid_t pid = fork();
    if (pid < 0) FATAL("fork: %s", strerror(errno));
    if (pid == 0) {
      /* The init had completed at the fork (the child's routine does not
       * run) or it had not (the child's runs, once): never twice, never
       * a hang. */
      child_alarm(10);
      pthread_once(&g_race_once, race_child_init);
      pthread_once(&g_race_once, race_child_init);
      _exit(g_race_child_runs <= 1 ? 10 + g_race_child_runs : 2);
    }
    const int rc = wait_child(pid);
    if (rc == 10 || rc == 11) {
      ++ran[rc - 10];
    } else {
      SHIM_FAIL("round %d: child exit %d (%s)", r, rc,
                rc == 100 + SIGALRM ? "hung" : "ran its routine twice");
    }
    CHECK_RC(pthread_join(t, NULL), 0);
    CHECK(g_race_runs == 1);
  }
  printf("  children that found it done: %d, that ran it: %d\n", ran[0],
         ran[1]);
}

int main(int argc, char** argv) {
  shim_test_start("once_fork_prog", 120);
  const int rounds = argc > 1 ? atoi(argv[1]) : 300;
  pthread_once(&g_done_once, child_init);
  g_child_runs = 0;
  for (int c11 = 0; c11 <= 1; ++c11) {
    fork_during_init(c11, 0);
    fork_during_init(c11, 3);
  }
  printf("a chain of 4 forks, each during an init\n");
  const int chain = chain_level(0, 4);
  if (chain != 0) SHIM_FAIL("fork chain: exit %d", chain);
  fork_races(rounds);
  return shim_test_finish();
}
