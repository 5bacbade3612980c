/* The shim's rebinding of a DEEPBIND library changes only what still holds
 * glibc's function: a pointer the library's constructor stored, and one the
 * program stored in a library loaded before without the flag, stay as
 * stored (the shim used to overwrite both). A library with a text
 * relocation is rebound without a crash (the shim used to store into its
 * read-only code).
 *
 *   deepbind_slots_prog PROBE_A PROBE_B TEXTREL_LIB */
#include "tests/preload/shim_test_util.h" /* first: _GNU_SOURCE */

typedef int (*LockFn)(pthread_mutex_t*);

static int program_lock(pthread_mutex_t* m) { return pthread_mutex_lock(m); }

static void* need(void* h, const char* name) {
  void* p = dlsym(h, name);
  if (p == NULL) FATAL("dlsym %s: %s", name, dlerror());
  return p;
}

int main(int argc, char** argv) {
  shim_test_start("deepbind_slots", 30);
  if (argc != 4) FATAL("usage: deepbind_slots_prog PROBE_A PROBE_B TEXTREL_LIB");
  void* global_lock = dlsym(RTLD_DEFAULT, "pthread_mutex_lock");

  /* The constructor's pointer. */
  void* a = dlopen(argv[1], RTLD_NOW | RTLD_DEEPBIND);
  if (a == NULL) FATAL("dlopen %s: %s", argv[1], dlerror());
  void* (*wrapper)(void) = (void* (*)(void))need(a, "deepbind_probe_wrapper");
  LockFn* ptr = (LockFn*)need(a, "deepbind_probe_lock_ptr");
  if ((void*)*ptr != wrapper()) {
    SHIM_FAIL("the constructor's pointer is %p, want the wrapper it stored (%p)",
              (void*)*ptr, wrapper());
  }
  LockFn* ptr2 = (LockFn*)need(a, "deepbind_probe_lock_ptr2");
  if ((void*)*ptr2 != global_lock) {
    SHIM_FAIL("deepbind_probe_lock_ptr2 is %p, want the global lookup's %p",
              (void*)*ptr2, global_lock);
  }

  /* A library loaded without the flag, its pointer changed, loaded again
   * with the flag. */
  void* b = dlopen(argv[2], RTLD_NOW);
  if (b == NULL) FATAL("dlopen %s: %s", argv[2], dlerror());
  LockFn* bptr = (LockFn*)need(b, "deepbind_probe_lock_ptr2");
  *bptr = program_lock;
  void* b2 = dlopen(argv[2], RTLD_NOW | RTLD_DEEPBIND);
  CHECK(b2 == b);
  if (*bptr != program_lock) {
    SHIM_FAIL("the program's pointer in %s is %p after dlopen(RTLD_DEEPBIND), "
              "want the program's %p", argv[2], (void*)*bptr,
              (void*)program_lock);
  }

  /* Text relocations. */
  void* t = dlopen(argv[3], RTLD_NOW | RTLD_DEEPBIND);
  if (t == NULL) FATAL("dlopen %s: %s", argv[3], dlerror());
  void* (*addr)(void) = (void* (*)(void))need(t, "deepbind_textrel_lock_addr");
  if (addr() != global_lock) {
    SHIM_FAIL("the text relocation holds %p, want the global lookup's %p",
              addr(), global_lock);
  }
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  CHECK_RC(((LockFn)addr())(&m), 0);
  CHECK_RC(pthread_mutex_trylock(&m), EBUSY);
  CHECK_RC(pthread_mutex_unlock(&m), 0);
  return shim_test_finish();
}
