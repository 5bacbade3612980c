/* fork() with parked waiters. While threads are parked on mutexes and
 * condition variables, other threads keep the parking lot's buckets busy
 * (lock traffic, condvar ping-pong, threads created and ending), the
 * program forks repeatedly, from the main thread and from other threads.
 * Each child checks the program's pthread_atfork handlers ran in POSIX
 * order (prepare in reverse registration order, child in order), then
 * creates threads that use fresh mutexes and condvars and existing ones
 * that were unlocked at the fork (one with parked waiters in the parent,
 * released by the child handler; a condvar whose waiters stayed in the
 * parent), and exits 0. The parent checks its handlers' order and, at the
 * end, that every parked waiter got its lock or notification.
 *
 *   fork_prog [FORKS]   (default 400 forks) */
#include "tests/preload/shim_test_util.h"

#include <semaphore.h>
#include <sys/wait.h>

enum { kLockWaiters = 4, kCondWaiters = 4, kTraffic = 4, kTrafficLocks = 8,
       kChurn = 6, kChildThreads = 4, kChildIters = 5000 };

/* The atfork log: handlers append; only the forking thread runs them. */
static char g_log[64];
static int g_log_len;
static void log_add(char kind, int i) {
  if (g_log_len + 2 < (int)sizeof(g_log)) {
    g_log[g_log_len++] = kind;
    g_log[g_log_len++] = (char)('0' + i);
    g_log[g_log_len] = '\0';
  }
}

/* Locked by the first prepare handler (so it is held across fork() with
 * traffic threads parked on it), released by the parent/child handlers.
 * A normal mutex: glibc's error-checking and recursive kinds refuse the
 * child's unlock (the owner's thread id changed), the shim's do not. */
static pthread_mutex_t g_app_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_parent_unlock_rc, g_child_unlock_rc;

static void prepare1(void) {
  log_add('P', 1);
  const int rc = pthread_mutex_lock(&g_app_lock);
  if (rc != 0) log_add('!', 1);
}
static void prepare2(void) { log_add('P', 2); }
static void prepare3(void) { log_add('P', 3); }
static void parent1(void) {
  log_add('p', 1);
  g_parent_unlock_rc = pthread_mutex_unlock(&g_app_lock);
}
static void parent2(void) { log_add('p', 2); }
static void parent3(void) { log_add('p', 3); }
static void child1(void) {
  log_add('c', 1);
  g_child_unlock_rc = pthread_mutex_unlock(&g_app_lock);
}
static void child2(void) { log_add('c', 2); }
static void child3(void) { log_add('c', 3); }

/* Parked on a mutex: a holder keeps it until the end. */
static pthread_mutex_t g_held = PTHREAD_MUTEX_INITIALIZER;
static sem_t g_release_held;
static int g_held_got[kLockWaiters];

/* Parked on a condvar (its mutex stays unlocked while they wait). */
static pthread_mutex_t g_cv_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_cv_go, g_cv_waiting;
static int g_cv_rc[kCondWaiters];

/* Traffic. */
static volatile int g_stop;
static pthread_mutex_t g_traffic[kTrafficLocks];
static long g_traffic_count[kTrafficLocks];
static long g_traffic_mine[kTraffic];
static pthread_mutex_t g_pp_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_pp_cv = PTHREAD_COND_INITIALIZER;
static long g_pp_turn;
static long g_churned;

/* Used only by children: zero-filled, so fresh in every child. */
static pthread_mutex_t g_child_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_child_cv = PTHREAD_COND_INITIALIZER;
static long g_child_count;
static int g_child_go;

static void* holder(void* arg) {
  (void)arg;
  CHECK_RC(pthread_mutex_lock(&g_held), 0);
  while (sem_wait(&g_release_held) != 0) {
  }
  CHECK_RC(pthread_mutex_unlock(&g_held), 0);
  return NULL;
}

static void* lock_waiter(void* arg) {
  const int i = (int)(intptr_t)arg;
  CHECK_RC(pthread_mutex_lock(&g_held), 0);
  g_held_got[i] = 1;
  CHECK_RC(pthread_mutex_unlock(&g_held), 0);
  return NULL;
}

static void* cond_waiter(void* arg) {
  const int i = (int)(intptr_t)arg;
  CHECK_RC(pthread_mutex_lock(&g_cv_lock), 0);
  ++g_cv_waiting;
  int rc = 0;
  while (!g_cv_go && rc == 0) {
    if (i & 1) {
      struct timespec dl = shim_deadline_ms(CLOCK_REALTIME, 120000);
      rc = pthread_cond_timedwait(&g_cv, &g_cv_lock, &dl);
    } else {
      rc = pthread_cond_wait(&g_cv, &g_cv_lock);
    }
  }
  g_cv_rc[i] = rc;
  CHECK_RC(pthread_mutex_unlock(&g_cv_lock), 0);
  return NULL;
}

static void* traffic(void* arg) {
  const int me = (int)(intptr_t)arg;
  uint32_t rng = 777u + (uint32_t)me;
  while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
    const int k = (int)(shim_rand(&rng) % kTrafficLocks);
    CHECK_RC(pthread_mutex_lock(&g_traffic[k]), 0);
    ++g_traffic_count[k];
    ++g_traffic_mine[me];
    CHECK_RC(pthread_mutex_unlock(&g_traffic[k]), 0);
    if ((shim_rand(&rng) & 63) == 0) {
      CHECK_RC(pthread_mutex_lock(&g_app_lock), 0);
      CHECK_RC(pthread_mutex_unlock(&g_app_lock), 0);
    }
    /* Ping-pong on a condvar between the traffic threads. */
    if ((shim_rand(&rng) & 15) == 0) {
      CHECK_RC(pthread_mutex_lock(&g_pp_lock), 0);
      const long turn = g_pp_turn;
      struct timespec dl = shim_deadline_ms(CLOCK_REALTIME, 2);
      int rc = 0;
      while (g_pp_turn == turn && rc == 0 && !g_stop) {
        rc = pthread_cond_timedwait(&g_pp_cv, &g_pp_lock, &dl);
      }
      CHECK(rc == 0 || rc == ETIMEDOUT);
      ++g_pp_turn;
      CHECK_RC(pthread_cond_signal(&g_pp_cv), 0);
      CHECK_RC(pthread_mutex_unlock(&g_pp_lock), 0);
    }
  }
  return NULL;
}

/* Short-lived threads register with the lot (and its RCU library) at
 * their first lock and end at any time, forks included: a thread's exit
 * runs liburcu-bp's exit destructor, whose init_lock no urcu fork handler
 * covers (the lot's fork handler waits for it). */
static void* short_lived(void* arg) {
  (void)arg;
  CHECK_RC(pthread_mutex_lock(&g_pp_lock), 0);
  ++g_churned;
  CHECK_RC(pthread_cond_broadcast(&g_pp_cv), 0);
  CHECK_RC(pthread_mutex_unlock(&g_pp_lock), 0);
  return NULL;
}

static void* churn(void* arg) {
  (void)arg;
  while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
    pthread_join(shim_spawn(short_lived, NULL), NULL);
  }
  return NULL;
}

/* ---- the child ---------------------------------------------------------- */

static int g_child_failures;
#define CHILD_CHECK(cond)                                                   \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fprintf(stderr, "FAIL (child %d) %s:%d: %s\n", (int)getpid(),         \
              __FILE__, __LINE__, #cond);                                   \
      __atomic_fetch_add(&g_child_failures, 1, __ATOMIC_RELAXED);           \
    }                                                                       \
  } while (0)

static void* child_thread(void* arg) {
  const int me = (int)(intptr_t)arg;
  for (int i = 0; i < kChildIters; ++i) {
    CHILD_CHECK(pthread_mutex_lock(&g_child_lock) == 0);
    ++g_child_count;
    CHILD_CHECK(pthread_mutex_unlock(&g_child_lock) == 0);
    if ((i & 255) == 0) {
      CHILD_CHECK(pthread_mutex_lock(&g_app_lock) == 0);
      CHILD_CHECK(pthread_mutex_unlock(&g_app_lock) == 0);
    }
  }
  /* Wait on the parent's condvar (its parent-side waiters do not exist
   * here) and on a fresh one. */
  pthread_cond_t* cv = (me & 1) ? &g_cv : &g_child_cv;
  pthread_mutex_t* lock = (me & 1) ? &g_cv_lock : &g_child_lock;
  CHILD_CHECK(pthread_mutex_lock(lock) == 0);
  while (!g_child_go) {
    struct timespec dl = shim_deadline_ms(CLOCK_REALTIME, 20000);
    const int rc = pthread_cond_timedwait(cv, lock, &dl);
    CHILD_CHECK(rc == 0);
    if (rc != 0) break;
  }
  CHILD_CHECK(pthread_mutex_unlock(lock) == 0);
  return NULL;
}

static void child_main(const char* want_log) {
  shim_test_watchdog(30);
  g_shim_test_failures = 0;  /* the parent's count came along */
  if (strcmp(g_log, want_log) != 0) {
    fprintf(stderr, "FAIL (child): atfork order \"%s\", want \"%s\"\n", g_log, want_log);
    _exit(1);
  }
  CHILD_CHECK(g_child_unlock_rc == 0);
  /* The lock the prepare handler took (with waiters parked on it in the
   * parent) is free. */
  CHILD_CHECK(pthread_mutex_trylock(&g_app_lock) == 0);
  CHILD_CHECK(pthread_mutex_trylock(&g_app_lock) == EBUSY);
  CHILD_CHECK(pthread_mutex_unlock(&g_app_lock) == 0);
  CHILD_CHECK(pthread_mutex_lock(&g_app_lock) == 0);
  CHILD_CHECK(pthread_mutex_unlock(&g_app_lock) == 0);
  /* Held by a thread that does not exist here. */
  const int held_rc = pthread_mutex_trylock(&g_held);
  CHILD_CHECK(held_rc == EBUSY);
  if (held_rc != EBUSY) fprintf(stderr, "  trylock(g_held) = %d, word %#x\n", held_rc, g_held.__data.__lock);
  /* The condvar's mutex was unlocked at the fork: its waiters sleep in the
   * cond wait, and nothing else takes it. */
  CHILD_CHECK(pthread_mutex_trylock(&g_cv_lock) == 0);
  CHILD_CHECK(pthread_mutex_unlock(&g_cv_lock) == 0);

  pthread_t t[kChildThreads];
  for (int i = 0; i < kChildThreads; ++i) t[i] = shim_spawn(child_thread, (void*)(intptr_t)i);
  shim_sleep_ms(2);
  CHILD_CHECK(pthread_mutex_lock(&g_cv_lock) == 0);
  CHILD_CHECK(pthread_mutex_lock(&g_child_lock) == 0);
  g_child_go = 1;
  CHILD_CHECK(pthread_cond_broadcast(&g_cv) == 0);
  CHILD_CHECK(pthread_cond_broadcast(&g_child_cv) == 0);
  CHILD_CHECK(pthread_mutex_unlock(&g_child_lock) == 0);
  CHILD_CHECK(pthread_mutex_unlock(&g_cv_lock) == 0);
  for (int i = 0; i < kChildThreads; ++i) pthread_join(t[i], NULL);
  CHILD_CHECK(g_child_count == (long)kChildThreads * kChildIters);
  fflush(NULL);
  _exit(g_child_failures == 0 && g_shim_test_failures == 0 ? 0 : 1);
}

/* ---- forking ------------------------------------------------------------ */

/* Forks once and checks the parent's side; returns the child's pid. */
static pid_t fork_and_check(void) {
  g_log_len = 0;
  g_log[0] = '\0';
  g_parent_unlock_rc = g_child_unlock_rc = -1;
  const pid_t pid = fork();
  if (pid < 0) FATAL("fork: %s", strerror(errno));
  if (pid == 0) child_main("P3P2P1c1c2c3");
  if (strcmp(g_log, "P3P2P1p1p2p3") != 0) {
    SHIM_FAIL("parent: atfork order \"%s\", want \"P3P2P1p1p2p3\"", g_log);
  }
  CHECK_RC(g_parent_unlock_rc, 0);
  return pid;
}

static void* fork_from_thread(void* arg) {
  *(pid_t*)arg = fork_and_check();
  return NULL;
}

static void reap(pid_t pid) {
  int status = 0;
  const int64_t deadline = shim_now_ns(CLOCK_MONOTONIC) + 40 * 1000000000LL;
  for (;;) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0) FATAL("waitpid: %s", strerror(errno));
    if (shim_now_ns(CLOCK_MONOTONIC) > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      SHIM_FAIL("child %d hung", (int)pid);
      return;
    }
    shim_sleep_ms(1);
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    SHIM_FAIL("child %d: %s %d", (int)pid,
              WIFEXITED(status) ? "exit status" : "killed by signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  }
}

int main(int argc, char** argv) {
  shim_test_start("fork", 110);
  const int forks = argc > 1 ? atoi(argv[1]) : 400;
  CHECK_RC(pthread_atfork(prepare1, parent1, child1), 0);
  CHECK_RC(pthread_atfork(prepare2, parent2, child2), 0);
  CHECK_RC(pthread_atfork(prepare3, parent3, child3), 0);
  for (int i = 0; i < kTrafficLocks; ++i) CHECK_RC(pthread_mutex_init(&g_traffic[i], NULL), 0);
  sem_init(&g_release_held, 0, 0);

  pthread_t h = shim_spawn(holder, NULL);
  shim_sleep_ms(5);
  pthread_t lw[kLockWaiters], cw[kCondWaiters], tr[kTraffic];
  for (int i = 0; i < kLockWaiters; ++i) lw[i] = shim_spawn(lock_waiter, (void*)(intptr_t)i);
  for (int i = 0; i < kCondWaiters; ++i) cw[i] = shim_spawn(cond_waiter, (void*)(intptr_t)i);
  for (;;) {  /* every cond waiter waits */
    CHECK_RC(pthread_mutex_lock(&g_cv_lock), 0);
    const int n = g_cv_waiting;
    CHECK_RC(pthread_mutex_unlock(&g_cv_lock), 0);
    if (n == kCondWaiters) break;
    shim_sleep_ms(1);
  }
  for (int i = 0; i < kTraffic; ++i) tr[i] = shim_spawn(traffic, (void*)(intptr_t)i);
  /* Threads starting and ending all the time: each registers with the
   * lot (and its RCU library) at its first lock and leaves at exit, which
   * takes locks that fork() handlers take too. */
  pthread_t ch[kChurn];
  for (int i = 0; i < kChurn; ++i) ch[i] = shim_spawn(churn, NULL);
  shim_sleep_ms(10);

  for (int f = 0; f < forks; ++f) {
    pid_t pid;
    if (f % 4 == 3) {
      pthread_join(shim_spawn(fork_from_thread, &pid), NULL);
    } else {
      pid = fork_and_check();
    }
    reap(pid);
    /* The lock the prepare handler held is usable in the parent too. */
    CHECK_RC(pthread_mutex_lock(&g_app_lock), 0);
    CHECK_RC(pthread_mutex_unlock(&g_app_lock), 0);
  }

  __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
  for (int i = 0; i < kTraffic; ++i) pthread_join(tr[i], NULL);
  for (int i = 0; i < kChurn; ++i) pthread_join(ch[i], NULL);
  CHECK_RC(pthread_mutex_lock(&g_cv_lock), 0);
  g_cv_go = 1;
  CHECK_RC(pthread_cond_broadcast(&g_cv), 0);
  CHECK_RC(pthread_mutex_unlock(&g_cv_lock), 0);
  sem_post(&g_release_held);
  pthread_join(h, NULL);
  for (int i = 0; i < kLockWaiters; ++i) {
    pthread_join(lw[i], NULL);
    CHECK(g_held_got[i]);
  }
  for (int i = 0; i < kCondWaiters; ++i) {
    pthread_join(cw[i], NULL);
    CHECK_RC(g_cv_rc[i], 0);
  }
  long total = 0, mine = 0;
  for (int i = 0; i < kTrafficLocks; ++i) total += g_traffic_count[i];
  for (int i = 0; i < kTraffic; ++i) mine += g_traffic_mine[i];
  CHECK(total == mine);
  printf("fork: %d forks; %ld traffic locks, %ld ping-pongs, %ld short-lived threads\n",
         forks, total, g_pp_turn, g_churned);
  return shim_test_finish();
}
