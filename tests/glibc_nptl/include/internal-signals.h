/* glibc's reserved signals on Linux (glibc 2.36,
   sysdeps/unix/sysv/linux/internal-signals.h): cancellation and the
   set*id broadcast. Used by glibc's tst-signal7 and tst-cancel25. */
#ifndef PARKLOT_GLIBC_TESTS_INTERNAL_SIGNALS_H
#define PARKLOT_GLIBC_TESTS_INTERNAL_SIGNALS_H

#include <signal.h>

#define SIGCANCEL __SIGRTMIN
#define SIGTIMER SIGCANCEL
#define SIGSETXID (__SIGRTMIN + 1)

#endif
