/* A stack walk from inside a dlopen(RTLD_DEEPBIND) reaches the program's
 * frames, as under glibc. The shim calls glibc's dlopen with a return
 * address in the calling object (a `ret` byte of its code, preload/
 * deepbind.cc): the unwinder must be able to walk through that frame.
 * Before, backtrace() in the loaded library's constructor stopped there,
 * short of the function that called dlopen and everything below it.
 *
 * OpenLibrary (exported: the program is linked with -rdynamic, so dladdr
 * names it) records the depth of its own stack, then loads the library;
 * the library's constructor records its stack. That stack must hold a
 * frame in OpenLibrary with, from there down, as many frames as
 * OpenLibrary's own walk found.
 *
 *   deepbind_backtrace_prog LIBRARY */
#include "tests/preload/shim_test_util.h" /* first: _GNU_SOURCE */

#include <execinfo.h>

enum { kMaxFrames = 128 };

static int g_open_depth;

__attribute__((noinline, visibility("default"))) void* OpenLibrary(
    const char* path, int flags) {
  void* frames[kMaxFrames];
  g_open_depth = backtrace(frames, kMaxFrames);
  void* handle = dlopen(path, flags);
  __asm__ volatile("" ::: "memory"); /* no tail call: keep this frame */
  return handle;
}

static void CheckWalk(const char* path, int flags, const char* how) {
  void* handle = OpenLibrary(path, flags);
  if (handle == NULL) SHIM_FAIL("%s: dlopen: %s", how, dlerror());
  void** frames = (void**)dlsym(handle, "deepbind_backtrace_frames");
  int* depth = (int*)dlsym(handle, "deepbind_backtrace_depth");
  CHECK(frames != NULL && depth != NULL);
  int at = -1;
  for (int i = 0; i < *depth; ++i) {
    Dl_info info;
    if (dladdr(frames[i], &info) != 0 && info.dli_sname != NULL &&
        strcmp(info.dli_sname, "OpenLibrary") == 0) {
      at = i;
      break;
    }
  }
  if (at < 0) {
    SHIM_FAIL("%s: the constructor's stack walk (%d frames) stops before "
              "OpenLibrary", how, *depth);
  } else if (*depth - at != g_open_depth) {
    SHIM_FAIL("%s: %d frames from OpenLibrary down, OpenLibrary's own walk "
              "found %d", how, *depth - at, g_open_depth);
  }
  CHECK(dlclose(handle) == 0);
}

int main(int argc, char** argv) {
  shim_test_start("deepbind_backtrace", 60);
  if (argc != 2) {
    fprintf(stderr, "usage: deepbind_backtrace_prog LIBRARY\n");
    return 2;
  }
  /* Without the flag first (the shim passes straight through), then with. */
  CheckWalk(argv[1], RTLD_NOW, "RTLD_NOW");
  CheckWalk(argv[1], RTLD_NOW | RTLD_DEEPBIND, "RTLD_DEEPBIND");
  return shim_test_finish();
}
