// The C++ runtime's exception allocation, as the shim has it: none.
//
// The shim links libsupc++ for its personality routine alone, which runs
// the destructors a thread cancellation unwinds through (glibc's forced
// unwind). The shim throws nothing: no throw expression, no operator new,
// no dynamic exception specification for the personality routine to
// enforce. But libsupc++'s personality and cleanup code refer to the
// exception allocator, and the object that defines it (eh_alloc.o) brings a
// static initializer that mallocs an emergency pool of 72.7 KB in every
// process at load, which heaptrack reports as a leak
// (//tests/preload:load_alloc_test). Defined here, the linker takes these
// and never pulls that object in.
//
// Nothing calls them: the only callers are libsupc++'s paths for an
// exception thrown or translated in the shim's frames. Were one reached, it
// ends the process as the runtime does when it cannot allocate an
// exception (std::terminate), by abort. Hidden: they serve the shim's own
// copy of libsupc++, never the program's C++ runtime.
#include <cstddef>
#include <cstdlib>

#define PARKLOT_HIDDEN __attribute__((visibility("hidden")))

extern "C" {

PARKLOT_HIDDEN void* __cxa_allocate_exception(size_t) noexcept { abort(); }
PARKLOT_HIDDEN void __cxa_free_exception(void*) noexcept { abort(); }
PARKLOT_HIDDEN void* __cxa_allocate_dependent_exception() noexcept {
  abort();
}
PARKLOT_HIDDEN void __cxa_free_dependent_exception(void*) noexcept {
  abort();
}

}  // extern "C"
