/* Signal handlers that take other locks: a handler that locks and unlocks
 * an unrelated, contended mutex (SIGUSR1), or signals an unrelated condvar
 * (SIGUSR2), interrupting threads that are inside contended
 * pthread_mutex_lock and pthread_cond_wait slow paths of their own.
 * POSIX leaves locking in a handler undefined, but glibc serves it as long
 * as the interrupted thread does not hold that very lock (libusb and others
 * rely on it), and so must the shim: a handler that lands while its thread
 * holds a bucket lock must not wait for that bucket (docs/design.md section
 * 2.9: the shim delivers it at the lock section's end).
 *
 * Threads: two "inner" threads contend on inner_mu and ping-pong on
 * inner_cv (the interrupted paths); two "outer" threads keep outer_mu
 * contended and one waits on outer_cv; a signaller sends SIGUSR1 and
 * SIGUSR2 to the inner threads in turn. Counts must add up, and the
 * program must finish within the watchdog. Run it with
 * PARKLOT_POLICY=fixed:1 too (every key in one bucket: a handler's lock
 * always needs the bucket its thread may hold). */
#include <stdatomic.h>

#include "tests/preload/shim_test_util.h"

enum { kRunMs = 3000 };

static pthread_mutex_t inner_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t inner_cv = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t outer_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t outer_cv = PTHREAD_COND_INITIALIZER;
static long inner_count, outer_count, outer_signals;
static int inner_turn;
static atomic_long handler_locks, handler_signals;
static atomic_int stop_inner, stop_signaller, stop_outer;
static long inner_rounds[2];

static void OnUsr1(int sig) {
  (void)sig;
  pthread_mutex_lock(&outer_mu);
  ++outer_count;
  pthread_mutex_unlock(&outer_mu);
  atomic_fetch_add(&handler_locks, 1);
}

static void OnUsr2(int sig) {
  (void)sig;
  pthread_mutex_lock(&outer_mu);
  ++outer_signals;
  pthread_cond_signal(&outer_cv);
  pthread_mutex_unlock(&outer_mu);
  atomic_fetch_add(&handler_signals, 1);
}

/* Inner threads: a contended mutex, and strict turns on a condvar. */
static void* Inner(void* arg) {
  const int me = (int)(long)arg;
  int i = 0;
  for (; !atomic_load(&stop_inner); ++i) {
    pthread_mutex_lock(&inner_mu);
    ++inner_count;
    if (i % 16 == 0) {
      while (inner_turn != me) pthread_cond_wait(&inner_cv, &inner_mu);
      inner_turn = 1 - me;
      pthread_cond_signal(&inner_cv);
    }
    pthread_mutex_unlock(&inner_mu);
  }
  inner_rounds[me] = i;
  /* The last turn may be the other thread's: let it finish. */
  pthread_mutex_lock(&inner_mu);
  inner_turn = 1 - me;
  pthread_cond_broadcast(&inner_cv);
  pthread_mutex_unlock(&inner_mu);
  return NULL;
}

/* Outer threads: keep outer_mu contended. */
static void* Outer(void* arg) {
  (void)arg;
  while (!atomic_load(&stop_outer)) {
    pthread_mutex_lock(&outer_mu);
    ++outer_count;
    pthread_mutex_unlock(&outer_mu);
  }
  return NULL;
}

/* A waiter on outer_cv, woken by the SIGUSR2 handlers. */
static void* OuterWaiter(void* arg) {
  (void)arg;
  pthread_mutex_lock(&outer_mu);
  while (!atomic_load(&stop_outer)) {
    struct timespec deadline = shim_deadline_ms(CLOCK_REALTIME, 20);
    pthread_cond_timedwait(&outer_cv, &outer_mu, &deadline);
  }
  pthread_mutex_unlock(&outer_mu);
  return NULL;
}

struct Targets {
  pthread_t inner[2];
};

static void* Signaller(void* arg) {
  const struct Targets* t = arg;
  for (unsigned n = 0; !atomic_load(&stop_signaller); ++n) {
    pthread_kill(t->inner[n % 2], (n / 2) % 2 == 0 ? SIGUSR1 : SIGUSR2);
    if (n % 4 == 0) shim_sleep_us(10);
  }
  return NULL;
}

int main(void) {
  shim_test_start("handler_locks", 60);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  /* Each handler blocks the other: one interrupting the other while it
   * holds outer_mu would wait for its own thread under glibc too. */
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGUSR1);
  sigaddset(&sa.sa_mask, SIGUSR2);
  sa.sa_handler = OnUsr1;
  CHECK_RC(sigaction(SIGUSR1, &sa, NULL), 0);
  sa.sa_handler = OnUsr2;
  CHECK_RC(sigaction(SIGUSR2, &sa, NULL), 0);

  long outer_threads = 2;
  pthread_t outer[2], waiter;
  for (long i = 0; i < outer_threads; ++i) outer[i] = shim_spawn(Outer, NULL);
  waiter = shim_spawn(OuterWaiter, NULL);
  struct Targets t;
  for (long i = 0; i < 2; ++i) t.inner[i] = shim_spawn(Inner, (void*)i);
  pthread_t signaller = shim_spawn(Signaller, &t);

  shim_sleep_ms(kRunMs);
  atomic_store(&stop_inner, 1);
  for (int i = 0; i < 2; ++i) CHECK_RC(pthread_join(t.inner[i], NULL), 0);
  atomic_store(&stop_signaller, 1);
  CHECK_RC(pthread_join(signaller, NULL), 0);
  atomic_store(&stop_outer, 1);
  for (long i = 0; i < outer_threads; ++i) CHECK_RC(pthread_join(outer[i], NULL), 0);
  CHECK_RC(pthread_join(waiter, NULL), 0);

  CHECK(inner_count == inner_rounds[0] + inner_rounds[1]);
  const long locks = atomic_load(&handler_locks);
  const long signals = atomic_load(&handler_signals);
  CHECK(outer_signals == signals);
  CHECK(locks > 0 && signals > 0);
  CHECK(outer_count >= locks);
  printf("handler_locks: %ld handler locks, %ld handler signals\n", locks,
         signals);
  return shim_test_finish();
}
