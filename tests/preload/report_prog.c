/* A program whose lock statistics have a known first contended caller
 * (contend(), waiting on a mutex main holds) and that forks two children:
 * one leaves by _exit(), one by exit(). It prints one line to stdout (with
 * the mutex's address, which the report's lock column must show) and
 * nothing to stderr itself: report_sink_test.sh checks where PARKLOT_STATS
 * sends the reports, and that the program's own output is unchanged. */
#include <sys/wait.h>

#include "shim_test_util.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_ready;

__attribute__((noinline)) static void contend(void) {
  pthread_mutex_lock(&g_mu);
  pthread_mutex_unlock(&g_mu);
}

static void* waiter(void* arg) {
  (void)arg;
  __atomic_store_n(&g_ready, 1, __ATOMIC_RELEASE);
  contend();
  return NULL;
}

static void child(int by_underscore_exit) {
  fflush(stdout);  /* the child's exit() must not print it again */
  pid_t pid = fork();
  if (pid < 0) FATAL("fork failed");
  if (pid == 0) {
    pthread_mutex_lock(&g_mu);
    pthread_mutex_unlock(&g_mu);
    if (by_underscore_exit) _exit(0);
    exit(0);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void) {
  shim_test_start("report_prog", 60);
  /* main holds the mutex while the thread comes to lock it; twenty rounds,
   * so that at least one lock by contend() waits. */
  for (int round = 0; round < 20; ++round) {
    __atomic_store_n(&g_ready, 0, __ATOMIC_RELAXED);
    pthread_mutex_lock(&g_mu);
    pthread_t t = shim_spawn(waiter, NULL);
    while (!__atomic_load_n(&g_ready, __ATOMIC_ACQUIRE)) shim_sleep_us(100);
    shim_sleep_ms(20);
    pthread_mutex_unlock(&g_mu);
    pthread_join(t, NULL);
  }
  child(1);
  child(0);
  printf("report_prog done, mutex at %p\n", (void*)&g_mu);
  return shim_test_finish();
}
