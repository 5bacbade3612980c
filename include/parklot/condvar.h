// <parklot/condvar.h>: parklot::CondVar, documented in sync/condvar.h.
// The installed include path (README, "Use as a library").
#ifndef PARKLOT_INCLUDE_PARKLOT_CONDVAR_H_
#define PARKLOT_INCLUDE_PARKLOT_CONDVAR_H_

#include "sync/condvar.h"

#endif  // PARKLOT_INCLUDE_PARKLOT_CONDVAR_H_
