/* A thread in asynchronous cancellation mode keeps that mode however its
 * signal handler leaves. The shim runs program handlers in deferred mode
 * (cancel_in_handler_prog.c says why) and once switched back only when the
 * handler returned: a handler that left by siglongjmp left the thread
 * deferred, and a pthread_cancel no longer stopped the thread where glibc
 * cancels it at once.
 *
 * Each case puts a thread in asynchronous mode, runs a handler that leaves
 * a given way, reads the mode back, then spins with no cancellation point
 * and must end cancelled. The fault case (SIGSEGV from a real fault) goes
 * through the shim's fault handler under PARKLOT_SYSCALL_FUTEX=1. */
#include "tests/preload/shim_test_util.h"  /* first: _GNU_SOURCE */

#include <setjmp.h>
#include <sys/mman.h>

enum {
  kSiglongjmp,   /* handler leaves by siglongjmp */
  kLongjmp,      /* by longjmp (no mask restore) */
  kNested,       /* an inner handler jumps out of both */
  kInnerJump,    /* the handler jumps within itself, then returns */
  kFault,        /* a real SIGSEGV, left by siglongjmp */
  kCancelInside, /* cancelled while the handler runs, then siglongjmp */
  kDeferred,     /* deferred thread, siglongjmp: stays deferred */
  kCases
};
static const char* const kNames[kCases] = {
    "siglongjmp", "longjmp", "nested handlers", "jump inside the handler",
    "fault + siglongjmp", "cancel during the handler", "deferred thread"};

static __thread sigjmp_buf t_out;
static __thread jmp_buf t_plain_out;
static __thread int t_case;
static char* g_bad_page;
static volatile int g_ready;     /* the victim spins */
static volatile int g_cancelled; /* main has called pthread_cancel */
static volatile int g_type_after[kCases];

static void on_usr2(int sig) {
  (void)sig;
  siglongjmp(t_out, 1);
}

static void on_signal(int sig) {
  (void)sig;
  switch (t_case) {
    case kLongjmp:
      longjmp(t_plain_out, 1);
    case kNested:
      raise(SIGUSR2);
      break;
    case kInnerJump: {
      jmp_buf inner;
      if (setjmp(inner) == 0) longjmp(inner, 1);
      return;
    }
    case kCancelInside:
      __atomic_store_n(&g_ready, 1, __ATOMIC_RELEASE);
      /* No cancellation point: glibc unwinds from here (asynchronous). */
      while (!__atomic_load_n(&g_cancelled, __ATOMIC_ACQUIRE)) {
      }
      break;
    default:
      break;
  }
  siglongjmp(t_out, 1);
}

/* Reads the type without acting on a pending cancel: with cancellation
 * disabled, setting a type and setting it back does nothing else (the
 * enable at the end acts on a pending cancel only in asynchronous mode). */
static int current_type(void) {
  int state;
  int old = -1;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &state);
  pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &old);
  pthread_setcanceltype(old, NULL);
  pthread_setcancelstate(state, NULL);
  return old;
}

static void* victim(void* arg) {
  t_case = (int)(intptr_t)arg;
  const int want = t_case == kDeferred ? PTHREAD_CANCEL_DEFERRED
                                       : PTHREAD_CANCEL_ASYNCHRONOUS;
  pthread_setcanceltype(want, NULL);
  if (t_case == kLongjmp) {
    if (setjmp(t_plain_out) == 0) raise(SIGUSR1);
  } else if (sigsetjmp(t_out, 1) == 0) {
    if (t_case == kFault) {
      *(volatile char*)g_bad_page = 1;
    } else {
      raise(SIGUSR1);
    }
  }
  g_type_after[t_case] = current_type();
  __atomic_store_n(&g_ready, 1, __ATOMIC_RELEASE);
  if (t_case == kDeferred) {
    for (;;) pthread_testcancel();
  }
  for (;;) {
  }
  return NULL;
}

static void run_case(int c) {
  g_ready = 0;
  g_cancelled = 0;
  g_type_after[c] = -1;
  pthread_t t = shim_spawn(victim, (void*)(intptr_t)c);
  while (!__atomic_load_n(&g_ready, __ATOMIC_ACQUIRE)) shim_sleep_us(100);
  CHECK_RC(pthread_cancel(t), 0);
  __atomic_store_n(&g_cancelled, 1, __ATOMIC_RELEASE);
  void* result = NULL;
  const struct timespec deadline = shim_deadline_ms(CLOCK_REALTIME, 5000);
  const int rc = pthread_timedjoin_np(t, &result, &deadline);
  const int want_type = c == kDeferred ? PTHREAD_CANCEL_DEFERRED
                                       : PTHREAD_CANCEL_ASYNCHRONOUS;
  const char* type_name = g_type_after[c] == PTHREAD_CANCEL_ASYNCHRONOUS
                              ? "asynchronous"
                          : g_type_after[c] == PTHREAD_CANCEL_DEFERRED
                              ? "deferred"
                              : "not read (unwound in the handler)";
  printf("%s: type after the handler: %s; %s\n", kNames[c], type_name,
         rc == 0 && result == PTHREAD_CANCELED ? "cancelled"
                                               : "NOT cancelled in 5 s");
  if (c != kCancelInside && g_type_after[c] != want_type) {
    SHIM_FAIL("%s: cancel type %d after the handler, want %d", kNames[c],
              g_type_after[c], want_type);
  }
  if (rc != 0 || result != PTHREAD_CANCELED) {
    /* The thread spins on; the process ends at exit. */
    SHIM_FAIL("%s: thread not cancelled (join: %s)", kNames[c],
              rc == 0 ? "returned" : shim_errname(rc));
  }
}

int main(void) {
  shim_test_start("handler_cancel_type", 60);
  g_bad_page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(g_bad_page != MAP_FAILED);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  CHECK_RC(sigaction(SIGUSR1, &sa, NULL), 0);
  CHECK_RC(sigaction(SIGSEGV, &sa, NULL), 0);
  sa.sa_handler = on_usr2;
  CHECK_RC(sigaction(SIGUSR2, &sa, NULL), 0);
  for (int c = 0; c < kCases; ++c) run_case(c);
  return shim_test_finish();
}
