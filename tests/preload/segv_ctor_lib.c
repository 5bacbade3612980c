/* A library that installs a SIGSEGV handler from its constructor, as crash
 * reporters and garbage collectors do; for segv_ctor_prog.c, preloaded
 * after the shim so that this constructor runs before the shim's. */
#include <signal.h>
#include <string.h>
#include <sys/mman.h>

/* The handler's mask and flags (segv_ctor_prog.c reads them back). */
const int segv_ctor_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
const int segv_ctor_masked = SIGUSR2;
volatile int segv_ctor_calls;
void* volatile segv_ctor_fix_page;  /* made writable by the handler */

void segv_ctor_handler(int sig, siginfo_t* info, void* context) {
  (void)sig;
  (void)info;
  (void)context;
  ++segv_ctor_calls;
  if (segv_ctor_fix_page != NULL) {
    mprotect(segv_ctor_fix_page, 4096, PROT_READ | PROT_WRITE);
  }
}

__attribute__((constructor)) static void install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = segv_ctor_handler;
  sa.sa_flags = segv_ctor_flags;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, segv_ctor_masked);
  sigaction(SIGSEGV, &sa, NULL);
}
