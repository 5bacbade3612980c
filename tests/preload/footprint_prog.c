/* Takes a mutex, then prints "shim active" or "shim absent" and the file of
 * every object mapped into the process (from /proc/self/maps), one a line:
 * what shim_footprint_test.sh checks a plain run and a diagnostic run map. */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&m);
  pthread_mutex_unlock(&m);
  printf("shim %s\n",
         dlsym(RTLD_DEFAULT, "parklot_preload_active") ? "active" : "absent");
  FILE* maps = fopen("/proc/self/maps", "r");
  if (maps == NULL) return 1;
  char line[4096];
  while (fgets(line, sizeof(line), maps) != NULL) {
    const char* path = strchr(line, '/');
    if (path != NULL) fputs(path, stdout);
  }
  fclose(maps);
  return 0;
}
