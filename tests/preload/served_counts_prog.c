/* An exact number of each primitive the shim serves, from one thread (no
 * contention, nothing of glibc's): served_counts_test checks that the
 * statistics report's "served by parklot" line counts each of them.
 *
 *   served_counts_prog fork   then forks two children that serve nothing,
 *                             one leaving by _exit(), one by exit(): neither
 *                             may print a report */
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <threads.h>
#include <unistd.h>

static void nothing(void) {}

/* A child that serves nothing and leaves by _exit() or exit(). */
static int Child(int by_underscore_exit) {
  fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) return 0;
  if (pid == 0) {
    if (by_underscore_exit) _exit(0);
    exit(0);
  }
  int status = 0;
  return waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
}

int main(int argc, char** argv) {
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
  pthread_cond_t c = PTHREAD_COND_INITIALIZER;
  pthread_barrier_t b;
  pthread_once_t once = PTHREAD_ONCE_INIT;
  sem_t s;
  if (pthread_barrier_init(&b, NULL, 1) != 0 || sem_init(&s, 0, 0) != 0) {
    return 2;
  }
  for (int i = 0; i < 3; ++i) {  /* 3 mutex acquisitions */
    pthread_mutex_lock(&m);
    pthread_mutex_unlock(&m);
  }
  pthread_rwlock_rdlock(&rw);  /* 5 rwlock acquisitions */
  pthread_rwlock_unlock(&rw);
  pthread_rwlock_wrlock(&rw);
  pthread_rwlock_unlock(&rw);
  pthread_rwlock_tryrdlock(&rw);
  pthread_rwlock_unlock(&rw);
  pthread_rwlock_trywrlock(&rw);
  pthread_rwlock_unlock(&rw);
  pthread_rwlock_rdlock(&rw);
  pthread_rwlock_unlock(&rw);
  for (int i = 0; i < 7; ++i) sem_post(&s);  /* 7 posts, 7 waits */
  for (int i = 0; i < 6; ++i) sem_wait(&s);
  sem_trywait(&s);
  for (int i = 0; i < 4; ++i) pthread_barrier_wait(&b);  /* 4 barrier waits */
  pthread_once(&once, nothing);  /* 2 once calls */
  pthread_once(&once, nothing);
  pthread_cond_signal(&c);  /* 1 signal, 2 broadcasts */
  pthread_cond_broadcast(&c);
  pthread_cond_broadcast(&c);
  if (argc > 1 && strcmp(argv[1], "fork") == 0) {
    if (!Child(1) || !Child(0)) return 3;
  }
  return 0;
}
