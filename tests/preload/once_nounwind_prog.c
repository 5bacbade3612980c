/* pthread_once whose init routine, compiled without unwind tables
 * (once_nounwind_init.c), is cancelled: the once control must be reset as
 * if never called (POSIX) and a waiter run its own routine, as glibc's
 * tst-oncey3 checks. The cancellation's unwinder cannot pass the routine's
 * frame, so a reset done by a C++ destructor above it never runs and the
 * next caller waits for ever; the shim must reset it from a glibc cleanup
 * buffer, as glibc's pthread_once does (docs/design.md section 4, Once). */
#include "shim_test_util.h"

extern int g_in_init;
void once_nounwind_init(void);

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_ok_runs;
static int g_waiter_started;

static void init_ok(void) { __atomic_fetch_add(&g_ok_runs, 1, __ATOMIC_RELAXED); }

static void* runner(void* arg) {
  (void)arg;
  pthread_once(&g_once, once_nounwind_init);
  SHIM_FAIL("once_nounwind_init returned");
  return NULL;
}

static void* waiter(void* arg) {
  (void)arg;
  __atomic_store_n(&g_waiter_started, 1, __ATOMIC_RELEASE);
  CHECK_RC(pthread_once(&g_once, init_ok), 0);
  return NULL;
}

int main(void) {
  shim_test_start("once_nounwind_prog", 20);
  pthread_t r, w;
  if (pthread_create(&r, NULL, runner, NULL) != 0) FATAL("create");
  while (!__atomic_load_n(&g_in_init, __ATOMIC_ACQUIRE)) shim_sleep_ms(1);
  if (pthread_create(&w, NULL, waiter, NULL) != 0) FATAL("create");
  while (!__atomic_load_n(&g_waiter_started, __ATOMIC_ACQUIRE)) shim_sleep_ms(1);
  shim_sleep_ms(50); /* the waiter is blocked in pthread_once by then */
  CHECK_RC(pthread_cancel(r), 0);
  void* ret = NULL;
  CHECK_RC(pthread_join(r, &ret), 0);
  CHECK(ret == PTHREAD_CANCELED);
  /* The waiter runs its routine once the control is reset. */
  CHECK_RC(pthread_join(w, NULL), 0);
  CHECK_RC(pthread_once(&g_once, init_ok), 0);
  CHECK(__atomic_load_n(&g_ok_runs, __ATOMIC_RELAXED) == 1);
  return shim_test_finish();
}
