/* The program the launcher tests run under `parklot run` (gcc builds it at
 * test time, as a user's program would be). Modes:
 *   none            locks nothing, exits 0
 *   lock            locks and unlocks a pthread mutex, exits 0
 *   contended       one thread waits about 100 ms for a mutex the other
 *                   holds (a wait any profile rate samples), exits 0
 *   cycle           locks A then B, then B then A (a lock-order cycle),
 *                   exits 0
 *   reader-gone     locks a mutex, writes lines to stdout until the reader
 *                   is gone (EPIPE), exits 0: whatever the launcher writes
 *                   after that finds no reader
 *   hang-after-cycle PIDFILE
 *                   writes until the reader is gone, makes a lock-order
 *                   cycle (reported at once), writes its pid to PIDFILE,
 *                   then waits for a signal forever
 *   hang PIDFILE    writes its pid to PIDFILE, then waits forever
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t b = PTHREAD_MUTEX_INITIALIZER;

static void LockUnlock(pthread_mutex_t* m) {
  pthread_mutex_lock(m);
  pthread_mutex_unlock(m);
}

static void Cycle(void) {
  pthread_mutex_lock(&a);
  LockUnlock(&b);
  pthread_mutex_unlock(&a);
  pthread_mutex_lock(&b);
  LockUnlock(&a);
  pthread_mutex_unlock(&b);
}

/* Returns once a write to stdout fails: the reader closed the pipe. */
static void WriteUntilReaderGone(void) {
  signal(SIGPIPE, SIG_IGN);
  while (write(1, "line\n", 5) == 5) {
  }
}

static void WritePid(const char* file) {
  char tmp[4096];
  snprintf(tmp, sizeof(tmp), "%s.tmp", file);
  FILE* f = fopen(tmp, "w");
  if (f == NULL) _exit(3);
  fprintf(f, "%d\n", (int)getpid());
  fclose(f);
  rename(tmp, file); /* whole, or not there */
}

static void* Waiter(void* arg) {
  LockUnlock(&a);
  return arg;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "none") == 0) return 0;
  if (strcmp(mode, "lock") == 0) {
    LockUnlock(&a);
    return 0;
  }
  if (strcmp(mode, "contended") == 0) {
    pthread_mutex_lock(&a);
    pthread_t t;
    pthread_create(&t, NULL, Waiter, NULL);
    const struct timespec wait = {0, 100 * 1000 * 1000};
    nanosleep(&wait, NULL);
    pthread_mutex_unlock(&a);
    pthread_join(t, NULL);
    return 0;
  }
  if (strcmp(mode, "cycle") == 0) {
    Cycle();
    return 0;
  }
  if (strcmp(mode, "reader-gone") == 0) {
    LockUnlock(&a);
    WriteUntilReaderGone();
    return 0;
  }
  if (strcmp(mode, "hang-after-cycle") == 0 && argc > 2) {
    WriteUntilReaderGone();
    Cycle();
    WritePid(argv[2]);
    for (;;) pause();
  }
  if (strcmp(mode, "hang") == 0 && argc > 2) {
    LockUnlock(&a);
    WritePid(argv[2]);
    for (;;) pause();
  }
  fprintf(stderr, "launcher_prog: unknown mode '%s'\n", mode);
  return 2;
}
