/* Chaos: the reliability faults at once. Worker threads lock, wait, post,
 * time out and exit (and are replaced, so the lot keeps registering and
 * retiring threads and the table keeps growing); a driver sends signals
 * whose handlers sem_post and raw-futex-wake, cancels threads blocked in
 * sem_wait and pthread_cond_wait, forks children that use the lot, and
 * releases bursts of new threads into the lot while the address space is
 * exhausted, so that the growth their registration asks for fails (run with
 * PARKLOT_STATS=1, chaos_test.sh checks the report counts failures).
 * Self-checking and bounded: every semaphore unit is accounted for (posted
 * = taken + left), the mutex's counter equals the increments made, every
 * child exits 0 in time, and every second each worker slot made progress.
 *
 *   chaos_prog [SECONDS [--no-fork-or-exhaustion]]   (default 4 s)
 * The option leaves out forks and bursts, for --config=asan, whose runtime
 * cannot fork safely or run out of address space. */
#include "tests/preload/shim_test_util.h"

#include <linux/futex.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/resource.h>
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

static void on_signal(int sig) {
  (void)sig;
  const int saved = errno;
  if (sem_post(&g_sem) == 0) atomic_fetch_add(&g_posted, 1);
  atomic_fetch_add(&g_word, 1);
  shim_futex(&g_word, FUTEX_WAKE_PRIVATE, 1, NULL);
  atomic_fetch_add(&g_handled, 1);
  errno = saved;
}

/* Threads that made their first lot call (their registration). A burst
 * waits for every thread spawned before it: a registration that grows
 * liburcu-bp's reader arena, preempted between the lot's address-space
 * probe and liburcu's own mapping while the burst exhausts the address
 * space, made liburcu abort the process (the table before retired tables
 * stayed mapped: CHANGELOG.md). */
static pthread_mutex_t g_hello = PTHREAD_MUTEX_INITIALIZER;
static atomic_int g_registered;
static void say_hello(void) {
  pthread_mutex_lock(&g_hello);
  pthread_mutex_unlock(&g_hello);
  atomic_fetch_add(&g_registered, 1);
}

/* One worker life: kOpsPerLife random operations, then the thread exits. */
static void* worker(void* arg) {
  say_hello();
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
        shim_futex(&g_word, FUTEX_WAIT_PRIVATE, atomic_load(&g_word), &rel);
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
  say_hello();
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

/* Bursts: threads created beforehand wait on a pipe (not the lot), so
 * their first lock, and the table growth it asks for, comes only when the
 * address space is exhausted. */
enum { kBurst = 48, kMaxMaps = 4096 };
static int g_gate[2];
/* All of a burst stay alive until each has registered: an exiting thread
 * would free its stack (glibc keeps only 40 MiB of them), and with it
 * room for the table to grow into. */
static pthread_barrier_t g_burst_all_in;
static void* burst_thread(void* arg) {
  (void)arg;
  char c;
  while (read(g_gate[0], &c, 1) != 1) {
  }
  pthread_mutex_lock(&g_mu);
  ++g_counter;
  atomic_fetch_add(&g_increments, 1);
  pthread_mutex_unlock(&g_mu);
  if (sem_post(&g_sem) == 0) atomic_fetch_add(&g_posted, 1);
  pthread_barrier_wait(&g_burst_all_in);
  return NULL;
}

static void* g_maps[kMaxMaps];
static size_t g_map_sizes[kMaxMaps];

/* Caps the address space near its current size and maps away the rest;
 * then lets the burst in; then gives the memory back. */
static int burst_under_exhaustion(void) {
  pthread_t t[kBurst];
  int n = 0;
  while (n < kBurst && pthread_create(&t[n], NULL, burst_thread, NULL) == 0) ++n;
  long pages = 0;
  FILE* f = fopen("/proc/self/statm", "r");
  if (f == NULL || fscanf(f, "%ld", &pages) != 1) FATAL("statm");
  fclose(f);
  struct rlimit old, rl;
  if (getrlimit(RLIMIT_AS, &old) != 0) FATAL("getrlimit");
  rl.rlim_cur = (rlim_t)pages * 4096 + (4 << 20);
  rl.rlim_max = old.rlim_max;
  if (setrlimit(RLIMIT_AS, &rl) != 0) FATAL("setrlimit: %s", strerror(errno));
  int maps = 0;
  for (size_t sz = 1 << 20; sz >= 4096; sz /= 2) {
    while (maps < kMaxMaps) {
      void* p = mmap(NULL, sz, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) break;
      g_maps[maps] = p;
      g_map_sizes[maps++] = sz;
    }
  }
  pthread_barrier_init(&g_burst_all_in, NULL, (unsigned)n + 1);
  for (int i = 0; i < n; ++i) CHECK(write(g_gate[1], "x", 1) == 1);
  pthread_barrier_wait(&g_burst_all_in);
  for (int i = 0; i < maps; ++i) munmap(g_maps[i], g_map_sizes[i]);
  if (setrlimit(RLIMIT_AS, &old) != 0) SHIM_FAIL("setrlimit back");
  for (int i = 0; i < n; ++i) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&g_burst_all_in);
  return n;
}

/* What the driver is doing, for the watchdog's message: a hang names the
 * action it happened in. */
static const char* const kActions[] = {
    "start", "signal", "join+respawn", "cancel+join victim", "burst",
    "fork+wait", "final joins", "final checks"};
enum { kStart, kSignal, kRespawn, kCancel, kBursting, kFork, kFinalJoins, kFinalChecks };
static volatile sig_atomic_t g_action;
static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "FAIL: watchdog: chaos hung; the driver was in: ";
  const char* action = kActions[g_action];
  ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
  w = write(STDERR_FILENO, action, strlen(action));
  w = write(STDERR_FILENO, "\n", 1);
  (void)w;
  _exit(3);
}

int main(int argc, char** argv) {
  /* The watchdog fires well before chaos_test.sh's timeout, so that a hang
   * reports where the driver was. */
  shim_test_start("chaos", 60);
  signal(SIGALRM, on_alarm);
  const int seconds = argc > 1 ? atoi(argv[1]) : 4;
  const int calm = argc > 2 && strcmp(argv[2], "--no-fork-or-exhaustion") == 0;
  sem_init(&g_sem, 0, 0);
  CHECK(pipe(g_gate) == 0);
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
  int forks = 0, lives = kSlots, bursts = 0, spawned = kSlots + kVictims;
  const int64_t start = shim_now_ns(CLOCK_MONOTONIC);
  int64_t next_check = start + 1000000000;
  /* Of the current progress window, the time the driver spent inside its
   * own actions, and the windows excused for it. */
  int64_t busy_ns = 0;
  int excused = 0;
  while (shim_now_ns(CLOCK_MONOTONIC) < start + (int64_t)seconds * 1000000000) {
    const int64_t action_start = shim_now_ns(CLOCK_MONOTONIC);
    const uint32_t r = shim_rand(&rng) % 100;
    const int w = (int)(shim_rand(&rng) % kSlots);
    g_action = r < 80 ? kSignal : r < 90 ? kRespawn : r < 95 ? kCancel
             : r < 96 ? kBursting : kFork;
    if (r < 80) {
      pthread_kill(workers[w], (r & 1) ? SIGUSR1 : SIGUSR2);
    } else if (r < 90) {
      /* A finished life ends and a new thread takes the slot. */
      if (pthread_tryjoin_np(workers[w], NULL) == 0) {
        workers[w] = shim_spawn(worker, (void*)(long)w);
        ++lives;
        ++spawned;
      }
    } else if (r < 95) {
      const int v = (int)(shim_rand(&rng) % kVictims);
      pthread_cancel(victims[v]);
      pthread_join(victims[v], NULL);
      atomic_fetch_add(&g_cancels, 1);
      victims[v] = shim_spawn(victim, (void*)victim_kind++);
      ++spawned;
    } else if (r < 96) {
      const int64_t limit = shim_now_ns(CLOCK_MONOTONIC) + 10000000000;
      while (!calm && atomic_load(&g_registered) < spawned) {
        if (shim_now_ns(CLOCK_MONOTONIC) > limit) {
          FATAL("%d of %d threads made their first lot call in 10 s",
                atomic_load(&g_registered), spawned);
        }
        shim_sleep_us(100);
      }
      if (!calm && burst_under_exhaustion() > 0) ++bursts;
    } else if (r < 98 && !calm) {
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
    busy_ns += shim_now_ns(CLOCK_MONOTONIC) - action_start;
    shim_sleep_us(20 + shim_rand(&rng) % 60);
    const int64_t now = shim_now_ns(CLOCK_MONOTONIC);
    if (now >= next_check) {
      long total = 0;
      for (int i = 0; i < kSlots; ++i) total += atomic_load(&g_progress[i]) - seen[i];
      /* A life is kOpsPerLife operations (a fraction of a second) and only
       * the driver starts the next: a window the driver spent mostly inside
       * one action (a fork child, a burst, a cancelled victim's join, each
       * bounded on its own) says nothing about the lot. */
      if (total == 0 && busy_ns < 500000000) {
        FATAL("no worker made progress for 1 s (the driver busy %lld ms of it)",
              (long long)(busy_ns / 1000000));
      }
      excused += total == 0;
      for (int i = 0; i < kSlots; ++i) seen[i] = atomic_load(&g_progress[i]);
      busy_ns = 0;
      next_check = now + 1000000000;
    }
  }
  atomic_store(&g_stop, 1);
  g_action = kFinalJoins;
  for (int i = 0; i < kSlots; ++i) pthread_join(workers[i], NULL);
  for (int i = 0; i < kVictims; ++i) {
    pthread_cancel(victims[i]);
    pthread_join(victims[i], NULL);
  }
  g_action = kFinalChecks;
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
  CHECK(calm || bursts > 0);
  printf("chaos: %d lives, %ld handlers, %ld cancels, %d forks, %d bursts, %ld units, "
         "%d idle windows while the driver was busy\n",
         lives, atomic_load(&g_handled), atomic_load(&g_cancels), forks, bursts,
         posted, excused);
  return shim_test_finish();
}
