/* Threads that cannot get a registry index (docs/design.md section 3.9 and
 * section 6, invariant 7). The first 4,096 registry indices are static
 * storage; the next 4,096 need a mapped chunk. This program fills the first
 * chunk with live registered threads (the main thread and 4,094 workers,
 * parked on a semaphore), caps RLIMIT_AS at its current size and maps the
 * rest away (leaving a little for glibc's small allocations, less than the
 * chunk), then starts threads on stacks it mapped beforehand. Their first
 * lock registers them with no chunk to map: they must run without an index,
 * as glibc's locks run without any registry, and every consumer of the
 * index must still be right for them:
 *   - lock owners (error-checking and recursive mutexes, rwlock writers):
 *     EDEADLK, EPERM, EBUSY as glibc;
 *   - parks and wake-ups on their own records: a contended mutex, a condvar
 *     relay, a semaphore, an rwlock, between such threads and indexed ones;
 *   - fork from such a thread (the child resets the registry);
 *   - their exit, and a thread registered after memory is back.
 * The shim says so in one line on stderr, once (checked here). Before the
 * fix, the first late thread's first lock aborted the process.
 *
 *   registry_exhaust_prog */
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "tests/preload/shim_test_util.h"
#include "tests/preload/address_space_util.h"

#include <semaphore.h>

enum {
  kWorkers = 4094,     /* with the main thread: registry indices 1..4095 */
  kLate = 3,           /* threads past the first chunk */
  kStack = 64 << 10,   /* per thread, program-supplied */
  kIters = 20000,
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static pthread_rwlock_t g_rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_mutex_t g_check_mu;  /* error-checking */
static pthread_mutex_t g_rec_mu;    /* recursive */
static sem_t g_ready, g_release, g_step, g_owner, g_back;
static long g_counter, g_turn, g_rw_value;

static void* worker(void* arg) {
  (void)arg;
  CHECK_RC(pthread_mutex_lock(&g_mu), 0); /* registers */
  CHECK_RC(pthread_mutex_unlock(&g_mu), 0);
  CHECK_RC(sem_post(&g_ready), 0);
  CHECK_RC(sem_wait(&g_release), 0); /* parked, live, until the end */
  return NULL;
}

/* The owner checks, on the first late thread, with main as the other. */
static void owner_checks(void) {
  /* An uncontended rwlock: the lock the report's reproduction took. */
  CHECK_RC(pthread_rwlock_rdlock(&g_rw), 0);
  CHECK_RC(pthread_rwlock_unlock(&g_rw), 0);
  CHECK_RC(pthread_rwlock_wrlock(&g_rw), 0);
  CHECK_RC(pthread_rwlock_wrlock(&g_rw), EDEADLK);
  CHECK_RC(pthread_rwlock_unlock(&g_rw), 0);
  CHECK_RC(pthread_mutex_lock(&g_check_mu), 0);
  CHECK_RC(pthread_mutex_lock(&g_check_mu), EDEADLK);
  CHECK_RC(pthread_mutex_lock(&g_rec_mu), 0);
  CHECK_RC(pthread_mutex_lock(&g_rec_mu), 0);
  CHECK_RC(sem_post(&g_owner), 0); /* main: not the owner of either */
  CHECK_RC(sem_wait(&g_back), 0);
  CHECK_RC(pthread_mutex_unlock(&g_rec_mu), 0);
  CHECK_RC(pthread_mutex_unlock(&g_rec_mu), 0);
  CHECK_RC(pthread_mutex_unlock(&g_rec_mu), EPERM);
  CHECK_RC(pthread_mutex_unlock(&g_check_mu), 0);
  CHECK_RC(pthread_mutex_unlock(&g_check_mu), EPERM);
  /* fork from a thread without an index: the child's lot works. */
  const pid_t pid = fork();
  if (pid < 0) {
    SHIM_FAIL("fork: %s", strerror(errno));
  } else if (pid == 0) {
    int ok = pthread_mutex_lock(&g_check_mu) == 0 &&
             pthread_mutex_lock(&g_check_mu) == EDEADLK &&
             pthread_mutex_unlock(&g_check_mu) == 0 &&
             pthread_rwlock_wrlock(&g_rw) == 0 &&
             pthread_rwlock_unlock(&g_rw) == 0;
    _exit(ok ? 0 : 1);
  } else {
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
}

static void* late(void* arg) {
  const long me = (long)arg;
  if (me == 0) owner_checks();
  CHECK_RC(sem_wait(&g_step), 0); /* all late threads start together */
  for (int i = 0; i < kIters; ++i) {
    CHECK_RC(pthread_mutex_lock(&g_mu), 0);
    ++g_counter;
    if (i % 64 == 0) sched_yield(); /* contention: others park */
    CHECK_RC(pthread_mutex_unlock(&g_mu), 0);
    if (i % 16 == 0) {
      CHECK_RC(pthread_rwlock_wrlock(&g_rw), 0);
      ++g_rw_value;
      CHECK_RC(pthread_rwlock_unlock(&g_rw), 0);
      CHECK_RC(pthread_rwlock_rdlock(&g_rw), 0);
      CHECK(g_rw_value > 0);
      CHECK_RC(pthread_rwlock_unlock(&g_rw), 0);
    }
  }
  /* A condvar relay with main (turn kLate): each waits for its turn. */
  CHECK_RC(pthread_mutex_lock(&g_mu), 0);
  while (g_turn != me) CHECK_RC(pthread_cond_wait(&g_cv, &g_mu), 0);
  ++g_turn;
  CHECK_RC(pthread_cond_broadcast(&g_cv), 0);
  CHECK_RC(pthread_mutex_unlock(&g_mu), 0);
  return NULL;
}

static pthread_t start_on(char* stack, void* (*fn)(void*), long arg) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstack(&attr, stack, kStack);
  pthread_t t;
  const int rc = pthread_create(&t, &attr, fn, (void*)arg);
  pthread_attr_destroy(&attr);
  if (rc == EAGAIN && fn == worker) {
    /* A thread or process limit below 4,096 threads: not this test's. */
    printf("SKIP: pthread_create: EAGAIN (thread limit)\n");
    exit(77);
  }
  if (rc != 0) FATAL("pthread_create: %s", strerror(rc));
  return t;
}

int main(void) {
  shim_test_start("registry_exhaust_prog", 60);
  pthread_mutexattr_t ma;
  pthread_mutexattr_init(&ma);
  pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
  CHECK_RC(pthread_mutex_init(&g_check_mu, &ma), 0);
  pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
  CHECK_RC(pthread_mutex_init(&g_rec_mu, &ma), 0);
  CHECK_RC(sem_init(&g_ready, 0, 0), 0);
  CHECK_RC(sem_init(&g_release, 0, 0), 0);
  CHECK_RC(sem_init(&g_step, 0, 0), 0);
  CHECK_RC(sem_init(&g_owner, 0, 0), 0);
  CHECK_RC(sem_init(&g_back, 0, 0), 0);
  CHECK_RC(pthread_mutex_lock(&g_mu), 0); /* main registers first */
  CHECK_RC(pthread_mutex_unlock(&g_mu), 0);

  const size_t n = kWorkers + kLate;
  char* stacks = mmap(NULL, n * (size_t)kStack, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (stacks == MAP_FAILED) FATAL("mmap stacks: %s", strerror(errno));
  static pthread_t t[kWorkers + kLate];
  for (long i = 0; i < kWorkers; ++i) {
    t[i] = start_on(stacks + i * (size_t)kStack, worker, i);
  }
  for (int i = 0; i < kWorkers; ++i) CHECK_RC(sem_wait(&g_ready), 0);
  printf("%d workers registered and parked\n", kWorkers);

  /* The shim's line goes to a pipe while memory is short, to be counted. */
  int err_pipe[2];
  if (pipe(err_pipe) != 0) FATAL("pipe");
  fflush(stderr);
  const int saved_err = dup(STDERR_FILENO);
  dup2(err_pipe[1], STDERR_FILENO);

  struct rlimit old;
  shim_exhaust_address_space(&old, 128 << 10);
  void* probe = mmap(NULL, 304 << 10, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  const int chunk_fits = probe != MAP_FAILED;
  if (chunk_fits) munmap(probe, 304 << 10);

  for (long i = 0; i < kLate; ++i) {
    t[kWorkers + i] =
        start_on(stacks + (kWorkers + i) * (size_t)kStack, late, i);
  }
  /* Thread 0's owner checks: main owns neither of its locks. */
  CHECK_RC(sem_wait(&g_owner), 0);
  CHECK_RC(pthread_mutex_unlock(&g_check_mu), EPERM);
  CHECK_RC(pthread_mutex_unlock(&g_rec_mu), EPERM);
  CHECK_RC(pthread_mutex_trylock(&g_check_mu), EBUSY);
  CHECK_RC(pthread_mutex_trylock(&g_rec_mu), EBUSY);
  CHECK_RC(sem_post(&g_back), 0);
  for (int i = 0; i < kLate; ++i) CHECK_RC(sem_post(&g_step), 0);
  /* Main contends too, indexed among the unindexed. */
  for (int i = 0; i < kIters; ++i) {
    CHECK_RC(pthread_mutex_lock(&g_mu), 0);
    ++g_counter;
    CHECK_RC(pthread_mutex_unlock(&g_mu), 0);
  }
  CHECK_RC(pthread_mutex_lock(&g_mu), 0);
  while (g_turn != kLate) CHECK_RC(pthread_cond_wait(&g_cv, &g_mu), 0);
  CHECK_RC(pthread_mutex_unlock(&g_mu), 0);
  for (int i = 0; i < kLate; ++i) {
    CHECK_RC(pthread_join(t[kWorkers + i], NULL), 0);
  }
  shim_give_back_address_space(&old);

  fflush(stderr);
  dup2(saved_err, STDERR_FILENO);
  close(saved_err);
  close(err_pipe[1]);
  static char said[65536];
  size_t len = 0;
  ssize_t got;
  while (len < sizeof(said) - 1 &&
         (got = read(err_pipe[0], said + len, sizeof(said) - 1 - len)) > 0) {
    len += (size_t)got;
  }
  said[len] = '\0';
  close(err_pipe[0]);
  fputs(said, stderr);

  CHECK(!chunk_fits);
  CHECK(g_counter == (long)(kLate + 1) * kIters);
  CHECK(g_rw_value == (long)kLate * ((kIters + 15) / 16));
  CHECK(g_turn == kLate);
  if (!g_shim_test_glibc) {
    /* One line, once, whatever the number of threads without an index. */
    const char* line = strstr(said, "without a registry index");
    CHECK(line != NULL);
    CHECK(line == NULL || strstr(line + 1, "without a registry index") == NULL);
  }

  for (int i = 0; i < kWorkers; ++i) CHECK_RC(sem_post(&g_release), 0);
  for (int i = 0; i < kWorkers; ++i) CHECK_RC(pthread_join(t[i], NULL), 0);
  /* Memory is back: a new thread registers and locks. */
  pthread_t again;
  CHECK_RC(pthread_create(&again, NULL, worker, NULL), 0);
  CHECK_RC(sem_wait(&g_ready), 0);
  CHECK_RC(sem_post(&g_release), 0);
  CHECK_RC(pthread_join(again, NULL), 0);
  munmap(stacks, n * (size_t)kStack);
  printf("%d late threads ran without a registry index; %ld lock "
         "acquisitions counted\n", kLate, g_counter);
  return shim_test_finish();
}
