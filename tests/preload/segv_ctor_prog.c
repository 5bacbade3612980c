/* A SIGSEGV handler that a library installs in its constructor, before the
 * shim's own constructors ran, reads back through sigaction() as that
 * library's handler, with its flags and mask, as under glibc, and runs for
 * a fault. With PARKLOT_SYSCALL_FUTEX=1 the shim takes SIGSEGV over in its
 * constructor and once recorded what the kernel then held, the shim's
 * handler wrapper, as the program's action: sigaction(SIGSEGV, NULL, &old)
 * gave the wrapper back (crash reporters and GCs check this).
 *
 *   segv_ctor_prog LIBRARY
 * runs itself again with LIBRARY appended to LD_PRELOAD (preloaded last,
 * its constructor runs first). */
#include "tests/preload/shim_test_util.h"  /* first: _GNU_SOURCE */

#include <limits.h>
#include <linux/futex.h>
#include <sys/mman.h>

#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000
#endif

static void* need(const char* name) {
  void* p = dlsym(RTLD_DEFAULT, name);
  if (p == NULL) FATAL("%s not found: the library is not loaded", name);
  return p;
}

int main(int argc, char** argv) {
  if (getenv("SEGV_CTOR_CHILD") == NULL) {
    if (argc != 2) FATAL("usage: segv_ctor_prog LIBRARY");
    char lib[PATH_MAX];
    if (realpath(argv[1], lib) == NULL) FATAL("%s: %s", argv[1], strerror(errno));
    const char* preload = getenv("LD_PRELOAD");
    char value[2 * PATH_MAX + 2];
    snprintf(value, sizeof(value), "%s%s%s", preload ? preload : "",
             preload && *preload ? ":" : "", lib);
    setenv("LD_PRELOAD", value, 1);
    setenv("SEGV_CTOR_CHILD", "1", 1);
    execv("/proc/self/exe", argv);
    FATAL("execv: %s", strerror(errno));
  }
  shim_test_start("segv_ctor", 30);
  void* handler = need("segv_ctor_handler");
  const int flags = *(const int*)need("segv_ctor_flags");
  const int masked = *(const int*)need("segv_ctor_masked");
  volatile int* calls = need("segv_ctor_calls");
  void* volatile* fix_page = need("segv_ctor_fix_page");

  struct sigaction old;
  memset(&old, 0, sizeof(old));
  CHECK_RC(sigaction(SIGSEGV, NULL, &old), 0);
  printf("SIGSEGV reads back: %s, flags %#x, SIGUSR2 %s\n",
         (void*)old.sa_sigaction == handler ? "the library's handler"
                                            : "ANOTHER handler",
         old.sa_flags, sigismember(&old.sa_mask, masked) ? "masked" : "NOT masked");
  if ((void*)old.sa_sigaction != handler) {
    SHIM_FAIL("sigaction(SIGSEGV) reads back handler %p, want the library's %p",
              (void*)old.sa_sigaction, handler);
  }
  if (old.sa_flags != (flags | SA_RESTORER)) {
    SHIM_FAIL("flags %#x, want glibc's %#x", old.sa_flags, flags | SA_RESTORER);
  }
  CHECK(sigismember(&old.sa_mask, masked) == 1);
  CHECK(sigismember(&old.sa_mask, SIGUSR1) == 0);

  /* A served futex call on a PROT_NONE page fails with EFAULT, as in the
   * kernel, without reaching the library's handler... */
  char* page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(page != MAP_FAILED);
  errno = 0;
  CHECK(shim_futex(page, FUTEX_WAIT_PRIVATE, 0, NULL) == -1);
  CHECK(errno == EFAULT);
  CHECK(*calls == 0);
  /* ... and a fault of the program's runs it once. */
  *fix_page = page;
  *(volatile char*)page = 1;
  CHECK(*calls == 1);
  CHECK(page[0] == 1);
  return shim_test_finish();
}
