/* A condvar destroyed and unmapped right after a broadcast (or the signal
 * that notified its only waiter), while the notified waiters are cancelled
 * before they re-take the mutex (docs/design.md section 4, CondVar,
 * "Cancellation"). POSIX's pthread_cond_destroy rationale lets a program
 * free the memory once every waiter has been woken; glibc's destroy waits
 * for woken waiters to confirm before they re-take the mutex. Under the
 * shim a broadcast requeues the waiters onto the held mutex (a crowd of
 * more than 32 tagged); each cancelled one unwinds, re-takes the mutex
 * after the notifier's unlock, and must not touch the unmapped condvar
 * (it used to pass on the notification with a NotifyOne on it: SIGSEGV).
 *
 * Rounds: 1 waiter notified by a signal, 2 and 40 by a broadcast; each
 * round with the mutex held by the notifier throughout (requeue) and with
 * it released before the notify (the first woken, the rest requeued). */
#include <sys/mman.h>

#include "shim_test_util.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t* g_cv;
static int g_waiting;
static int g_go;
static int g_cancels_sent;

static void unlock_mu(void* arg) { pthread_mutex_unlock((pthread_mutex_t*)arg); }

static void* waiter(void* arg) {
  (void)arg;
  pthread_mutex_lock(&g_mu);
  pthread_cleanup_push(unlock_mu, &g_mu);
  ++g_waiting;
  /* g_go is set before the notify: a waiter that returns normally leaves
   * the loop without touching the condvar again. */
  while (!g_go) pthread_cond_wait(g_cv, &g_mu);
  pthread_cleanup_pop(1);
  /* Not cancelled inside the wait: the cancel acts here (nanosleep and
   * pthread_testcancel are cancellation points). */
  while (!__atomic_load_n(&g_cancels_sent, __ATOMIC_ACQUIRE)) shim_sleep_us(100);
  pthread_testcancel();
  return NULL;
}

static void round_of(int n, int broadcast, int hold_mutex) {
  void* page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) FATAL("mmap");
  g_cv = (pthread_cond_t*)page;
  CHECK_RC(pthread_cond_init(g_cv, NULL), 0);
  g_waiting = 0;
  g_go = 0;
  __atomic_store_n(&g_cancels_sent, 0, __ATOMIC_RELEASE);
  pthread_t* t = calloc((size_t)n, sizeof(pthread_t));
  for (int i = 0; i < n; ++i) {
    if (pthread_create(&t[i], NULL, waiter, NULL) != 0) FATAL("create");
  }
  /* Every waiter is inside the wait once it has counted itself and the
   * mutex is free again. */
  for (;;) {
    pthread_mutex_lock(&g_mu);
    if (g_waiting == n) break;
    pthread_mutex_unlock(&g_mu);
    shim_sleep_us(200);
  }
  g_go = 1;
  if (!hold_mutex) pthread_mutex_unlock(&g_mu);
  if (broadcast) {
    CHECK_RC(pthread_cond_broadcast(g_cv), 0);
  } else {
    CHECK_RC(pthread_cond_signal(g_cv), 0);
  }
  for (int i = 0; i < n; ++i) CHECK_RC(pthread_cancel(t[i]), 0);
  __atomic_store_n(&g_cancels_sent, 1, __ATOMIC_RELEASE);
  /* The cancels reach waiters still parked (on the mutex, or about to
   * re-take it) before the memory goes. */
  shim_sleep_ms(50);
  CHECK_RC(pthread_cond_destroy(g_cv), 0);
  if (munmap(page, 4096) != 0) FATAL("munmap");
  if (hold_mutex) pthread_mutex_unlock(&g_mu);
  for (int i = 0; i < n; ++i) {
    void* ret = NULL;
    CHECK_RC(pthread_join(t[i], &ret), 0);
    CHECK(ret == PTHREAD_CANCELED);
  }
  free(t);
}

int main(void) {
  shim_test_start("cond_destroy_cancel_prog", 50);
  static const int kWaiters[] = {1, 2, 40};
  for (int rep = 0; rep < 3; ++rep) {
    for (int i = 0; i < 3; ++i) {
      const int n = kWaiters[i];
      for (int hold = 0; hold <= 1; ++hold) {
        round_of(n, /*broadcast=*/n > 1, hold);
      }
    }
  }
  return shim_test_finish();
}
