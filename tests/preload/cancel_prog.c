/* Cancellation of condvar waiters, C build: pthread_cleanup_push is glibc's
 * setjmp-based cleanup buffer. See cancel_body.h. */
#include "tests/preload/cancel_body.h"

int main(int argc, char** argv) { return cancel_main("cancel (C)", argc, argv); }
