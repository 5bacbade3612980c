/* The program of secure_mode_test: installed setuid root there and run by
 * an unprivileged user with the shim in /etc/ld.so.preload. Prints, on
 * one line of stdout, whether the shim is loaded, whether the process is
 * in secure mode (AT_SECURE), its real and effective uid, and the
 * configuration the shim took (parklot_preload_describe); then contends
 * one mutex from four threads, so that statistics and lock-order reports
 * would have something to say, and leaves by exit() (the statistics
 * report's atexit hook). Plain -pthread C, no parklot headers. */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

static pthread_mutex_t g_a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_b = PTHREAD_MUTEX_INITIALIZER;
static long g_count;

static void* worker(void* arg) {
  (void)arg;
  for (int i = 0; i < 20000; ++i) {
    pthread_mutex_lock(&g_a);
    ++g_count;
    pthread_mutex_unlock(&g_a);
  }
  return NULL;
}

int main(void) {
  int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT,
                                             "parklot_preload_active");
  size_t (*describe)(char*, size_t) =
      (size_t (*)(char*, size_t))dlsym(RTLD_DEFAULT,
                                       "parklot_preload_describe");
  char lot[512] = "none";
  if (describe != NULL) describe(lot, sizeof(lot));
  for (char* p = lot; *p != '\0'; ++p) {
    if (*p == '\n') *p = ' ';
  }
  printf("shim=%d secure=%lu ruid=%d euid=%d lot=%s\n",
         active != NULL && active(), getauxval(AT_SECURE), (int)getuid(),
         (int)geteuid(), lot);
  fflush(stdout);
  /* A lock-order inversion (a then b, later b then a; never concurrent):
   * PARKLOT_DEADLOCK=report would report it. */
  pthread_mutex_lock(&g_a);
  pthread_mutex_lock(&g_b);
  pthread_mutex_unlock(&g_b);
  pthread_mutex_unlock(&g_a);
  pthread_mutex_lock(&g_b);
  pthread_mutex_lock(&g_a);
  pthread_mutex_unlock(&g_a);
  pthread_mutex_unlock(&g_b);
  pthread_t t[4];
  for (int i = 0; i < 4; ++i) pthread_create(&t[i], NULL, worker, NULL);
  for (int i = 0; i < 4; ++i) pthread_join(t[i], NULL);
  if (g_count != 4 * 20000) {
    fprintf(stderr, "secure_mode_prog: count %ld\n", g_count);
    return 1;
  }
  exit(0);
}
