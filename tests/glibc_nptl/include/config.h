/* Forced into every compilation of glibc's test-support library and NPTL
   tests (tests/glibc_nptl/glibc_nptl_tests.sh), in place of the config.h
   and libc-symbols.h a configured glibc build tree would give them: the
   tests are built against the installed libc's public headers, so only
   what the support code asks of a build tree is defined here. */
#ifndef PARKLOT_GLIBC_TESTS_CONFIG_H
#define PARKLOT_GLIBC_TESTS_CONFIG_H

/* support_test_main scales every test's timeout by this (and by the
   TIMEOUTFACTOR environment variable, which the runner sets). */
#define TIMEOUTFACTOR 1

/* Internal symbol-visibility annotations of glibc's own headers. */
#define libc_hidden_proto(name, ...)
#define attribute_hidden __attribute__ ((visibility ("hidden")))

/* glibc's build gets NAME_MAX and friends through its own limits.h. */
#include <limits.h>

#endif
