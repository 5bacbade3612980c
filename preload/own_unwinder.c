// The unwinder's functions the shim's code calls, as hidden forwarders to
// libgcc_s.so.1's, found when first called rather than at load time
// (docs/design.md section 5.19).
//
// Only libsupc++'s personality routine and the landing pads of the shim's
// destructors (a thread cancelled or exiting while inside a shim function,
// an exception thrown through pthread_once) and the profile's stack walk
// (_Unwind_Backtrace) call them. A DT_NEEDED entry for libgcc_s cost every
// process that loads the shim the library's mapping and relocation: 6 page
// faults of the 20 the shim added to /bin/true. glibc does the same for its
// own cancellation: libc.so has no libgcc_s entry and dlopens it when a
// thread is first cancelled (pthread_cancel loads it before it signals), so
// whenever an unwind runs through the shim's frames the library is already
// loaded, and the dlopen here only finds it. The profile resolves its stack
// walk when it is switched on, before the program runs (ResolveUnwinder).
//
// Each forwarder ends in a tail call: _Unwind_Resume and
// _Unwind_RaiseException start from their caller's frame, which is then
// the landing pad's or the thrower's, as without the forwarder. Hidden, as
// own_libc.c's: they serve the shim's code alone, never the program's
// (exports.lds keeps them local too).
//
// The types are declared here rather than taken from <unwind.h>, whose
// declarations would keep the functions' default visibility: what crosses
// is pointers and machine words, as the unwinder's ABI defines them.
struct _Unwind_Context;
struct _Unwind_Exception;
typedef unsigned long _Unwind_Ptr;
typedef unsigned long _Unwind_Word;
typedef int _Unwind_Reason_Code;
typedef _Unwind_Reason_Code (*_Unwind_Trace_Fn)(struct _Unwind_Context*,
                                                void*);

#define HIDDEN __attribute__((visibility("hidden")))

// libgcc_s's definition of `name` at `version`; ends the process with one
// line on stderr if the library or the symbol is missing (as glibc's
// pthread_cancel does without libgcc_s). Thread-safe (lookup.cc).
HIDDEN void* ParklotUnwinderOwn(const char* name, const char* version);
// The same, but nullptr where the library or the symbol is missing.
HIDDEN void* ParklotUnwinderFind(const char* name, const char* version);

// Declared hidden before the forwarders refer to them.
#pragma GCC visibility push(hidden)
void* _Unwind_GetLanguageSpecificData(struct _Unwind_Context*);
_Unwind_Ptr _Unwind_GetRegionStart(struct _Unwind_Context*);
_Unwind_Ptr _Unwind_GetIPInfo(struct _Unwind_Context*, int*);
_Unwind_Ptr _Unwind_GetDataRelBase(struct _Unwind_Context*);
_Unwind_Ptr _Unwind_GetTextRelBase(struct _Unwind_Context*);
void _Unwind_SetGR(struct _Unwind_Context*, int, _Unwind_Word);
void _Unwind_SetIP(struct _Unwind_Context*, _Unwind_Ptr);
void _Unwind_Resume(struct _Unwind_Exception*);
_Unwind_Reason_Code _Unwind_RaiseException(struct _Unwind_Exception*);
_Unwind_Reason_Code _Unwind_Resume_or_Rethrow(struct _Unwind_Exception*);
void _Unwind_DeleteException(struct _Unwind_Exception*);
_Unwind_Reason_Code _Unwind_Backtrace(_Unwind_Trace_Fn, void*);
#pragma GCC visibility pop

#define UNW_FN(name, version)                                          \
  static __typeof__(&name) Unw_##name(void) {                          \
    static __typeof__(&name) fn;                                       \
    __typeof__(&name) f = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);      \
    if (__builtin_expect(f == 0, 0)) {                                 \
      f = (__typeof__(&name))ParklotUnwinderOwn(#name, version);       \
      __atomic_store_n(&fn, f, __ATOMIC_RELEASE);                      \
    }                                                                  \
    return f;                                                          \
  }
#define UNW(ret, name, version, params, args) \
  UNW_FN(name, version)                       \
  HIDDEN ret name params { return Unw_##name() args; }
#define UNW_VOID(name, version, params, args) \
  UNW_FN(name, version)                       \
  HIDDEN void name params { Unw_##name() args; }

// The personality routine's reads and writes of the frame being unwound.
UNW(void*, _Unwind_GetLanguageSpecificData, "GCC_3.0",
    (struct _Unwind_Context * c), (c))
UNW(_Unwind_Ptr, _Unwind_GetRegionStart, "GCC_3.0",
    (struct _Unwind_Context * c), (c))
UNW(_Unwind_Ptr, _Unwind_GetIPInfo, "GCC_4.2.0",
    (struct _Unwind_Context * c, int* before), (c, before))
UNW(_Unwind_Ptr, _Unwind_GetDataRelBase, "GCC_3.0",
    (struct _Unwind_Context * c), (c))
UNW(_Unwind_Ptr, _Unwind_GetTextRelBase, "GCC_3.0",
    (struct _Unwind_Context * c), (c))
UNW_VOID(_Unwind_SetGR, "GCC_3.0",
         (struct _Unwind_Context * c, int reg, _Unwind_Word value),
         (c, reg, value))
UNW_VOID(_Unwind_SetIP, "GCC_3.0", (struct _Unwind_Context * c,
                                    _Unwind_Ptr ip), (c, ip))
// The end of a landing pad.
UNW_VOID(_Unwind_Resume, "GCC_3.0", (struct _Unwind_Exception * e), (e))
// libsupc++'s throw and rethrow, which nothing in the shim reaches
// (exception_alloc.cc).
UNW(_Unwind_Reason_Code, _Unwind_RaiseException, "GCC_3.0",
    (struct _Unwind_Exception * e), (e))
UNW(_Unwind_Reason_Code, _Unwind_Resume_or_Rethrow, "GCC_3.3",
    (struct _Unwind_Exception * e), (e))
UNW_VOID(_Unwind_DeleteException, "GCC_3.0", (struct _Unwind_Exception * e),
         (e))
// The profile's stack walk (diag/profile.cc).
UNW(_Unwind_Reason_Code, _Unwind_Backtrace, "GCC_3.3",
    (_Unwind_Trace_Fn fn, void* arg), (fn, arg))

// Resolves the stack walk now (PARKLOT_PROFILE's start, before main), so
// that no walk loads libgcc_s inside a lock path. Returns 0 where libgcc_s
// or its _Unwind_Backtrace is missing (the profile stays off), 1 otherwise.
HIDDEN int ParklotResolveUnwinder(void) {
  if (ParklotUnwinderFind("_Unwind_Backtrace", "GCC_3.3") == 0) return 0;
  (void)Unw__Unwind_Backtrace();
  return 1;
}
