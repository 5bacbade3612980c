/* Waits left without the lot's help: a thread blocked in sem_wait,
 * pthread_mutex_lock or a raw FUTEX_WAIT leaves by
 * siglongjmp from a signal handler (a timeout-by-SIGALRM wrapper does
 * this). glibc keeps no per-waiter state there, so the next release goes to
 * a thread that is really waiting. (Not rwlocks: glibc's own wrlock keeps
 * writer-waiting state in the lock, which a jump out of it leaves behind.) Checked for each kind, and for each of
 * what the jumper does next: waits again on the same object, uses another
 * object, or exits (its queue record must not outlive its thread).
 * Run with PARKLOT_FAIR_NS=0 too: every release is then a direct handoff,
 * the case where a handoff to the departed waiter would be lost. */
#include <linux/futex.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <sys/syscall.h>

#include "tests/preload/shim_test_util.h"

enum Kind { kSem, kMutex, kFutex, kKinds };
enum After { kWaitAgain, kOtherObject, kExit, kAfters };
static const char* const kKindName[] = {"sem_wait", "pthread_mutex_lock",
                                        "FUTEX_WAIT"};
static const char* const kAfterName[] = {"waits again", "uses another object",
                                         "exits"};

static sem_t g_sem, g_other_sem;
static pthread_mutex_t g_mu;
static atomic_uint g_word;
static enum Kind g_kind;
static enum After g_after;
static sigjmp_buf g_jump;
static atomic_int g_tid, g_state;  /* 1 blocking, 2 jumped, 3 go on, 4 done */
static int g_again_rc;

static void on_usr1(int sig) {
  (void)sig;
  siglongjmp(g_jump, 1);
}

/* Blocks on the object (it is unavailable) until the signal's jump. */
static void Block(void) {
  switch (g_kind) {
    case kSem: sem_wait(&g_sem); break;
    case kMutex: pthread_mutex_lock(&g_mu); break;
    default:
      while (atomic_load(&g_word) == 0) shim_futex(&g_word, FUTEX_WAIT_PRIVATE, 0, NULL);
  }
}

/* Acquires the object within `ms`: 0 or an error number. */
static int Acquire(int ms) {
  struct timespec d = shim_deadline_ms(CLOCK_REALTIME, ms);
  switch (g_kind) {
    case kSem: return sem_timedwait(&g_sem, &d) == 0 ? 0 : errno;
    case kMutex: {
      const int rc = pthread_mutex_timedlock(&g_mu, &d);
      if (rc == 0) pthread_mutex_unlock(&g_mu);
      return rc;
    }
    default: {
      const int64_t end = shim_now_ns(CLOCK_MONOTONIC) + (int64_t)ms * 1000000;
      while (atomic_load(&g_word) == 0) {
        if (shim_now_ns(CLOCK_MONOTONIC) >= end) return ETIMEDOUT;
        struct timespec rel = {0, 5000000};
        shim_futex(&g_word, FUTEX_WAIT_PRIVATE, 0, &rel);
      }
      return 0;
    }
  }
}

/* Makes the object available once (after the jumper left its wait). */
static void Release(void) {
  switch (g_kind) {
    case kSem: CHECK(sem_post(&g_sem) == 0); break;
    case kMutex: CHECK(pthread_mutex_unlock(&g_mu) == 0); break;
    default:
      atomic_store(&g_word, 1);
      shim_futex(&g_word, FUTEX_WAKE_PRIVATE, 1, NULL);
  }
}

static void* jumper(void* arg) {
  (void)arg;
  atomic_store(&g_tid, (int)syscall(SYS_gettid));
  if (sigsetjmp(g_jump, 1) == 0) {
    atomic_store(&g_state, 1);
    Block();
    SHIM_FAIL("%s returned although nothing released it", kKindName[g_kind]);
    return NULL;
  }
  atomic_store(&g_state, 2);
  if (g_after == kExit) return NULL;
  while (atomic_load(&g_state) != 3) shim_sleep_us(200);
  if (g_after == kWaitAgain) {
    g_again_rc = Acquire(3000);
  } else {
    /* Another object's wait and release on a thread whose old record may
     * still be queued: nothing may mix them up. */
    struct timespec d = shim_deadline_ms(CLOCK_REALTIME, 3000);
    CHECK(sem_post(&g_other_sem) == 0);
    g_again_rc = sem_timedwait(&g_other_sem, &d) == 0 ? 0 : errno;
  }
  atomic_store(&g_state, 4);
  return NULL;
}

static int g_taker_rc;
static void* taker(void* arg) {
  (void)arg;
  g_taker_rc = Acquire(3000);
  return NULL;
}

/* Whether thread `tid` is asleep (state S in /proc). */
static int Sleeping(int tid) {
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
  FILE* f = fopen(path, "r");
  if (f == NULL) return 0;
  const size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char* p = strrchr(buf, ')');
  return p != NULL && p[1] == ' ' && p[2] == 'S';
}

static void Round(enum Kind kind, enum After after) {
  g_kind = kind;
  g_after = after;
  sem_init(&g_sem, 0, 0);
  sem_init(&g_other_sem, 0, 0);
  pthread_mutex_init(&g_mu, NULL);
  atomic_store(&g_word, 0);
  if (kind == kMutex) pthread_mutex_lock(&g_mu);
  atomic_store(&g_state, 0);
  atomic_store(&g_tid, 0);
  g_again_rc = -1;
  pthread_t j = shim_spawn(jumper, NULL);
  while (atomic_load(&g_state) != 1) shim_sleep_us(100);
  for (int i = 0; i < 2000 && !Sleeping(atomic_load(&g_tid)); ++i) shim_sleep_us(100);
  shim_sleep_ms(5);  /* asleep in the wait itself, not on the way in */
  pthread_kill(j, SIGUSR1);
  while (atomic_load(&g_state) != 2) shim_sleep_us(100);
  if (after == kExit) pthread_join(j, NULL);

  /* The release must reach a thread that is really waiting. */
  Release();
  pthread_t t = shim_spawn(taker, NULL);
  pthread_join(t, NULL);
  if (g_taker_rc != 0) {
    SHIM_FAIL("%s, jumper %s: the next waiter got %s after the release",
              kKindName[kind], kAfterName[after], shim_errname(g_taker_rc));
  }
  if (after != kExit) {
    if (after == kWaitAgain) Release();
    atomic_store(&g_state, 3);
    pthread_join(j, NULL);
    if (g_again_rc != 0) {
      SHIM_FAIL("%s, jumper %s: its own next wait got %s", kKindName[kind],
                kAfterName[after], shim_errname(g_again_rc));
    }
  }
  if (kind == kMutex) {
    CHECK(pthread_mutex_trylock(&g_mu) == 0);
    CHECK(pthread_mutex_unlock(&g_mu) == 0);
  }
  if (kind == kSem) {
    int v = -1;
    sem_getvalue(&g_sem, &v);
    CHECK(v == 0);
  }
}

int main(int argc, char** argv) {
  shim_test_start("longjmp_wait", 150);
  const int rounds = argc > 1 ? atoi(argv[1]) : 2;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sigemptyset(&sa.sa_mask);
  CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
  for (int r = 0; r < rounds; ++r) {
    for (int k = 0; k < kKinds; ++k) {
      for (int a = 0; a < kAfters; ++a) Round((enum Kind)k, (enum After)a);
    }
  }
  return shim_test_finish();
}
