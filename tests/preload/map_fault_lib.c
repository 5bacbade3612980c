/* Fault injection for every mapping the shim makes (map_fault_sweep_test).
 *
 * Preloaded ahead of the shim (LD_PRELOAD=map_fault_lib.so:libparklot_preload.so),
 * this library's mmap and mmap64 come first in the global scope, so the
 * shim's calls to mmap (MapAnonymous, base/anon_mmap.h: the shim's one way
 * to map memory, and so the diagnostics object's) reach it through their
 * PLT entries, with no change to the shim. A call whose return address lies
 * in an object named libparklot* is counted, and the MAP_FAULT_N-th such
 * call fails with ENOMEM, as the kernel fails a mapping it cannot make
 * (RLIMIT_AS, the map count, strict overcommit). Every other mapping
 * (glibc's own calls inside malloc and pthread_create never pass a PLT;
 * the program's) goes to glibc's mmap untouched.
 *
 *   MAP_FAULT_N=N        fail the N-th counted mapping (0 or unset: none)
 *   MAP_FAULT_LOG=PATH   append one line per counted mapping:
 *                        "map_fault: pid P #n SIZE bytes ok|failed"
 *
 * The count lives in the process's memory: a forked child goes on from the
 * parent's count, so one N may fail one mapping in each. */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

typedef void* (*MmapFn)(void*, size_t, int, int, int, off_t);

static MmapFn g_real;
static long g_fail_at;
static int g_log_fd = -1;
static unsigned long g_count;
static int g_ready;

/* Lazy: the shim may map before this library's constructor has run. */
static void setup(void) {
  if (__atomic_load_n(&g_ready, __ATOMIC_ACQUIRE)) return;
  MmapFn real = (MmapFn)dlsym(RTLD_NEXT, "mmap");
  const char* n = getenv("MAP_FAULT_N");
  const long fail_at = n != NULL ? atol(n) : 0;
  const char* log = getenv("MAP_FAULT_LOG");
  int fd = -1;
  if (log != NULL && *log != '\0') {
    fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  }
  /* Two threads may race here: both compute the same values. */
  g_real = real;
  g_fail_at = fail_at;
  int none = -1;
  if (fd >= 0 && !__atomic_compare_exchange_n(&g_log_fd, &none, fd, 0,
                                              __ATOMIC_RELAXED,
                                              __ATOMIC_RELAXED)) {
    close(fd);  /* the other thread's descriptor is kept */
  }
  __atomic_store_n(&g_ready, 1, __ATOMIC_RELEASE);
}

__attribute__((constructor)) static void map_fault_init(void) { setup(); }

/* Whether `pc` lies in the shim or its diagnostics object. dladdr reads
 * the loader's lists under its lock; no mapping of the shim is made inside
 * a signal handler by the workloads this serves. */
static int from_parklot(const void* pc) {
  Dl_info info;
  if (dladdr(pc, &info) == 0 || info.dli_fname == NULL) return 0;
  const char* base = strrchr(info.dli_fname, '/');
  base = base != NULL ? base + 1 : info.dli_fname;
  return strncmp(base, "libparklot", 10) == 0;
}

static void say(unsigned long n, size_t len, int failed) {
  if (g_log_fd < 0) return;
  char line[128];
  const int k = snprintf(line, sizeof(line), "map_fault: pid %d #%lu %zu bytes %s\n",
                         (int)getpid(), n, len, failed ? "failed" : "ok");
  if (k > 0) {
    ssize_t w = write(g_log_fd, line, (size_t)k);
    (void)w;
  }
}

static void* map(const void* caller, void* addr, size_t len, int prot,
                 int flags, int fd, off_t off) {
  setup();
  if (from_parklot(caller)) {
    const unsigned long n =
        __atomic_add_fetch(&g_count, 1, __ATOMIC_RELAXED);
    const int fail = g_fail_at > 0 && n == (unsigned long)g_fail_at;
    say(n, len, fail);
    if (fail) {
      errno = ENOMEM;
      return MAP_FAILED;
    }
  }
  return g_real(addr, len, prot, flags, fd, off);
}

void* mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  return map(__builtin_return_address(0), addr, len, prot, flags, fd, off);
}

void* mmap64(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  return map(__builtin_return_address(0), addr, len, prot, flags, fd, off);
}
