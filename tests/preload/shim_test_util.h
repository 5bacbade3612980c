/* Helpers for the C test programs that run under the preload shim.
 *
 * The programs are plain -pthread programs: they do not link parklot and
 * reach it only through LD_PRELOAD (tests/preload/run_under_shim.sh). Each
 * calls shim_test_start() first, which fails the program unless the shim
 * is loaded, arms a watchdog, and exits non-zero from shim_test_finish()
 * if any CHECK failed.
 *
 * PARKLOT_TEST_GLIBC=1 (set by run_under_shim.sh --glibc-too) runs the same
 * program against plain glibc instead, requiring the shim to be absent:
 * that run proves every expected result in the program is glibc's own.
 * PARKLOT_TEST_EXPECT_JEMALLOC=1 also requires jemalloc to be loaded. */
#ifndef PARKLOT_TESTS_PRELOAD_SHIM_TEST_UTIL_H_
#define PARKLOT_TESTS_PRELOAD_SHIM_TEST_UTIL_H_

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int g_shim_test_failures;
static const char* g_shim_test_name = "test";
static int g_shim_test_glibc;  /* 1: running against plain glibc */

#define SHIM_FAIL(...)                                                    \
  do {                                                                    \
    fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                  \
    fprintf(stderr, __VA_ARGS__);                                         \
    fputc('\n', stderr);                                                  \
    __atomic_fetch_add(&g_shim_test_failures, 1, __ATOMIC_RELAXED);       \
  } while (0)

#define CHECK(cond)                                       \
  do {                                                    \
    if (!(cond)) SHIM_FAIL("CHECK(%s) failed", #cond);    \
  } while (0)

/* `expr` must return the error number `want` (0, EBUSY, ...). */
#define CHECK_RC(expr, want)                                                 \
  do {                                                                       \
    const int rc_ = (expr);                                                  \
    const int want_ = (want);                                                \
    if (rc_ != want_) {                                                      \
      SHIM_FAIL("%s returned %d (%s), want %d (%s)", #expr, rc_,             \
                shim_errname(rc_), want_, shim_errname(want_));              \
    }                                                                        \
  } while (0)

/* Fails and exits at once (for states the rest cannot run from). */
#define FATAL(...)                         \
  do {                                     \
    SHIM_FAIL(__VA_ARGS__);                \
    fflush(stderr);                        \
    _exit(2);                              \
  } while (0)

static inline const char* shim_errname(int e) {
  switch (e) {
    case 0: return "0";
    case EINVAL: return "EINVAL";
    case EPERM: return "EPERM";
    case EBUSY: return "EBUSY";
    case EDEADLK: return "EDEADLK";
    case EAGAIN: return "EAGAIN";
    case ETIMEDOUT: return "ETIMEDOUT";
    case EINTR: return "EINTR";
    case EOWNERDEAD: return "EOWNERDEAD";
    case ENOTRECOVERABLE: return "ENOTRECOVERABLE";
    default: return "other";
  }
}

static void shim_test_on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "FAIL: watchdog: the program hung (alarm)\n";
  ssize_t n = write(STDERR_FILENO, msg, sizeof(msg) - 1);
  (void)n;
  _exit(3);
}

/* Arms (or re-arms, e.g. in a forked child) the watchdog. */
static inline void shim_test_watchdog(unsigned seconds) {
  signal(SIGALRM, shim_test_on_alarm);
  alarm(seconds);
}

/* Call first: checks the shim is (or, against glibc, is not) loaded. */
static inline void shim_test_start(const char* name, unsigned watchdog_s) {
  g_shim_test_name = name;
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char* g = getenv("PARKLOT_TEST_GLIBC");
  g_shim_test_glibc = g != NULL && strcmp(g, "1") == 0;
  const int active = dlsym(RTLD_DEFAULT, "parklot_preload_active") != NULL;
  if (g_shim_test_glibc) {
    if (active) FATAL("%s: PARKLOT_TEST_GLIBC=1 but the shim is loaded", name);
  } else if (!active) {
    FATAL("%s: not running under the parklot preload shim "
          "(dlsym(RTLD_DEFAULT, \"parklot_preload_active\") == NULL)", name);
  }
  const char* j = getenv("PARKLOT_TEST_EXPECT_JEMALLOC");
  if (j != NULL && strcmp(j, "1") == 0 &&
      dlsym(RTLD_DEFAULT, "mallctl") == NULL) {
    FATAL("%s: jemalloc expected but not loaded", name);
  }
  printf("%s: running against %s\n", name,
         g_shim_test_glibc ? "plain glibc" : "the parklot shim");
  shim_test_watchdog(watchdog_s);
}

/* Call last: returns the exit status. */
static inline int shim_test_finish(void) {
  const int f = __atomic_load_n(&g_shim_test_failures, __ATOMIC_RELAXED);
  if (f != 0) {
    fprintf(stderr, "%s: %d check(s) failed\n", g_shim_test_name, f);
    return 1;
  }
  printf("%s: all checks passed\n", g_shim_test_name);
  return 0;
}

/* Time helpers. */
static inline int64_t shim_now_ns(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline struct timespec shim_ts_from_ns(int64_t ns) {
  struct timespec ts;
  ts.tv_sec = (time_t)(ns / 1000000000);
  ts.tv_nsec = (long)(ns % 1000000000);
  return ts;
}

static inline int64_t shim_ns_from_ts(const struct timespec* ts) {
  return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/* An absolute time `ms` milliseconds from now on `clock`. */
static inline struct timespec shim_deadline_ms(clockid_t clock, int64_t ms) {
  return shim_ts_from_ns(shim_now_ns(clock) + ms * 1000000);
}

static inline void shim_sleep_ms(int64_t ms) {
  struct timespec ts = shim_ts_from_ns(ms * 1000000);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static inline void shim_sleep_us(int64_t us) {
  struct timespec ts = shim_ts_from_ns(us * 1000);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* A small per-thread pseudo-random generator (xorshift). */
static inline uint32_t shim_rand(uint32_t* state) {
  uint32_t x = *state;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return *state = x ? x : 0x9E3779B9u;
}

/* syscall(SYS_futex, ...) with no second word: served by the shim under
 * PARKLOT_SYSCALL_FUTEX=1, by the kernel otherwise. The result and errno as
 * syscall() gives them. */
static inline long shim_futex(void* word, int op, unsigned val,
                              const struct timespec* timeout) {
  return syscall(SYS_futex, word, op, val, timeout, NULL, 0);
}

static inline pthread_t shim_spawn(void* (*fn)(void*), void* arg) {
  pthread_t t;
  const int rc = pthread_create(&t, NULL, fn, arg);
  if (rc != 0) FATAL("pthread_create: %s", strerror(rc));
  return t;
}

#endif  /* PARKLOT_TESTS_PRELOAD_SHIM_TEST_UTIL_H_ */
