/* What loading the shim allocates: nothing. The program brings its own
 * malloc family, which the dynamic linker binds every library's calls to
 * (the executable comes first in the lookup scope), and counts what is
 * allocated before main, by the loader, libc and the shim's constructors,
 * and what of it is still live at main (a block freed again, as glibc's
 * dlopen frees its own, is no cost to the program).
 * A shim that linked libsupc++'s emergency exception pool allocated 72.7 KB
 * at load in every process (its static initializer), which heaptrack
 * reports as a leak. load_alloc_test.sh runs it under plain glibc and
 * under the shim: the shim must add nothing to what is allocated before
 * main (the toolchain links the program's own C++ runtime, which may).
 *
 * The heap is a bump allocator over a static array; free only counts. Single-threaded but for the atomic bump. */
#include "tests/preload/shim_test_util.h" /* first: _GNU_SOURCE */

#include <stdalign.h>
#include <stddef.h>

enum { kHeapBytes = 16 << 20, kHeader = 16 };
static alignas(16) unsigned char g_heap[kHeapBytes];
static size_t g_used;
static int g_in_main;
/* Before main: every allocation, and the blocks still live (not freed). */
static size_t g_early_calls, g_live_blocks, g_live_bytes;

static void* bump(size_t n, size_t align) {
  if (align < 16) align = 16;
  for (;;) {
    size_t used = __atomic_load_n(&g_used, __ATOMIC_RELAXED);
    size_t start = (used + kHeader + align - 1) & ~(align - 1);
    if (n > kHeapBytes || start + n > kHeapBytes) return NULL;
    if (__atomic_compare_exchange_n(&g_used, &used, start + n, 0,
                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
      *(size_t*)(g_heap + start - kHeader) = n;
      if (!__atomic_load_n(&g_in_main, __ATOMIC_RELAXED)) {
        g_early_calls++;
        g_live_blocks++;
        g_live_bytes += n;
      }
      return g_heap + start;
    }
  }
}

static int ours(const void* p) {
  return (const unsigned char*)p >= g_heap &&
         (const unsigned char*)p < g_heap + kHeapBytes;
}

void* malloc(size_t n) { return bump(n, 16); }
void free(void* p) {
  if (p == NULL || !ours(p) || __atomic_load_n(&g_in_main, __ATOMIC_RELAXED)) {
    return;
  }
  g_live_blocks--;
  g_live_bytes -= *(size_t*)((unsigned char*)p - kHeader);
}
void* calloc(size_t k, size_t n) {
  if (n != 0 && k > (size_t)-1 / n) return NULL;
  return bump(k * n, 16); /* the static array starts zeroed, never reused */
}
void* realloc(void* p, size_t n) {
  if (p == NULL) return bump(n, 16);
  if (!ours(p)) {
    static const char msg[] = "load_alloc_prog: realloc of a foreign block\n";
    ssize_t w = write(2, msg, sizeof(msg) - 1);
    (void)w;
    abort();
  }
  const size_t old = *(size_t*)((unsigned char*)p - kHeader);
  void* q = bump(n, 16);
  if (q != NULL) memcpy(q, p, old < n ? old : n);
  return q;
}
void* memalign(size_t align, size_t n) { return bump(n, align); }
void* aligned_alloc(size_t align, size_t n) { return bump(n, align); }
int posix_memalign(void** out, size_t align, size_t n) {
  void* p = bump(n, align);
  if (p == NULL) return ENOMEM;
  *out = p;
  return 0;
}
void* valloc(size_t n) { return bump(n, 4096); }
void* pvalloc(size_t n) { return bump((n + 4095) & ~(size_t)4095, 4096); }
size_t malloc_usable_size(void* p) {
  return p != NULL && ours(p) ? *(size_t*)((unsigned char*)p - kHeader) : 0;
}

/* libc's handle, as the shim's constructor takes it (glibc.cc
 * ResolveProgramClock) and as any program's dlopen of libc does: the loader
 * builds the handle's search list once (40 bytes, kept while libc is
 * loaded). Taken here too, so that both runs hold it. */
__attribute__((constructor)) static void take_libc_handle(void) {
  void* libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
  if (libc != NULL) dlclose(libc);
}

int main(void) {
  /* First: what came before main, before this program allocates itself. */
  __atomic_store_n(&g_in_main, 1, __ATOMIC_RELAXED);
  const size_t calls = g_early_calls, blocks = g_live_blocks;
  const size_t bytes = g_live_bytes;
  shim_test_start("load_alloc", 30);
  printf("allocations before main: %zu\n", calls);
  printf("live at main: %zu blocks, %zu bytes\n", blocks, bytes);
  /* The program's own heap serves the shim after start-up too. */
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  CHECK_RC(pthread_mutex_lock(&m), 0);
  CHECK_RC(pthread_mutex_unlock(&m), 0);
  void* p = malloc(100);
  CHECK(p != NULL && ours(p));
  free(p);
  return shim_test_finish();
}
