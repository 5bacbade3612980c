/* A private condvar (default attributes) in memory shared with a forked
 * child, used as the Open POSIX test pthread_cond_init/1-3 does: its
 * waiter is in the child, with a process-shared mutex; the parent signals
 * (or broadcasts) it, then the child interrupts the waiter with a signal,
 * and finally sets the predicate and signals (broadcasts) from its own
 * process. POSIX leaves a private condvar used by another process
 * undefined; under glibc the parent's notification is recorded in the
 * condvar's memory, its wake-up does not reach the child, the waiter takes
 * the notification when the signal interrupts its wait, and the child's
 * own notify wakes it again: the waiter leaves. The shim queues a private
 * condvar's waiters in the process's own table: the parent's notify found
 * no waiter there and marked the condvar as having none, in the memory
 * both processes share, so the child's notify returned at once and the
 * waiter stayed parked for ever (the Open POSIX test hung). A notify that
 * finds nobody queued now leaves the word as it is.
 *
 *   cond_other_process_prog [signal|broadcast]   (default: both, in turn) */
#include "tests/preload/shim_test_util.h"

#include <sys/mman.h>
#include <sys/wait.h>

struct shared {
  pthread_mutex_t m;  /* process-shared, as in the Open POSIX test */
  pthread_cond_t c;   /* private */
  int waiting;
  int done;
  int returns;        /* returns from pthread_cond_wait */
};

static struct shared* g;

static void on_usr2(int sig) { (void)sig; }

static void* waiter(void* arg) {
  (void)arg;
  CHECK_RC(pthread_mutex_lock(&g->m), 0);
  g->waiting = 1;
  while (!g->done) {
    CHECK_RC(pthread_cond_wait(&g->c, &g->m), 0);
    g->returns++;
  }
  CHECK_RC(pthread_mutex_unlock(&g->m), 0);
  return NULL;
}

static int notify(int broadcast) {
  return broadcast ? pthread_cond_broadcast(&g->c) : pthread_cond_signal(&g->c);
}

/* The child: the waiter, the interruption, its own notify. */
static void child(int broadcast, int to_parent, int from_parent) {
  shim_test_watchdog(20);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr2;  /* no SA_RESTART */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR2, &sa, NULL);
  pthread_t t = shim_spawn(waiter, NULL);
  /* Waiting once it has set the flag and released the mutex. */
  for (;;) {
    CHECK_RC(pthread_mutex_lock(&g->m), 0);
    const int w = g->waiting;
    CHECK_RC(pthread_mutex_unlock(&g->m), 0);
    if (w) break;
    shim_sleep_ms(1);
  }
  char byte = 'w';
  if (write(to_parent, &byte, 1) != 1) FATAL("write");
  if (read(from_parent, &byte, 1) != 1) FATAL("read");  /* parent notified */
  CHECK_RC(pthread_kill(t, SIGUSR2), 0);
  shim_sleep_ms(100);
  CHECK_RC(pthread_mutex_lock(&g->m), 0);
  g->done = 1;
  CHECK_RC(notify(broadcast), 0);
  CHECK_RC(pthread_mutex_unlock(&g->m), 0);
  struct timespec d = shim_deadline_ms(CLOCK_REALTIME, 5000);
  const int rc = pthread_timedjoin_np(t, NULL, &d);
  if (rc != 0) {
    FATAL("%s: the waiter did not leave its wait after the child's %s (%s)",
          broadcast ? "broadcast" : "signal", broadcast ? "broadcast" : "signal",
          shim_errname(rc));
  }
  fflush(stdout);
  _exit(shim_test_finish());
}

static void run(int broadcast) {
  memset(g, 0, sizeof *g);
  pthread_mutexattr_t ma;
  CHECK_RC(pthread_mutexattr_init(&ma), 0);
  CHECK_RC(pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED), 0);
  CHECK_RC(pthread_mutex_init(&g->m, &ma), 0);
  CHECK_RC(pthread_cond_init(&g->c, NULL), 0);
  int up[2], down[2];
  if (pipe(up) != 0 || pipe(down) != 0) FATAL("pipe");
  fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) FATAL("fork");
  if (pid == 0) child(broadcast, up[1], down[0]);
  char byte;
  if (read(up[0], &byte, 1) != 1) FATAL("read");  /* the child's waiter waits */
  CHECK_RC(pthread_mutex_lock(&g->m), 0);
  CHECK_RC(notify(broadcast), 0);
  CHECK_RC(pthread_mutex_unlock(&g->m), 0);
  if (write(down[1], &byte, 1) != 1) FATAL("write");
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) FATAL("waitpid");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    SHIM_FAIL("%s: the child failed (status 0x%x)", broadcast ? "broadcast" : "signal",
              status);
  } else {
    printf("%s: the waiter left (%d returns from its wait)\n",
           broadcast ? "broadcast" : "signal", g->returns);
  }
  close(up[0]), close(up[1]), close(down[0]), close(down[1]);
}

int main(int argc, char** argv) {
  shim_test_start("cond_other_process", 60);
  g = mmap(NULL, sizeof *g, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (g == MAP_FAILED) FATAL("mmap");
  const char* which = argc > 1 ? argv[1] : "";
  if (strcmp(which, "broadcast") != 0) run(0);
  if (strcmp(which, "signal") != 0) run(1);
  return shim_test_finish();
}
