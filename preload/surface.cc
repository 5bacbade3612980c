// The exported served names (surface.h): the step-aside decision, taken at
// load, and for each stubbed name the exported function, a stub that jumps
// to the shim's implementation or, under Valgrind, to a forwarder to
// glibc's own function. Also their compat symbol versions
// (symbol_versions.h), which must name symbols of this assembly file.
//
// Why step aside under Valgrind rather than tell helgrind and DRD about
// parklot's locks with client requests: docs/design.md section 5.14.
#include "preload/surface.h"

#include <valgrind/valgrind.h>

#include "preload/shim.h"
#include "preload/symbol_versions.h"

namespace parklot::internal::preload {

// The lock paths' hooks (shim.h); the step-aside bit is set below.
uint8_t g_lock_hooks = 0;

}  // namespace parklot::internal::preload

// The step-aside decision, at load. A call can come before the shim's
// constructor: the libraries it needs (libstdc++, Abseil) run their own
// constructors first, and those call pthread_once and lock mutexes. An
// object the shim's code touched must not then go to glibc's (its Once word
// is not glibc's once word), so the bit is set before any code of those
// libraries runs: by the resolver of a local indirect function, which the
// dynamic loader calls while it applies the shim's relocations (an
// R_X86_64_IRELATIVE one, for g_decide's initializer), before any
// constructor in the process. A local one: an exported indirect function
// referenced by a library the loader relocates before the shim (its own
// dependencies) makes glibc print "Relink ... for IFUNC symbol" at every
// start.
//
// The resolver runs before ASan's runtime is initialized and perhaps
// before the shim's other relocations: it is not instrumented and reads no
// memory that needs a relocation (the client request is a few register
// instructions and a stack array; g_lock_hooks is hidden, PC-relative).
extern "C" {
static void StepAsideDecided() {}

__attribute__((no_sanitize("address", "undefined"), no_stack_protector)) static void*
DecideStepAside() {
  if (RUNNING_ON_VALGRIND != 0) {
    parklot::internal::preload::g_lock_hooks |= parklot::internal::preload::kHookStepAside;
  }
  return reinterpret_cast<void*>(&StepAsideDecided);
}

static void StepAsideAtLoad() __attribute__((ifunc("DecideStepAside")));
// Never read: its initializer is the relocation that runs the decision.
__attribute__((used)) static void (*const g_decide)() = &StepAsideAtLoad;

// The forwarders, under Valgrind: glibc's function with the caller's
// arguments (a tail call at -O2, so that glibc and the tools see the
// program's return address). syscall(): six argument registers, as glibc's
// syscall() reads them whatever the number (the sixth from the stack, as
// glibc's does).
#define PARKLOT_FORWARDER(ret, name, params, args, version, needed) \
  __attribute__((visibility("hidden"))) ret parklot_aside_##name params { \
    return parklot::internal::preload::RealGlibc().name args;                 \
  }
#define PARKLOT_FORWARDER_V(ret, name, params, fparams, fargs, version, \
                            needed)                                    \
  PARKLOT_FORWARDER(ret, name, fparams, fargs, version, needed)
// sigset and sigignore are deprecated in <signal.h>; glibc's are called
// here as every other served name is.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
PARKLOT_SURFACE_STUBBED(PARKLOT_FORWARDER, PARKLOT_FORWARDER_V)
#pragma GCC diagnostic pop
#undef PARKLOT_FORWARDER
#undef PARKLOT_FORWARDER_V
}  // extern "C"

// The exported functions. A jump, never a call, to either side: the
// implementation and glibc see the program's frame, return address and
// argument registers (syscall's variadic ones and %al included), and a
// stub is never on a stack an unwinder walks. endbr64: the program may
// reach it by an indirect call (its PLT, a function pointer) under IBT.
#define PARKLOT_STR2(x) #x
#define PARKLOT_STR(x) PARKLOT_STR2(x)
#define PARKLOT_STUB(ret, name, ...)                                      \
  __asm__(".text\n\t"                                                    \
          ".globl " #name "\n\t"                                         \
          ".type " #name ", @function\n\t"                               \
          ".hidden parklot_serve_" #name "\n\t"                          \
          ".p2align 4\n"                                                 \
          #name ":\n\t"                                                  \
          ".cfi_startproc\n\t"                                           \
          "endbr64\n\t"                                                  \
          "testb $" PARKLOT_STR(PARKLOT_HOOK_STEP_ASIDE)                 \
          ", parklot_lock_hooks(%rip)\n\t"                               \
          "jnz parklot_aside_" #name "\n\t"                              \
          "jmp parklot_serve_" #name "\n\t"                              \
          ".cfi_endproc\n\t"                                             \
          ".size " #name ", .-" #name);
PARKLOT_SURFACE_STUBBED(PARKLOT_STUB, PARKLOT_STUB)
#undef PARKLOT_STUB

// glibc's compat symbol versions of the stubbed names: aliases of the
// stubs above.
PARKLOT_VERSIONS_MUTEX;
PARKLOT_VERSIONS_COND;
PARKLOT_VERSIONS_RWLOCK;
PARKLOT_VERSIONS_BARRIER;
PARKLOT_VERSIONS_SEM;
PARKLOT_VERSIONS_ONCE;
PARKLOT_VERSIONS_SCHED;
