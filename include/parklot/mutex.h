// <parklot/mutex.h>: parklot::Mutex, RecursiveMutex, ErrorCheckingMutex,
// documented in sync/mutex.h.
// The installed include path (README, "Use as a library").
#ifndef PARKLOT_INCLUDE_PARKLOT_MUTEX_H_
#define PARKLOT_INCLUDE_PARKLOT_MUTEX_H_

#include "sync/mutex.h"

#endif  // PARKLOT_INCLUDE_PARKLOT_MUTEX_H_
