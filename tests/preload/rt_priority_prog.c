/* Real-time waiters are released highest priority first, as glibc's
 * primitives release them (the kernel's futex queues are ordered by
 * priority): three SCHED_FIFO threads of priorities 10, 30 and 20 (made in
 * that order) queue on a mutex held by the main thread (each kind), a
 * condvar (signal; broadcast with the mutex held), a semaphore, a
 * write-locked rwlock and a raw futex word (FUTEX_WAKE of 2, then 1;
 * served by the shim under PARKLOT_SYSCALL_FUTEX=1); the releases must
 * come in the order 30, 20, 10. Open POSIX's
 * pthread_attr_setschedpolicy/2-1 in more places.
 *
 * Every thread runs on one CPU, so that which thread runs next is the
 * scheduler's choice by priority; the main thread runs at SCHED_FIFO 50
 * and makes each waiter only once the one before sleeps in its wait (its
 * state in /proc/self/task/TID/stat is S), so they queue low, high, mid.
 *
 * How the waiters get their priorities, each a way the lot must learn of:
 *   (none)     explicit scheduling attributes at pthread_create (as 2-1),
 *              then pthread_setschedparam, pthread_setschedprio and
 *              syscall(SYS_sched_setparam) on threads that inherited the
 *              main thread's, each after a first wait
 *   inherited  re-run with this argument after the main thread set itself
 *              SCHED_FIFO: the process starts real-time (as under chrt),
 *              and each waiter sets its own priority by a bare syscall
 *              instruction, which no function sees
 *
 * Setting SCHED_FIFO needs CAP_SYS_NICE (or an RLIMIT_RTPRIO): without
 * it the program says so and exits 77, which run_under_shim.sh reports as
 * a skip. */
#include "tests/preload/shim_test_util.h"  /* first: _GNU_SOURCE */

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>

enum { kWaiters = 3, kMainPriority = 50 };
/* Made in this order; released highest first. */
static const int kPriorities[kWaiters] = {10, 30, 20};
static const int kExpected[kWaiters] = {30, 20, 10};

/* How the waiters get their priorities. */
enum How {
  kExplicitAttr,
  kSetSchedParam,
  kSetSchedPrio,
  kSyscallFunction,
  kRawSyscall
};
static const char* const kHowName[] = {
    "explicit attributes", "pthread_setschedparam", "pthread_setschedprio",
    "syscall(SYS_sched_setparam)", "a bare sched_setparam"};

/* What they wait on. */
enum What {
  kMutexNormal,
  kMutexErrorCheck,
  kMutexRecursive,
  kCondSignal,
  kCondBroadcast,
  kSemaphore,
  kRwlock,
  kFutex,
  kWhatCount
};
static const char* const kWhatName[] = {
    "normal mutex", "errorcheck mutex", "recursive mutex", "condvar signal",
    "condvar broadcast", "semaphore", "rwlock", "futex word"};

static enum How g_how;
static enum What g_what;
static pthread_mutex_t g_mutex;
static pthread_cond_t g_cond;
static sem_t g_sem;
static sem_t g_never; /* never posted */
static pthread_rwlock_t g_rwlock;
static uint32_t g_word;
static int g_tickets; /* condvar: notifications to consume, under g_mutex */
static atomic_int g_tids[kWaiters];
static atomic_int g_released;  /* waiters through their wait so far */
static atomic_int g_order[kWaiters];

static void record(int priority) {
  atomic_store(&g_order[atomic_fetch_add(&g_released, 1)], priority);
}

/* sched_setparam(0, p) by the syscall instruction itself: neither glibc's
 * function nor syscall(), which the shim sees. */
static long raw_sched_setparam(const struct sched_param* p) {
  long rc;
  __asm__ volatile("syscall"
                   : "=a"(rc)
                   : "0"((long)SYS_sched_setparam), "D"(0L), "S"(p)
                   : "rcx", "r11", "memory");
  return rc;
}

/* The calling thread becomes SCHED_FIFO `priority` (`how`). */
static void set_own_priority(enum How how, int priority) {
  struct sched_param p = {.sched_priority = priority};
  switch (how) {
    case kExplicitAttr:
      return;
    case kSetSchedParam:
      CHECK_RC(pthread_setschedparam(pthread_self(), SCHED_FIFO, &p), 0);
      return;
    case kSetSchedPrio:
      CHECK_RC(pthread_setschedprio(pthread_self(), priority), 0);
      return;
    case kSyscallFunction:
      CHECK(syscall(SYS_sched_setparam, 0, &p) == 0);
      return;
    case kRawSyscall:
      CHECK(raw_sched_setparam(&p) == 0);
      return;
  }
}

static void* waiter(void* arg) {
  const int i = (int)(intptr_t)arg;
  const int priority = kPriorities[i];
  if (g_how != kRawSyscall) {
    /* A wait first, at the priority the thread was made with: the change
     * below must be seen at the next (a priority read once is not kept). */
    const struct timespec soon = shim_deadline_ms(CLOCK_REALTIME, 1);
    CHECK(sem_timedwait(&g_never, &soon) == -1 && errno == ETIMEDOUT);
  }
  set_own_priority(g_how, priority);
  /* The kernel's view (glibc's pthread_getschedparam may answer from its
   * cache, which a raw system call leaves behind). */
  const int policy = sched_getscheduler(0);
  struct sched_param p = {0};
  CHECK(sched_getparam(0, &p) == 0);
  if (policy != SCHED_FIFO || p.sched_priority != priority) {
    FATAL("waiter %d: policy %d priority %d", priority, policy,
          p.sched_priority);
  }
  switch (g_what) {
    case kMutexNormal:
    case kMutexErrorCheck:
    case kMutexRecursive:
      atomic_store(&g_tids[i], gettid());
      CHECK_RC(pthread_mutex_lock(&g_mutex), 0);
      record(priority);
      CHECK_RC(pthread_mutex_unlock(&g_mutex), 0);
      break;
    case kCondSignal:
    case kCondBroadcast:
      CHECK_RC(pthread_mutex_lock(&g_mutex), 0);
      atomic_store(&g_tids[i], gettid());
      while (g_tickets == 0) CHECK_RC(pthread_cond_wait(&g_cond, &g_mutex), 0);
      --g_tickets;
      record(priority);
      CHECK_RC(pthread_mutex_unlock(&g_mutex), 0);
      break;
    case kSemaphore:
      atomic_store(&g_tids[i], gettid());
      while (sem_wait(&g_sem) != 0) CHECK(errno == EINTR);
      record(priority);
      break;
    case kRwlock:
      atomic_store(&g_tids[i], gettid());
      CHECK_RC(pthread_rwlock_wrlock(&g_rwlock), 0);
      record(priority);
      CHECK_RC(pthread_rwlock_unlock(&g_rwlock), 0);
      break;
    case kFutex:
      atomic_store(&g_tids[i], gettid());
      /* The word stays 0: each return is a FUTEX_WAKE's. */
      while (shim_futex(&g_word, FUTEX_WAIT_PRIVATE, 0, NULL) != 0) {
        CHECK(errno == EINTR);
      }
      record(priority);
      break;
    case kWhatCount:
      break;
  }
  return NULL;
}

/* The state letter of thread `tid` (/proc/self/task/TID/stat), or 0. */
static char thread_state(int tid) {
  char path[64], buf[512];
  snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* paren = strrchr(buf, ')');
  return paren != NULL && paren[1] == ' ' ? paren[2] : 0;
}

/* Waits (sleeping, so that the waiters run) until waiters 0..n-1 have
 * announced themselves and sleep in their waits, twice 20 ms apart. */
static void wait_asleep(int n) {
  int stable = 0;
  for (int tries = 0; tries < 5000; ++tries) {
    int asleep = 0;
    for (int i = 0; i < n; ++i) {
      const int tid = atomic_load(&g_tids[i]);
      if (tid != 0 && thread_state(tid) == 'S') ++asleep;
    }
    if (asleep == n && ++stable == 2) return;
    if (asleep != n) stable = 0;
    shim_sleep_ms(asleep == n ? 20 : 1);
  }
  FATAL("%s, %s: the waiters never all slept", kHowName[g_how],
        kWhatName[g_what]);
}

/* Waits until `n` waiters are through. */
static void wait_released(int n) {
  for (int tries = 0; tries < 10000; ++tries) {
    if (atomic_load(&g_released) >= n) return;
    shim_sleep_ms(1);
  }
  FATAL("%s, %s: only %d of %d waiters got through", kHowName[g_how],
        kWhatName[g_what], atomic_load(&g_released), n);
}

static void set_up(enum What what) {
  pthread_mutexattr_t ma;
  pthread_mutexattr_init(&ma);
  const int kind = what == kMutexErrorCheck  ? PTHREAD_MUTEX_ERRORCHECK
                   : what == kMutexRecursive ? PTHREAD_MUTEX_RECURSIVE
                                             : PTHREAD_MUTEX_NORMAL;
  pthread_mutexattr_settype(&ma, kind);
  CHECK_RC(pthread_mutex_init(&g_mutex, &ma), 0);
  pthread_mutexattr_destroy(&ma);
  CHECK_RC(pthread_cond_init(&g_cond, NULL), 0);
  CHECK(sem_init(&g_sem, 0, 0) == 0);
  CHECK_RC(pthread_rwlock_init(&g_rwlock, NULL), 0);
  g_word = 0;
  g_tickets = 0;
  atomic_store(&g_released, 0);
  for (int i = 0; i < kWaiters; ++i) {
    atomic_store(&g_tids[i], 0);
    atomic_store(&g_order[i], 0);
  }
}

/* One case: the waiters queue, the main thread releases them. */
static void run_case(enum How how, enum What what) {
  g_how = how;
  g_what = what;
  set_up(what);
  if (what <= kMutexRecursive) CHECK_RC(pthread_mutex_lock(&g_mutex), 0);
  if (what == kRwlock) CHECK_RC(pthread_rwlock_wrlock(&g_rwlock), 0);
  pthread_t t[kWaiters];
  for (int i = 0; i < kWaiters; ++i) {
    pthread_attr_t a;
    pthread_attr_init(&a);
    if (how == kExplicitAttr) {
      struct sched_param p = {.sched_priority = kPriorities[i]};
      CHECK_RC(pthread_attr_setinheritsched(&a, PTHREAD_EXPLICIT_SCHED), 0);
      CHECK_RC(pthread_attr_setschedpolicy(&a, SCHED_FIFO), 0);
      CHECK_RC(pthread_attr_setschedparam(&a, &p), 0);
    }
    const int rc = pthread_create(&t[i], &a, waiter, (void*)(intptr_t)i);
    if (rc != 0) FATAL("pthread_create: %s", strerror(rc));
    pthread_attr_destroy(&a);
    /* Queued in the order made, whatever their priorities. */
    wait_asleep(i + 1);
  }
  switch (what) {
    case kMutexNormal:
    case kMutexErrorCheck:
    case kMutexRecursive:
      /* Each waiter's unlock releases the next. */
      CHECK_RC(pthread_mutex_unlock(&g_mutex), 0);
      break;
    case kCondSignal:
      for (int k = 1; k <= kWaiters; ++k) {
        CHECK_RC(pthread_mutex_lock(&g_mutex), 0);
        ++g_tickets;
        CHECK_RC(pthread_cond_signal(&g_cond), 0);
        CHECK_RC(pthread_mutex_unlock(&g_mutex), 0);
        wait_released(k);
      }
      break;
    case kCondBroadcast:
      /* All wake (or move to the mutex) while it is held; the mutex then
       * passes from one to the next. */
      CHECK_RC(pthread_mutex_lock(&g_mutex), 0);
      g_tickets = kWaiters;
      CHECK_RC(pthread_cond_broadcast(&g_cond), 0);
      CHECK_RC(pthread_mutex_unlock(&g_mutex), 0);
      break;
    case kSemaphore:
      for (int k = 1; k <= kWaiters; ++k) {
        CHECK(sem_post(&g_sem) == 0);
        wait_released(k);
      }
      break;
    case kRwlock:
      CHECK_RC(pthread_rwlock_unlock(&g_rwlock), 0);
      break;
    case kFutex:
      CHECK(shim_futex(&g_word, FUTEX_WAKE_PRIVATE, 2, NULL) == 2);
      wait_released(2);
      CHECK(shim_futex(&g_word, FUTEX_WAKE_PRIVATE, 1, NULL) == 1);
      break;
    case kWhatCount:
      break;
  }
  wait_released(kWaiters);
  for (int i = 0; i < kWaiters; ++i) CHECK_RC(pthread_join(t[i], NULL), 0);
  int ok = 1;
  for (int i = 0; i < kWaiters; ++i) {
    if (atomic_load(&g_order[i]) != kExpected[i]) ok = 0;
  }
  if (!ok) {
    SHIM_FAIL("%s, %s: released in priority order %d, %d, %d; want 30, 20, 10",
              kHowName[how], kWhatName[what], atomic_load(&g_order[0]),
              atomic_load(&g_order[1]), atomic_load(&g_order[2]));
  } else {
    printf("ok: %s, %s: 30, 20, 10\n", kHowName[how], kWhatName[what]);
  }
  CHECK_RC(pthread_mutex_destroy(&g_mutex), 0);
  CHECK_RC(pthread_cond_destroy(&g_cond), 0);
  CHECK(sem_destroy(&g_sem) == 0);
  CHECK_RC(pthread_rwlock_destroy(&g_rwlock), 0);
}

static void run_all(enum How how) {
  for (int w = 0; w < kWhatCount; ++w) run_case(how, (enum What)w);
}

int main(int argc, char** argv) {
  const int inherited = argc > 1 && strcmp(argv[1], "inherited") == 0;
  shim_test_start(inherited ? "rt_priority (started real-time)" : "rt_priority",
                  60);
  /* One CPU: the first the process may use. */
  cpu_set_t set;
  CHECK(sched_getaffinity(0, sizeof(set), &set) == 0);
  int cpu = 0;
  while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &set)) ++cpu;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  CHECK(sched_setaffinity(0, sizeof(set), &set) == 0);
  CHECK(sem_init(&g_never, 0, 0) == 0);

  if (inherited) {
    /* Started SCHED_FIFO (below): every thread inherits it. */
    if (sched_getscheduler(0) != SCHED_FIFO) FATAL("not started SCHED_FIFO");
    run_all(kRawSyscall);
    return shim_test_finish();
  }
  struct sched_param p = {.sched_priority = kMainPriority};
  if (sched_setscheduler(0, SCHED_FIFO, &p) != 0) {
    if (errno == EPERM) {
      printf("SKIP: SCHED_FIFO is not allowed here (EPERM: needs "
             "CAP_SYS_NICE or an RLIMIT_RTPRIO of %d)\n", kMainPriority);
      return 77;
    }
    FATAL("sched_setscheduler: %s", strerror(errno));
  }
  run_all(kExplicitAttr);
  run_all(kSetSchedParam);
  run_all(kSetSchedPrio);
  run_all(kSyscallFunction);
  if (shim_test_finish() != 0) return 1;
  /* Again as a process started real-time. */
  fflush(stdout);
  execl("/proc/self/exe", argv[0], "inherited", (char*)NULL);
  FATAL("execl: %s", strerror(errno));
}
