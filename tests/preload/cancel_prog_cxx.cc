// Cancellation of condvar waiters, C++ build: pthread_cleanup_push is a
// cleanup object whose destructor runs in the forced unwind. See
// cancel_body.h.
#include "tests/preload/cancel_body.h"

int main(int argc, char** argv) { return cancel_main("cancel (C++)", argc, argv); }
