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

#include "tests/preload/report_workload.h"

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
  if (report_workload() != 0) {
    fprintf(stderr, "secure_mode_prog: an increment was lost\n");
    return 1;
  }
  exit(0);
}
