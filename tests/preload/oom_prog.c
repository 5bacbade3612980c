/* The lot's first use with the address space exhausted (docs/design.md section
 * 6, invariant 7). Worker threads are created first (their stacks need memory)
 * and wait on a pipe without touching any lock; then the program caps RLIMIT_AS
 * at its current size plus a little and maps the rest away, and only then takes
 * its first lock: the lot must initialize, register every thread and serve
 * mutexes, condition variables and semaphores with no memory to grow its table
 * into, as glibc's locks, which need none, do. The exhausted memory is given
 * back before exit, so that PARKLOT_STATS=1 can report
 * (tests/preload/config_env_test.sh checks that report).
 *
 *   oom_prog [--keep-exhausted]   (the report then runs without memory) */
#include <sys/mman.h>
#include <sys/resource.h>

#include "tests/preload/shim_test_util.h"
#include "tests/preload/address_space_util.h"

#include <semaphore.h>

enum { kWorkers = 24, kIters = 2000 };

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static long g_counter, g_turn;
static sem_t g_sem;
static int g_go[2];

static void* worker(void* arg) {
  const long me = (long)arg;
  char c;
  if (read(g_go[0], &c, 1) != 1) FATAL("read: %s", strerror(errno));
  for (int i = 0; i < kIters; ++i) {
    CHECK_RC(pthread_mutex_lock(&g_mu), 0);
    ++g_counter;
    if (i % 100 == 0) sched_yield(); /* contention: others park */
    CHECK_RC(pthread_mutex_unlock(&g_mu), 0);
  }
  /* A condvar relay: each worker waits for its turn. */
  CHECK_RC(pthread_mutex_lock(&g_mu), 0);
  while (g_turn != me) CHECK_RC(pthread_cond_wait(&g_cv, &g_mu), 0);
  ++g_turn;
  CHECK_RC(pthread_cond_broadcast(&g_cv), 0);
  CHECK_RC(pthread_mutex_unlock(&g_mu), 0);
  CHECK_RC(sem_post(&g_sem), 0);
  return NULL;
}

int main(int argc, char** argv) {
  shim_test_start("oom_prog", 60);
  const int keep = argc > 1 && strcmp(argv[1], "--keep-exhausted") == 0;
  if (pipe(g_go) != 0) FATAL("pipe");
  CHECK_RC(sem_init(&g_sem, 0, 0), 0);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 128 << 10);
  pthread_t t[kWorkers];
  for (long i = 0; i < kWorkers; ++i) {
    if (pthread_create(&t[i], &attr, worker, (void*)i) != 0) FATAL("pthread_create");
  }
  struct rlimit old;
  const long filled = shim_exhaust_address_space(&old, 0);
  void* probe = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(probe == MAP_FAILED);
  printf("address space exhausted (%ld MiB mapped away); first lock\n",
         filled >> 20);
  /* The first lock of the process, with no memory left. */
  CHECK_RC(pthread_mutex_lock(&g_mu), 0);
  CHECK_RC(pthread_mutex_unlock(&g_mu), 0);
  char go[kWorkers] = {0};
  if (write(g_go[1], go, kWorkers) != kWorkers) FATAL("write");
  for (int i = 0; i < kWorkers; ++i) CHECK_RC(sem_wait(&g_sem), 0);
  for (int i = 0; i < kWorkers; ++i) CHECK_RC(pthread_join(t[i], NULL), 0);
  CHECK(g_counter == (long)kWorkers * kIters);
  CHECK(g_turn == kWorkers);
  if (!keep) shim_give_back_address_space(&old);
  printf("%d workers: %ld lock acquisitions counted\n", kWorkers, g_counter);
  return shim_test_finish();
}
