/* A thread that exits holding an error-checking or a recursive mutex
 * leaves it owned by a thread that no longer exists (POSIX leaves it so;
 * glibc records the owner's TID). No thread started later may pass for
 * that owner: its unlock is EPERM, its trylock EBUSY, its timed lock
 * ETIMEDOUT (not EDEADLK, not a recursive re-entry). Each new thread also
 * takes a lock of its own, as a thread reusing the dead one's identity
 * would. Run with PARKLOT_STATS=1, the report must count every thread
 * once (exited_owner_stats_test). */
#include "tests/preload/shim_test_util.h"

static pthread_mutex_t g_errorcheck, g_recursive;
static pthread_mutex_t g_own = PTHREAD_MUTEX_INITIALIZER;

static void* owner(void* arg) {
  (void)arg;
  CHECK_RC(pthread_mutex_lock(&g_errorcheck), 0);
  CHECK_RC(pthread_mutex_lock(&g_recursive), 0);
  CHECK_RC(pthread_mutex_lock(&g_recursive), 0);
  return NULL;  /* exits holding both */
}

static void* newcomer(void* arg) {
  (void)arg;
  CHECK_RC(pthread_mutex_lock(&g_own), 0);
  CHECK_RC(pthread_mutex_unlock(&g_own), 0);
  CHECK_RC(pthread_mutex_unlock(&g_errorcheck), EPERM);
  CHECK_RC(pthread_mutex_unlock(&g_recursive), EPERM);
  CHECK_RC(pthread_mutex_trylock(&g_errorcheck), EBUSY);
  CHECK_RC(pthread_mutex_trylock(&g_recursive), EBUSY);
  struct timespec d = shim_deadline_ms(CLOCK_REALTIME, 2);
  CHECK_RC(pthread_mutex_timedlock(&g_errorcheck, &d), ETIMEDOUT);
  d = shim_deadline_ms(CLOCK_REALTIME, 2);
  CHECK_RC(pthread_mutex_timedlock(&g_recursive, &d), ETIMEDOUT);
  return NULL;
}

int main(int argc, char** argv) {
  shim_test_start("exited_owner", 60);
  const int newcomers = argc > 1 ? atoi(argv[1]) : 40;
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
  pthread_mutex_init(&g_errorcheck, &a);
  pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&g_recursive, &a);
  pthread_mutexattr_destroy(&a);
  CHECK_RC(pthread_mutex_lock(&g_own), 0);
  CHECK_RC(pthread_mutex_unlock(&g_own), 0);
  pthread_join(shim_spawn(owner, NULL), NULL);
  /* One at a time: each takes the identity the last one freed, if any. */
  for (int i = 0; i < newcomers; ++i) pthread_join(shim_spawn(newcomer, NULL), NULL);
  /* The main thread, registered before the owner, cannot pass for it. */
  CHECK_RC(pthread_mutex_unlock(&g_errorcheck), EPERM);
  CHECK_RC(pthread_mutex_trylock(&g_recursive), EBUSY);
  printf("exited_owner: %d threads used the lot\n", newcomers + 2);
  return shim_test_finish();
}
