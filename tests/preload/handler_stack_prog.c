/* How much alternate signal stack the shim adds to a handler's run: its
 * wrapper around program handlers, and with PARKLOT_SYSCALL_FUTEX=1 its
 * SIGSEGV/SIGBUS fault handler, each with the handler in asynchronous
 * cancellation mode too. Programs size alternate stacks from glibc's
 * figures (MINSIGSTKSZ), so the shim's share must stay small: under 256
 * bytes on every path (docs/compatibility.md, "Reliability under the
 * shim"). The wrapper used 64 bytes more than glibc's handler call, the
 * fault path 384.
 *
 * The kernel's signal frame starts 8 bytes below the ucontext it passes;
 * glibc calls the handler right there, so the handler's saved frame pointer
 * lies 16 bytes below the ucontext. The handler below writes nothing deeper
 * (no calls, no spills), so anything written deeper on the pattern-filled
 * alternate stack, before or after the handler ran, is the shim's: the
 * lowest written word, seen from the handler and again after it returned,
 * gives the figure. Against glibc it is 0. */
#include "tests/preload/shim_test_util.h"  /* first: _GNU_SOURCE */

#include <sys/mman.h>

#define PATTERN 0xa5a5a5a5a5a5a5a5ull
enum { kStackSize = 64 * 1024, kLimit = 256 };

static uint64_t g_stack[kStackSize / 8] __attribute__((aligned(64)));
static void* volatile g_context;
static void* volatile g_frame;
static const uint64_t* volatile g_low_at_entry;
static char* volatile g_fix_page;

static inline __attribute__((always_inline)) const uint64_t* lowest_written(void) {
  const uint64_t* p = g_stack;
  while (*p == PATTERN) ++p;
  return p;
}

static void probe(int sig, siginfo_t* info, void* context) {
  (void)sig;
  (void)info;
  g_context = context;
  g_frame = __builtin_frame_address(0);
  g_low_at_entry = lowest_written();
  char* page = g_fix_page;
  if (page != NULL) {
    /* mprotect(page, 4096, PROT_READ | PROT_WRITE), without a call. */
    long rc;
    __asm__ volatile("syscall"
                     : "=a"(rc)
                     : "0"((long)SYS_mprotect), "D"(page), "S"(4096L),
                       "d"((long)(PROT_READ | PROT_WRITE))
                     : "rcx", "r11", "memory");
    (void)rc;
  }
}

static int g_asan;  /* an ASan-built shim: its frames are larger */

static void measure(const char* what, int sig, int flags, int fault,
                    int async) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = probe;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | flags;
  CHECK_RC(sigaction(sig, &sa, NULL), 0);
  char* page = NULL;
  if (fault) {
    page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(page != MAP_FAILED);
  }
  for (size_t i = 0; i < kStackSize / 8; ++i) g_stack[i] = PATTERN;
  g_context = NULL;
  g_fix_page = page;
  if (async) pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL);
  if (fault) {
    *(volatile char*)page = 1;
  } else {
    raise(sig);
  }
  if (async) pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, NULL);
  g_fix_page = NULL;
  if (page != NULL) munmap(page, 4096);
  if (g_context == NULL) {
    SHIM_FAIL("%s: the handler did not run", what);
    return;
  }
  const uint64_t* low = lowest_written();
  if (g_low_at_entry < low) low = g_low_at_entry;
  const char* base = (const char*)g_context - 16;
  const long extra = (long)(base - (const char*)low);
  printf("%s: %ld bytes of alternate stack beyond glibc's "
         "(handler entered %ld bytes deeper)\n",
         what, extra, (long)(base - (const char*)g_frame));
  if (g_shim_test_glibc) {
    if (extra != 0) SHIM_FAIL("%s: %ld bytes under plain glibc, want 0", what, extra);
  } else if (!g_asan && extra >= kLimit) {
    SHIM_FAIL("%s: the shim adds %ld bytes, want under %d", what, extra, kLimit);
  }
}

int main(void) {
  shim_test_start("handler_stack", 30);
  g_asan = dlsym(RTLD_DEFAULT, "__asan_init") != NULL;
  if (g_asan) printf("ASan-built shim: figures printed, limit not checked\n");
  stack_t ss = {.ss_sp = g_stack, .ss_size = sizeof(g_stack), .ss_flags = 0};
  CHECK_RC(sigaltstack(&ss, NULL), 0);
  measure("handler", SIGUSR1, 0, 0, 0);
  measure("handler, asynchronous cancellation", SIGUSR1, 0, 0, 1);
  measure("SIGSEGV sent", SIGSEGV, 0, 0, 0);
  measure("SIGSEGV sent, SA_RESETHAND", SIGSEGV, SA_RESETHAND, 0, 0);
  measure("SIGSEGV fault", SIGSEGV, 0, 1, 0);
  measure("SIGSEGV fault, asynchronous cancellation", SIGSEGV, 0, 1, 1);
  measure("SIGBUS sent", SIGBUS, 0, 0, 0);
  return shim_test_finish();
}
