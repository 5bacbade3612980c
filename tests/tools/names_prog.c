// A program whose contended lock is a static `hot_lock` (tests/tools:
// names_top_test), built by the test with -g.
//   names_prog hold     main holds hot_lock while a thread blocks on it;
//                       prints "holder TID waiter TID" once the waiter is
//                       about to lock, waits for SIGUSR1, then lets it in
//                       and prints "done"
//   names_prog contend  three threads take hot_lock for 2 ms each, 20
//                       times (waits the profile samples); then hot_lock
//                       and cold_lock in both orders, one thread after the
//                       other (a lock-order cycle, never a deadlock)
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t hot_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t cold_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int waiter_tid;

static void* waiter(void* arg) {
  atomic_store(&waiter_tid, gettid());
  pthread_mutex_lock(&hot_lock);
  pthread_mutex_unlock(&hot_lock);
  return arg;
}

static void* worker(void* arg) {
  for (int i = 0; i < 20; ++i) {
    pthread_mutex_lock(&hot_lock);
    nanosleep(&(struct timespec){0, 2000000}, NULL);
    pthread_mutex_unlock(&hot_lock);
  }
  return arg;
}

static void* hot_then_cold(void* arg) {
  pthread_mutex_lock(&hot_lock);
  pthread_mutex_lock(&cold_lock);
  pthread_mutex_unlock(&cold_lock);
  pthread_mutex_unlock(&hot_lock);
  return arg;
}

static void* cold_then_hot(void* arg) {
  pthread_mutex_lock(&cold_lock);
  pthread_mutex_lock(&hot_lock);
  pthread_mutex_unlock(&hot_lock);
  pthread_mutex_unlock(&cold_lock);
  return arg;
}

int main(int argc, char** argv) {
  alarm(60);  // a watchdog: never outlive a broken test
  pthread_t t[3];
  if (argc > 1 && strcmp(argv[1], "hold") == 0) {
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, NULL);
    pthread_mutex_lock(&hot_lock);
    pthread_create(&t[0], NULL, waiter, NULL);
    while (atomic_load(&waiter_tid) == 0) usleep(1000);
    printf("holder %d waiter %d\n", gettid(), atomic_load(&waiter_tid));
    fflush(stdout);
    int sig;
    sigwait(&usr1, &sig);
    pthread_mutex_unlock(&hot_lock);
    pthread_join(t[0], NULL);
    printf("done\n");
    return 0;
  }
  for (int i = 0; i < 3; ++i) pthread_create(&t[i], NULL, worker, NULL);
  for (int i = 0; i < 3; ++i) pthread_join(t[i], NULL);
  pthread_create(&t[0], NULL, hot_then_cold, NULL);
  pthread_join(t[0], NULL);
  pthread_create(&t[0], NULL, cold_then_hot, NULL);
  pthread_join(t[0], NULL);
  printf("done\n");
  return 0;
}
