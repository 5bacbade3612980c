/* Timed waits under libfaketime: a realtime and a monotonic condvar wait
 * and sem_timedwait, 200 ms each on the faked clock, must time out after
 * about 200 ms of real time, as they do under glibc with libfaketime
 * (faketime_test.sh runs this against glibc first, then with the shim on
 * either side of libfaketime). Real time is read with the raw system call,
 * which libfaketime does not fake. A timed wait that another thread
 * signals must return 0 (libfaketime's wrapper hands it to the shim). */
#include "shim_test_util.h"

#include <semaphore.h>

static int64_t RealNs(void) {
  struct timespec ts;
  syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#define TIMED(label, expr)                                                  \
  do {                                                                      \
    const int64_t t0_ = RealNs();                                           \
    CHECK_RC((expr), ETIMEDOUT);                                            \
    const int64_t ms_ = (RealNs() - t0_) / 1000000;                         \
    printf("%s: %lld ms\n", label, (long long)ms_);                         \
    if (ms_ < 150 || ms_ > 5000) SHIM_FAIL("%s took %lld ms, want 200", label, (long long)ms_); \
  } while (0)

static pthread_mutex_t g_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_c = PTHREAD_COND_INITIALIZER;
static int g_flag;

static void* Signaller(void* arg) {
  shim_sleep_ms(50);
  pthread_mutex_lock(&g_m);
  g_flag = 1;
  pthread_cond_signal(&g_c);
  pthread_mutex_unlock(&g_m);
  return arg;
}

int main(void) {
  shim_test_start("faketime_prog", 30);
  if (getenv("FAKETIME") == NULL) FATAL("FAKETIME is not set");
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t c = PTHREAD_COND_INITIALIZER;
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_t cm;
  pthread_cond_init(&cm, &a);
  sem_t s;
  sem_init(&s, 0, 0);
  struct timespec t;
  pthread_mutex_lock(&m);
  t = shim_deadline_ms(CLOCK_REALTIME, 200);
  TIMED("cond realtime", pthread_cond_timedwait(&c, &m, &t));
  t = shim_deadline_ms(CLOCK_MONOTONIC, 200);
  TIMED("cond monotonic", pthread_cond_timedwait(&cm, &m, &t));
  pthread_mutex_unlock(&m);
  t = shim_deadline_ms(CLOCK_REALTIME, 200);
  TIMED("sem_timedwait", sem_timedwait(&s, &t) == 0 ? 0 : errno);
  pthread_t th = shim_spawn(Signaller, NULL);
  pthread_mutex_lock(&g_m);
  t = shim_deadline_ms(CLOCK_REALTIME, 10000);
  int rc = 0;
  while (!g_flag && rc == 0) rc = pthread_cond_timedwait(&g_c, &g_m, &t);
  CHECK_RC(rc, 0);
  pthread_mutex_unlock(&g_m);
  pthread_join(th, NULL);
  return shim_test_finish();
}
