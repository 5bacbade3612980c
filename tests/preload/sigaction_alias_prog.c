/* A handler installed through __sigaction (glibc's exported alias of
 * sigaction, __sigaction@@GLIBC_2.2.5, which a program can link against)
 * that leaves a pthread_mutex_lock wait by siglongjmp: the next unlock must
 * reach a thread that is really waiting, as under glibc. The shim once
 * interposed sigaction but not __sigaction: the handler ran unwrapped, the
 * departed waiter's queue record stayed queued, the unlock handed the mutex
 * to it and the real waiter timed out. */
#include "tests/preload/shim_test_util.h"  /* first: _GNU_SOURCE */

#include <setjmp.h>
#include <stdatomic.h>

extern int __sigaction(int sig, const struct sigaction* act,
                       struct sigaction* oact);

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static sigjmp_buf g_jump;
static atomic_int g_jumped;

static void on_usr1(int sig) {
  (void)sig;
  siglongjmp(g_jump, 1);
}

/* Blocks in pthread_mutex_lock until the signal's jump, then stays alive
 * (its queue record, if left behind, must not be handed the mutex). */
static void* jumper(void* arg) {
  (void)arg;
  if (sigsetjmp(g_jump, 1) == 0) {
    pthread_mutex_lock(&g_mu);
    FATAL("jumper: acquired the mutex the main thread holds");
  }
  atomic_store(&g_jumped, 1);
  shim_sleep_ms(2000);
  return NULL;
}

/* Acquires the mutex within 3 s: 0 or the error number. */
static void* waiter(void* arg) {
  (void)arg;
  const struct timespec d = shim_deadline_ms(CLOCK_REALTIME, 3000);
  const int rc = pthread_mutex_timedlock(&g_mu, &d);
  if (rc == 0) pthread_mutex_unlock(&g_mu);
  return (void*)(intptr_t)rc;
}

int main(void) {
  shim_test_start("sigaction_alias", 30);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_usr1;
  sigemptyset(&sa.sa_mask);
  CHECK_RC(__sigaction(SIGUSR1, &sa, NULL), 0);
  struct sigaction back;
  CHECK_RC(sigaction(SIGUSR1, NULL, &back), 0);
  CHECK(back.sa_handler == on_usr1);  /* the program's handler reads back */

  pthread_mutex_lock(&g_mu);
  pthread_t j = shim_spawn(jumper, NULL);
  shim_sleep_ms(200);  /* the jumper blocks meanwhile */
  pthread_kill(j, SIGUSR1);
  while (atomic_load(&g_jumped) == 0) shim_sleep_ms(1);
  pthread_t w = shim_spawn(waiter, NULL);
  shim_sleep_ms(200);  /* the waiter blocks meanwhile */
  pthread_mutex_unlock(&g_mu);
  void* rc;
  pthread_join(w, &rc);
  CHECK_RC((int)(intptr_t)rc, 0);
  pthread_join(j, NULL);
  return shim_test_finish();
}
