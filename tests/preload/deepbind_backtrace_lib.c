/* For deepbind_backtrace_test: the constructor records the stack it runs
 * on (backtrace(), libgcc's unwinder) while the program's dlopen loads this
 * library. */
#include <execinfo.h>

enum { kMaxFrames = 128 };

void* deepbind_backtrace_frames[kMaxFrames];
int deepbind_backtrace_depth;

__attribute__((constructor)) static void RecordStack(void) {
  deepbind_backtrace_depth = backtrace(deepbind_backtrace_frames, kMaxFrames);
}
