/* A process for gdb_view_test to look at: threads that hold and wait for
 * locks, then stand still.
 *   - lock_a and lock_b: "crossed_a" holds lock_a and waits for lock_b,
 *     "crossed_b" holds lock_b and waits for lock_a (a deadlock);
 *   - held_rwlock: main holds it for writing, "rwlock_writer" waits;
 *   - idle_cond: "cond_waiter" waits on it (nobody holds a condvar).
 * Once every waiter sleeps (its /proc state is S), prints one line
 *   ready PID crossed_a=TID crossed_b=TID rwlock_writer=TID main=TID
 * and sleeps until killed (at most 120 s). */
#define _GNU_SOURCE 1
#include <semaphore.h>
#include <sys/types.h>

#include "tests/preload/shim_test_util.h"

pthread_mutex_t lock_a = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t lock_b = PTHREAD_MUTEX_INITIALIZER;
pthread_rwlock_t held_rwlock = PTHREAD_RWLOCK_INITIALIZER;
pthread_cond_t idle_cond = PTHREAD_COND_INITIALIZER;
pthread_mutex_t idle_cond_mutex = PTHREAD_MUTEX_INITIALIZER;

static sem_t g_started;
static int g_tid[3];

static void* CrossedA(void* arg) {
  (void)arg;
  g_tid[0] = (int)gettid();
  pthread_mutex_lock(&lock_a);
  sem_post(&g_started);
  while (__atomic_load_n(&lock_b.__data.__lock, __ATOMIC_ACQUIRE) == 0) {
    sched_yield();
  }
  pthread_mutex_lock(&lock_b);
  return NULL;
}

static void* CrossedB(void* arg) {
  (void)arg;
  g_tid[1] = (int)gettid();
  pthread_mutex_lock(&lock_b);
  sem_post(&g_started);
  while (__atomic_load_n(&lock_a.__data.__lock, __ATOMIC_ACQUIRE) == 0) {
    sched_yield();
  }
  pthread_mutex_lock(&lock_a);
  return NULL;
}

static void* RwlockWriter(void* arg) {
  (void)arg;
  g_tid[2] = (int)gettid();
  sem_post(&g_started);
  pthread_rwlock_wrlock(&held_rwlock);
  return NULL;
}

static void* CondWaiter(void* arg) {
  (void)arg;
  pthread_mutex_lock(&idle_cond_mutex);
  sem_post(&g_started);
  for (;;) pthread_cond_wait(&idle_cond, &idle_cond_mutex);
  return NULL;
}

/* Whether every thread of the process but the caller sleeps. */
static int OthersAsleep(void) {
  char path[64];
  int asleep = 0;
  for (int i = 0; i < 3; ++i) {
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", g_tid[i]);
    FILE* f = fopen(path, "r");
    if (f == NULL) return 0;
    char buf[512];
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char* close = strrchr(buf, ')');
    if (close != NULL && close[1] == ' ' && close[2] == 'S') ++asleep;
  }
  return asleep == 3;
}

int main(void) {
  shim_test_start("gdb_view", 150);
  sem_init(&g_started, 0, 0);
  CHECK_RC(pthread_rwlock_wrlock(&held_rwlock), 0);
  shim_spawn(CrossedA, NULL);
  shim_spawn(CrossedB, NULL);
  shim_spawn(RwlockWriter, NULL);
  shim_spawn(CondWaiter, NULL);
  for (int i = 0; i < 4; ++i) sem_wait(&g_started);
  while (!OthersAsleep()) shim_sleep_ms(10);
  shim_sleep_ms(100);  /* the condvar waiter, which has no tid recorded */
  printf("ready %d crossed_a=%d crossed_b=%d rwlock_writer=%d main=%d\n",
         (int)getpid(), g_tid[0], g_tid[1], g_tid[2], (int)gettid());
  fflush(stdout);
  shim_sleep_ms(120000);
  return 1;
}
