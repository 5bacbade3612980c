// <parklot/semaphore.h>: parklot::Semaphore, documented in sync/semaphore.h.
// The installed include path (README, "Use as a library").
#ifndef PARKLOT_INCLUDE_PARKLOT_SEMAPHORE_H_
#define PARKLOT_INCLUDE_PARKLOT_SEMAPHORE_H_

#include "sync/semaphore.h"

#endif  // PARKLOT_INCLUDE_PARKLOT_SEMAPHORE_H_
