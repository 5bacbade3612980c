/* Real memory exhaustion for the test programs (never a test-only knob):
 * cap the address space (RLIMIT_AS) near the process's current size, map
 * away what is left, optionally give a little back, and undo it all.
 * Include after shim_test_util.h (FATAL, SHIM_FAIL). */
#ifndef PARKLOT_TESTS_PRELOAD_ADDRESS_SPACE_UTIL_H_
#define PARKLOT_TESTS_PRELOAD_ADDRESS_SPACE_UTIL_H_

#include <sys/mman.h>
#include <sys/resource.h>

enum { kShimMaxMaps = 8192 };
static void* g_shim_maps[kShimMaxMaps];
static size_t g_shim_map_sizes[kShimMaxMaps];
static int g_shim_nmaps;

/* Caps the address space at its current size plus 8 MiB and maps away what
 * is left (1 MiB pieces down to pages), keeping the old limit in `old`;
 * then gives back `slack` bytes from the tail of the last mappings.
 * Returns the bytes left mapped away. */
static long shim_exhaust_address_space(struct rlimit* old, long slack) {
  long pages = 0;
  FILE* f = fopen("/proc/self/statm", "r");
  if (f == NULL || fscanf(f, "%ld", &pages) != 1) FATAL("statm");
  fclose(f);
  if (getrlimit(RLIMIT_AS, old) != 0) FATAL("getrlimit");
  const rlim_t cap = (rlim_t)pages * 4096 + (8 << 20);
  struct rlimit rl = {cap, old->rlim_max};
  if (setrlimit(RLIMIT_AS, &rl) != 0) FATAL("setrlimit: %s", strerror(errno));
  long filled = 0;
  for (size_t sz = 1 << 20; sz >= 4096; sz /= 2) {
    for (;;) {
      void* p = mmap(NULL, sz, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) break;
      if (g_shim_nmaps == kShimMaxMaps) FATAL("too many maps");
      g_shim_maps[g_shim_nmaps] = p;
      g_shim_map_sizes[g_shim_nmaps++] = sz;
      filled += (long)sz;
    }
  }
  while (slack > 0 && g_shim_nmaps > 0) {
    /* The tail of the last map, so no more than `slack` comes back. */
    size_t* last = &g_shim_map_sizes[g_shim_nmaps - 1];
    const size_t cut = *last < (size_t)slack ? *last : (size_t)slack;
    *last -= cut;
    munmap((char*)g_shim_maps[g_shim_nmaps - 1] + *last, cut);
    if (*last == 0) --g_shim_nmaps;
    slack -= (long)cut;
    filled -= (long)cut;
  }
  return filled;
}

/* Unmaps what shim_exhaust_address_space mapped and restores the limit. */
static void shim_give_back_address_space(const struct rlimit* old) {
  for (int i = 0; i < g_shim_nmaps; ++i) munmap(g_shim_maps[i], g_shim_map_sizes[i]);
  g_shim_nmaps = 0;
  if (setrlimit(RLIMIT_AS, old) != 0) SHIM_FAIL("setrlimit back");
}

#endif  /* PARKLOT_TESTS_PRELOAD_ADDRESS_SPACE_UTIL_H_ */
