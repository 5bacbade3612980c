// <parklot/shared_mutex.h>: parklot::SharedMutex, documented in sync/shared_mutex.h.
// The installed include path (README, "Use as a library").
#ifndef PARKLOT_INCLUDE_PARKLOT_SHARED_MUTEX_H_
#define PARKLOT_INCLUDE_PARKLOT_SHARED_MUTEX_H_

#include "sync/shared_mutex.h"

#endif  // PARKLOT_INCLUDE_PARKLOT_SHARED_MUTEX_H_
