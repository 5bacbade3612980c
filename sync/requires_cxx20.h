// Included first by every public header: before C++20, one #error that
// names the standard, and PARKLOT_CXX20 0, so that the header includes and
// declares nothing more (no cascade of errors from the headers it would
// include). The headers need C++20: the thread's data the inline fast
// paths read is declared constinit.
#ifndef PARKLOT_SYNC_REQUIRES_CXX20_H_
#define PARKLOT_SYNC_REQUIRES_CXX20_H_

#if !defined(__cplusplus) || __cplusplus < 202002L
#error "parklot needs C++20: compile with -std=c++20 (or -std=gnu++20) or later"
#define PARKLOT_CXX20 0
#else
#define PARKLOT_CXX20 1
#endif

#endif  // PARKLOT_SYNC_REQUIRES_CXX20_H_
