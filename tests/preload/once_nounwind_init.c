/* An init routine compiled without unwind tables (-fno-exceptions
 * -fno-asynchronous-unwind-tables -fno-unwind-tables, as glibc's
 * tst-oncey3): a cancellation acting inside it cannot unwind through its
 * frame, so the unwinder stops here and glibc runs only its cleanup
 * buffers (pthread_cleanup_push style) before ending the thread. */
#include <unistd.h>

int g_in_init;

void once_nounwind_init(void) {
  __atomic_store_n(&g_in_init, 1, __ATOMIC_RELEASE);
  for (;;) pause(); /* a cancellation point */
}
