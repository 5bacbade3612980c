/* Chaos: the reliability faults at once. Worker threads lock, wait, post,
 * time out and exit (and are replaced, so the lot keeps registering and
 * retiring threads and the table keeps growing); a driver sends signals
 * whose handlers sem_post and raw-futex-wake, cancels threads blocked in
 * sem_wait and pthread_cond_wait, and forks children that use the lot.
 * Self-checking and bounded: every semaphore unit is accounted for (posted
 * = taken + left), the mutex's counter equals the increments made, every
 * child exits 0 in time, and every second each worker slot made progress.
 *
 *   chaos_prog [SECONDS]   (default 4) */
#include "tests/preload/shim_test_util.h"

#include <linux/futex.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <sys/wait.h>

enum { kSlots = 8, kVictims = 2, kOpsPerLife = 400 };

static sem_t g_sem;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static long g_counter;                 /* guarded by g_mu */
static atomic_long g_increments, g_posted, g_taken, g_handled, g_cancels;
static atomic_uint g_word;             /* raw futex word */
static atomic_long g_progress[kSlots];
static atomic_int g_stop;

static long futex(atomic_uint* w, int op, unsigned val, const struct timespec* ts) {
  return syscall(SYS_futex, w, op, val, ts, NULL, 0);
}

static void on_signal(int sig) {
  (void)sig;
  const int saved = errno;
  if (sem_post(&g_sem) == 0) atomic_fetch_add(&g_posted, 1);
  atomic_fetch_add(&g_word, 1);
  futex(&g_word, FUTEX_WAKE_PRIVATE, 1, NULL);
  atomic_fetch_add(&g_handled, 1);
  errno = saved;
}

/* One worker life: kOpsPerLife random operations, then the thread exits. */
static void* worker(void* arg) {
  const long slot = (long)arg;
  uint32_t rng = (uint32_t)(slot + 1) * 2654435761u ^ (uint32_t)shim_now_ns(CLOCK_MONOTONIC);
  for (int i = 0; i < kOpsPerLife && !atomic_load(&g_stop); ++i) {
    switch (shim_rand(&rng) % 5) {
      case 0: {
        struct timespec d = shim_deadline_ms(CLOCK_REALTIME, shim_rand(&rng) % 3);
        if (sem_timedwait(&g_sem, &d) == 0) atomic_fetch_add(&g_taken, 1);
        break;
      }
      case 1:
        if (sem_post(&g_sem) == 0) atomic_fetch_add(&g_posted, 1);
        break;
      case 2: {
        pthread_mutex_lock(&g_mu);
        ++g_counter;
        atomic_fetch_add(&g_increments, 1);
        if ((shim_rand(&rng) & 3) == 0) {
          struct timespec d = shim_deadline_ms(CLOCK_REALTIME, 1);
          pthread_cond_timedwait(&g_cv, &g_mu, &d);
        } else {
          pthread_cond_signal(&g_cv);
        }
        pthread_mutex_unlock(&g_mu);
        break;
      }
      case 3: {
        struct timespec rel = {0, (long)(shim_rand(&rng) % 500) * 1000};
        futex(&g_word, FUTEX_WAIT_PRIVATE, atomic_load(&g_word), &rel);
        break;
      }
      default:
        if ((shim_rand(&rng) & 15) == 0) shim_sleep_us(shim_rand(&rng) % 200);
        break;
    }
    atomic_fetch_add(&g_progress[slot], 1);
  }
  return NULL;
}

/* Cancellation victims: block in sem_wait or pthread_cond_wait until the
 * driver cancels them. A cancelled sem_wait takes no unit (POSIX). */
static void unlock_mu(void* arg) { pthread_mutex_unlock((pthread_mutex_t*)arg); }
static void* victim(void* arg) {
  if ((long)arg & 1) {
    for (;;) {
      if (sem_wait(&g_sem) == 0) atomic_fetch_add(&g_taken, 1);
    }
  }
  pthread_mutex_lock(&g_mu);
  pthread_cleanup_push(unlock_mu, &g_mu);
  for (;;) pthread_cond_wait(&g_cv, &g_mu);
  pthread_cleanup_pop(1);
  return NULL;
}

/* A child: fresh objects, threads, a semaphore round trip; exits 0. */
static pthread_mutex_t g_child_mu = PTHREAD_MUTEX_INITIALIZER;
static long g_child_count;
static void* child_thread(void* arg) {
  sem_t* s = (sem_t*)arg;
  for (int i = 0; i < 2000; ++i) {
    pthread_mutex_lock(&g_child_mu);
    ++g_child_count;
    pthread_mutex_unlock(&g_child_mu);
  }
  sem_post(s);
  return NULL;
}
static void run_child(void) {
  shim_test_watchdog(20);
  pthread_mutex_init(&g_child_mu, NULL);
  sem_t s;
  sem_init(&s, 0, 0);
  pthread_t t[3];
  for (int i = 0; i < 3; ++i) t[i] = shim_spawn(child_thread, &s);
  for (int i = 0; i < 3; ++i) sem_wait(&s);
  for (int i = 0; i < 3; ++i) pthread_join(t[i], NULL);
  _exit(g_child_count == 3 * 2000 ? 0 : 4);
}

int main(int argc, char** argv) {
  shim_test_start("chaos", 150);
  const int seconds = argc > 1 ? atoi(argv[1]) : 4;
  sem_init(&g_sem, 0, 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
  sa.sa_flags = 0;  /* interrupts waits: EINTR paths */
  CHECK(sigaction(SIGUSR2, &sa, NULL) == 0);

  pthread_t workers[kSlots];
  long seen[kSlots] = {0};
  for (long i = 0; i < kSlots; ++i) workers[i] = shim_spawn(worker, (void*)i);
  pthread_t victims[kVictims];
  long victim_kind = 0;
  for (int i = 0; i < kVictims; ++i) victims[i] = shim_spawn(victim, (void*)victim_kind++);

  uint32_t rng = 777;
  int forks = 0, lives = kSlots;
  const int64_t start = shim_now_ns(CLOCK_MONOTONIC);
  int64_t next_check = start + 1000000000;
  while (shim_now_ns(CLOCK_MONOTONIC) < start + (int64_t)seconds * 1000000000) {
    const uint32_t r = shim_rand(&rng) % 100;
    const int w = (int)(shim_rand(&rng) % kSlots);
    if (r < 80) {
      pthread_kill(workers[w], (r & 1) ? SIGUSR1 : SIGUSR2);
    } else if (r < 90) {
      /* A finished life ends and a new thread takes the slot. */
      if (pthread_tryjoin_np(workers[w], NULL) == 0) {
        workers[w] = shim_spawn(worker, (void*)(long)w);
        ++lives;
      }
    } else if (r < 95) {
      const int v = (int)(shim_rand(&rng) % kVictims);
      pthread_cancel(victims[v]);
      pthread_join(victims[v], NULL);
      atomic_fetch_add(&g_cancels, 1);
      victims[v] = shim_spawn(victim, (void*)victim_kind++);
    } else if (r < 97) {
      const pid_t pid = fork();
      if (pid == 0) run_child();
      int status = 0;
      const int64_t limit = shim_now_ns(CLOCK_MONOTONIC) + 15000000000;
      while (waitpid(pid, &status, WNOHANG) == 0) {
        if (shim_now_ns(CLOCK_MONOTONIC) > limit) {
          kill(pid, SIGKILL);
          FATAL("child %d hung", (int)pid);
        }
        shim_sleep_us(200);
      }
      CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      ++forks;
    }
    shim_sleep_us(20 + shim_rand(&rng) % 60);
    if (shim_now_ns(CLOCK_MONOTONIC) >= next_check) {
      long total = 0;
      for (int i = 0; i < kSlots; ++i) total += atomic_load(&g_progress[i]) - seen[i];
      if (total == 0) FATAL("no worker made progress for 1 s");
      for (int i = 0; i < kSlots; ++i) seen[i] = atomic_load(&g_progress[i]);
      next_check += 1000000000;
    }
  }
  atomic_store(&g_stop, 1);
  for (int i = 0; i < kSlots; ++i) pthread_join(workers[i], NULL);
  for (int i = 0; i < kVictims; ++i) {
    pthread_cancel(victims[i]);
    pthread_join(victims[i], NULL);
  }
  int left = -1;
  sem_getvalue(&g_sem, &left);
  const long posted = atomic_load(&g_posted), taken = atomic_load(&g_taken);
  if (posted != taken + left) {
    SHIM_FAIL("units: posted %ld, taken %ld, left %d", posted, taken, left);
  }
  pthread_mutex_lock(&g_mu);
  CHECK(g_counter == atomic_load(&g_increments));
  pthread_mutex_unlock(&g_mu);
  CHECK(atomic_load(&g_handled) > 0);
  printf("chaos: %d lives, %ld handlers, %ld cancels, %d forks, %ld units\n",
         lives, atomic_load(&g_handled), atomic_load(&g_cancels), forks, posted);
  return shim_test_finish();
}
