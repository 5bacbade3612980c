// <parklot/barrier.h>: parklot::Barrier, documented in sync/barrier.h.
// The installed include path (README, "Use as a library").
#ifndef PARKLOT_INCLUDE_PARKLOT_BARRIER_H_
#define PARKLOT_INCLUDE_PARKLOT_BARRIER_H_

#include "sync/barrier.h"

#endif  // PARKLOT_INCLUDE_PARKLOT_BARRIER_H_
