// <parklot/once.h>: parklot::Once, documented in sync/once.h.
// The installed include path (README, "Use as a library").
#ifndef PARKLOT_INCLUDE_PARKLOT_ONCE_H_
#define PARKLOT_INCLUDE_PARKLOT_ONCE_H_

#include "sync/once.h"

#endif  // PARKLOT_INCLUDE_PARKLOT_ONCE_H_
