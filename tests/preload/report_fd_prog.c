/* A daemon's start, as report_files_test runs it with PARKLOT_STATS=1 or
 * PARKLOT_DEADLOCK=report: it checks that no descriptor beyond 0-2 is open
 * (the shim must hold none the program can see: docs/design.md section 6,
 * invariant 9), closes every descriptor from 3 up as daemons do, opens its own
 * data file (argv[1]) and moves it to descriptor 100, writes its data there,
 * makes a lock-order inversion and some contention, and exits. The reports must
 * go to its stderr, never into the data file. Plain -pthread C. */
#define _GNU_SOURCE 1
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/preload/report_workload.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  int failures = 0;
  DIR* d = opendir("/proc/self/fd");
  if (d == NULL) return 2;
  for (struct dirent* e; (e = readdir(d)) != NULL;) {
    const int fd = atoi(e->d_name);
    if (e->d_name[0] == '.' || fd <= 2 || fd == dirfd(d)) continue;
    char target[256] = "";
    char link[64];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    const ssize_t n = readlink(link, target, sizeof(target) - 1);
    target[n > 0 ? n : 0] = '\0';
    fprintf(stderr, "FAIL: descriptor %d (%s) open before main\n", fd, target);
    ++failures;
  }
  closedir(d);
  for (int fd = 3; fd < 1024; ++fd) close(fd);
  const int data = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (data < 0 || dup3(data, 100, O_CLOEXEC) != 100) return 2;
  close(data);
  static const char kData[] = "the daemon's data\n";
  if (write(100, kData, sizeof(kData) - 1) != sizeof(kData) - 1) return 2;
  const int lost = report_workload();
  return failures == 0 && lost == 0 ? 0 : 1;
}
