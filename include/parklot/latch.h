// <parklot/latch.h>: parklot::Latch, documented in sync/latch.h.
// The installed include path (README, "Use as a library").
#ifndef PARKLOT_INCLUDE_PARKLOT_LATCH_H_
#define PARKLOT_INCLUDE_PARKLOT_LATCH_H_

#include "sync/latch.h"

#endif  // PARKLOT_INCLUDE_PARKLOT_LATCH_H_
