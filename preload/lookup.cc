// dlsym and dlvsym: lookups through a handle (docs/design.md §5.18).
//
// glibc's dlsym(dlopen("libc.so.6"), "pthread_mutex_lock") searches libc's
// own scope and answers glibc's function, which runs glibc's protocol on
// objects the rest of the program runs through the shim (a hang, or a
// crash). Plugin hosts and FFI layers (Python's ctypes, LuaJIT) resolve
// this way. So the shim exports dlsym and dlvsym: glibc's function answers
// every lookup, with the caller's return address (glibc reads it for
// RTLD_DEFAULT and the audit interface), and where a handle's or
// RTLD_DEFAULT's answer is glibc's own function (an address inside libc)
// for a name the shim exports at that version, the answer is the shim's.
// Everything else is glibc's answer as it is: other names, other objects'
// definitions, the old condvar ABI (the shim has no
// pthread_cond_*@GLIBC_2.2.5), RTLD_NEXT (below), a wrapper behind the
// shim looking up what it wraps (WrapsBehindShim), errno, the dlerror()
// state (glibc's function is called exactly once per lookup, nothing else
// here touches the state).
//
// The exported stubs (assembly, below) ask ParklotLookupRoute where to
// jump, then jump with the caller's frame intact:
//   - glibc's function, for a name the shim does not export, under Valgrind
//     (the shim steps aside, surface.h), and for the shim's own lookups
//     (RealGlibc() wants glibc's functions);
//   - else the slow path, which calls glibc's with the caller's return
//     address: through a `ret` byte in the caller's object, as the dlopen
//     stubs do (deepbind.cc), then maps the answer.
//
// Everything on the route runs before any other code of the process might
// (ASan's runtime, preloaded ahead of the shim, looks its interceptors up
// with dlsym before it is initialized): it is not instrumented and calls
// only _dl_find_object, which no sanitizer intercepts, takes no lock and
// makes no system call.
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>

#include "base/futex.h"
#include "preload/call_as.h"
#include "preload/own_libc.h"
#include "preload/shim.h"
#include "preload/symbol_versions.h"

#define PARKLOT_NOSAN __attribute__((no_sanitize("address", "undefined")))


namespace parklot::internal::preload {
namespace {

// An object's dynamic symbol table, as the loader mapped it.
struct DynSyms {
  uintptr_t base = 0;
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  const uint32_t* gnu_hash = nullptr;
  const ElfW(Half)* versym = nullptr;
  const char* verdef = nullptr;
};

// What the route needs, found once: the shim's and libc's tables and
// extents, and glibc's dlsym and dlvsym.
struct Objects {
  DynSyms shim, libc;
  const link_map* shim_map = nullptr;
  uintptr_t shim_lo = 0, shim_hi = 0, libc_lo = 0, libc_hi = 0;
  const void* glibc_dlsym = nullptr;
  const void* glibc_dlvsym = nullptr;
};

// 0: not found yet; 1: one finder is writing g_objects; 2: g_objects is
// final. A finder that loses the race uses its own copy for that call.
std::atomic<int> g_objects_state{0};
Objects g_objects;

PARKLOT_NOSAN bool StrEq(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) {
    ++a;
    ++b;
  }
  return *a == *b;
}

// A dynamic-section pointer: glibc relocates some in place (DT_SYMTAB,
// DT_GNU_HASH, DT_VERSYM, ...), not DT_VERDEF.
PARKLOT_NOSAN uintptr_t DynPtr(uintptr_t base, uintptr_t p) {
  return p < base ? p + base : p;
}

// The object holding `addr`, with its extent. False if none does.
PARKLOT_NOSAN bool ObjectAt(const void* addr, DynSyms* d, uintptr_t* lo,
                            uintptr_t* hi, const link_map** map = nullptr) {
  dl_find_object found;
  if (_dl_find_object(const_cast<void*>(addr), &found) != 0) return false;
  const link_map* m = found.dlfo_link_map;
  if (map != nullptr) *map = m;
  *lo = reinterpret_cast<uintptr_t>(found.dlfo_map_start);
  *hi = reinterpret_cast<uintptr_t>(found.dlfo_map_end);
  d->base = m->l_addr;
  for (const ElfW(Dyn)* e = m->l_ld; e != nullptr && e->d_tag != DT_NULL; ++e) {
    const uintptr_t p = DynPtr(m->l_addr, e->d_un.d_ptr);
    switch (e->d_tag) {
      case DT_SYMTAB: d->symtab = reinterpret_cast<const ElfW(Sym)*>(p); break;
      case DT_STRTAB: d->strtab = reinterpret_cast<const char*>(p); break;
      case DT_GNU_HASH: d->gnu_hash = reinterpret_cast<const uint32_t*>(p); break;
      case DT_VERSYM: d->versym = reinterpret_cast<const ElfW(Half)*>(p); break;
      case DT_VERDEF: d->verdef = reinterpret_cast<const char*>(p); break;
    }
  }
  return d->symtab != nullptr && d->strtab != nullptr && d->gnu_hash != nullptr;
}

// The name of version index `ndx` in `d`, or null.
PARKLOT_NOSAN const char* VersionName(const DynSyms& d, unsigned ndx) {
  if (d.verdef == nullptr) return nullptr;
  for (const char* p = d.verdef;;) {
    const auto* vd = reinterpret_cast<const ElfW(Verdef)*>(p);
    if (vd->vd_ndx == ndx) {
      const auto* aux = reinterpret_cast<const ElfW(Verdaux)*>(p + vd->vd_aux);
      return d.strtab + aux->vda_name;
    }
    if (vd->vd_next == 0) return nullptr;
    p += vd->vd_next;
  }
}

enum class Want {
  kAny,      // any version: whether the object defines the name at all
  kDefault,  // dlsym's: the default version, else the one hidden version
  kVersion,  // dlvsym's: exactly `version`
};

// The address of `name` in `d` (0: none), by the object's GNU hash table,
// as the loader looks it up.
PARKLOT_NOSAN uintptr_t FindSymbol(const DynSyms& d, const char* name,
                                   Want want, const char* version,
                                   unsigned char* type = nullptr) {
  const uint32_t* h = d.gnu_hash;
  const uint32_t nbuckets = h[0], symoffset = h[1], bloom_size = h[2],
                 shift = h[3];
  if (nbuckets == 0 || bloom_size == 0) return 0;
  uint32_t hash = 5381;
  for (const char* c = name; *c != '\0'; ++c) {
    hash = hash * 33 + static_cast<unsigned char>(*c);
  }
  constexpr unsigned kBits = 8 * sizeof(ElfW(Addr));
  const auto* bloom = reinterpret_cast<const ElfW(Addr)*>(h + 4);
  const ElfW(Addr) word = bloom[(hash / kBits) % bloom_size];
  const ElfW(Addr) mask = (ElfW(Addr){1} << (hash % kBits)) |
                          (ElfW(Addr){1} << ((hash >> shift) % kBits));
  if ((word & mask) != mask) return 0;  // most names stop here
  const auto* buckets = reinterpret_cast<const uint32_t*>(bloom + bloom_size);
  const uint32_t* chain = buckets + nbuckets;
  uint32_t i = buckets[hash % nbuckets];
  if (i < symoffset) return 0;
  uintptr_t hidden = 0;
  int hidden_count = 0;
  for (;; ++i) {
    const uint32_t link = chain[i - symoffset];
    const ElfW(Sym)& s = d.symtab[i];
    if ((link | 1) == (hash | 1) && s.st_shndx != SHN_UNDEF &&
        StrEq(d.strtab + s.st_name, name)) {
      const uintptr_t addr = d.base + s.st_value;
      const unsigned v = d.versym != nullptr ? d.versym[i] : 1;
      if (type != nullptr) *type = ELF64_ST_TYPE(s.st_info);
      if (want == Want::kAny) return addr;
      if (want == Want::kDefault) {
        if ((v & 0x8000) == 0) return addr;
        hidden = addr;
        ++hidden_count;
      } else {
        const char* vn = VersionName(d, v & 0x7fff);
        if (vn != nullptr && StrEq(vn, version)) return addr;
      }
    }
    if ((link & 1) != 0) break;
  }
  return want == Want::kDefault && hidden_count == 1 ? hidden : 0;
}

// Raw system calls: write() and abort() are among the functions this file
// finds (own_libc.c), so a failure here must not call them.
PARKLOT_NOSAN void Fatal(const char* what) {
  static const char kPrefix[] = "parklot: cannot find ";
  size_t len = 0;
  while (what[len] != '\0') ++len;
  RawSyscall6(SYS_write, STDERR_FILENO, reinterpret_cast<uintptr_t>(kPrefix),
              sizeof(kPrefix) - 1, 0, 0, 0);
  RawSyscall6(SYS_write, STDERR_FILENO, reinterpret_cast<uintptr_t>(what), len,
              0, 0, 0);
  RawSyscall6(SYS_write, STDERR_FILENO, reinterpret_cast<uintptr_t>("\n"), 1,
              0, 0, 0);
  RawSyscall6(SYS_kill, RawSyscall6(SYS_getpid, 0, 0, 0, 0, 0, 0), SIGABRT, 0,
              0, 0, 0);
  RawSyscall6(SYS_exit_group, 127, 0, 0, 0, 0, 0);
  __builtin_unreachable();
}

// libc's link map, found by its soname among the objects loaded with the
// shim, never through a symbol: the address of any function the shim
// names could be the program's or another preload's definition.
PARKLOT_NOSAN const link_map* LibcMap(const link_map* shim) {
  const link_map* head = shim;
  while (head->l_prev != nullptr) head = head->l_prev;
  for (const link_map* m = head; m != nullptr; m = m->l_next) {
    const char* strtab = nullptr;
    uintptr_t soname = 0;
    bool has_soname = false;
    for (const ElfW(Dyn)* e = m->l_ld; e != nullptr && e->d_tag != DT_NULL;
         ++e) {
      if (e->d_tag == DT_STRTAB) {
        strtab = reinterpret_cast<const char*>(DynPtr(m->l_addr, e->d_un.d_ptr));
      } else if (e->d_tag == DT_SONAME) {
        soname = e->d_un.d_val;
        has_soname = true;
      }
    }
    if (strtab != nullptr && has_soname && StrEq(strtab + soname, "libc.so.6")) {
      return m;
    }
  }
  return nullptr;
}

PARKLOT_NOSAN const Objects& GetObjects(Objects* local) {
  if (g_objects_state.load(std::memory_order_acquire) == 2) return g_objects;
  Objects o;
  if (!ObjectAt(reinterpret_cast<const void*>(&GetObjects), &o.shim,
                &o.shim_lo, &o.shim_hi, &o.shim_map)) {
    Fatal("the shim's symbol table");
  }
  const link_map* libc = LibcMap(o.shim_map);
  if (libc == nullptr ||
      !ObjectAt(reinterpret_cast<const void*>(libc->l_ld), &o.libc,
                &o.libc_lo, &o.libc_hi)) {
    Fatal("libc's symbol table");
  }
  o.glibc_dlsym = reinterpret_cast<const void*>(
      FindSymbol(o.libc, "dlsym", Want::kDefault, nullptr));
  o.glibc_dlvsym = reinterpret_cast<const void*>(
      FindSymbol(o.libc, "dlvsym", Want::kDefault, nullptr));
  if (o.glibc_dlsym == nullptr || o.glibc_dlvsym == nullptr) {
    Fatal("glibc's dlsym and dlvsym");
  }
  int expected = 0;
  // Both orders given: the one-order form calls libstdc++'s
  // __cmpexch_failure_order, out of line at -O1 and so instrumented under
  // ASan, which this code runs before (ASan's own dlsym calls).
  if (g_objects_state.compare_exchange_strong(expected, 1,
                                              std::memory_order_relaxed,
                                              std::memory_order_relaxed)) {
    g_objects = o;
    g_objects_state.store(2, std::memory_order_release);
    return g_objects;
  }
  *local = o;
  return *local;
}

// The return gadget (call_as.h) of the object holding `caller`; address 0
// if none (or the caller is in no object). The ELF header heads the object's first
// mapping; its program headers follow it there.
PARKLOT_NOSAN ReturnGadget GadgetIn(const void* caller) {
  dl_find_object found;
  if (_dl_find_object(const_cast<void*>(caller), &found) != 0) return {};
  const auto start = reinterpret_cast<uintptr_t>(found.dlfo_map_start);
  const auto end = reinterpret_cast<uintptr_t>(found.dlfo_map_end);
  const auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(start);
  if (end - start < sizeof(*eh) || eh->e_ident[EI_MAG0] != ELFMAG0 ||
      eh->e_ident[EI_MAG1] != ELFMAG1 || eh->e_ident[EI_MAG2] != ELFMAG2 ||
      eh->e_ident[EI_MAG3] != ELFMAG3 ||
      eh->e_phoff + eh->e_phnum * sizeof(ElfW(Phdr)) > end - start) {
    return {};
  }
  const auto* ph = reinterpret_cast<const ElfW(Phdr)*>(start + eh->e_phoff);
  return FindReturnGadget(found.dlfo_link_map->l_addr, ph, eh->e_phnum);
}

// Whether the caller is an object after the shim in the global search
// order that defines `name` itself: an interposer preloaded after the shim
// (LD_PRELOAD=shim:lib), looking up the function it wraps. The shim's own
// calls of glibc's functions (RealGlibc(), found with RTLD_NEXT) reach that
// wrapper, so it must get glibc's, or the two call each other forever.
PARKLOT_NOSAN bool WrapsBehindShim(const Objects& o, const char* name,
                                   const void* caller) {
  DynSyms d;
  uintptr_t lo, hi;
  const link_map* m = nullptr;
  if (!ObjectAt(caller, &d, &lo, &hi, &m) ||
      FindSymbol(d, name, Want::kAny, nullptr) == 0) {
    return false;
  }
  for (const link_map* l = o.shim_map->l_next; l != nullptr; l = l->l_next) {
    if (l == m) return true;
  }
  return false;
}

using DlsymFn = void* (*)(void*, const char*);
using DlvsymFn = void* (*)(void*, const char*, const char*);

// glibc's answer for the caller, then the shim's function where that answer
// is glibc's own function of a name (and version) the shim exports.
PARKLOT_NOSAN void* Lookup(void* handle, const char* name, const char* version,
                           const void* caller, bool versioned) {
  Objects local;
  const Objects& o = GetObjects(&local);
  const void* fn = versioned ? o.glibc_dlvsym : o.glibc_dlsym;
  const ReturnGadget gadget =
      ParklotShadowStack() == 0 ? GadgetIn(caller) : ReturnGadget{};
  void* r;
  if (gadget.address != 0) {
    r = ParklotCallAs(fn, reinterpret_cast<uintptr_t>(handle),
                      reinterpret_cast<uintptr_t>(name),
                      reinterpret_cast<uintptr_t>(version), gadget.address,
                      gadget.saves);
  } else if (versioned) {
    // glibc then sees the shim as the caller: the same answer for a handle
    // and for RTLD_DEFAULT (the shim, loaded at start-up, has the global
    // scope); RTLD_NEXT never comes here (the route).
    r = reinterpret_cast<DlvsymFn>(fn)(handle, name, version);
  } else {
    r = reinterpret_cast<DlsymFn>(fn)(handle, name);
  }
  const auto v = reinterpret_cast<uintptr_t>(r);
  if (r == nullptr || v < o.libc_lo || v >= o.libc_hi) return r;
  if (WrapsBehindShim(o, name, caller)) return r;
  const uintptr_t mine = FindSymbol(o.shim, name,
                                    versioned ? Want::kVersion : Want::kDefault,
                                    version);
  return mine != 0 ? reinterpret_cast<void*>(mine) : r;
}

}  // namespace
}  // namespace parklot::internal::preload

extern "C" {
// own_libc.h.
__attribute__((visibility("hidden"))) PARKLOT_NOSAN void* ParklotGlibcOwn(
    const char* name) {
  using namespace parklot::internal::preload;
  Objects local;
  const Objects& o = GetObjects(&local);
  unsigned char type = STT_NOTYPE;
  uintptr_t addr = FindSymbol(o.libc, name, Want::kDefault, nullptr, &type);
  if (addr == 0) Fatal(name);
  // x86-64 glibc's resolvers take no argument (they read the loader's CPU
  // features).
  if (type == STT_GNU_IFUNC) addr = reinterpret_cast<uintptr_t (*)()>(addr)();
  return reinterpret_cast<void*>(addr);
}

// own_unwinder.c: libgcc_s's `name` at `version`, nullptr if the library
// or the symbol is missing (ParklotUnwinderFind), or the process ends with
// one line on stderr (ParklotUnwinderOwn). glibc's dlopen and dlvsym, not the shim's (no
// RTLD_DEEPBIND checks, no caller to answer for): libgcc_s is already
// loaded whenever an unwind runs through the shim (glibc loads it for
// cancellation and exit, a C++ program links it), so the dlopen finds it;
// it loads it only in a program with a static unwinder, as the DT_NEEDED
// entry this replaces did at start-up.
__attribute__((visibility("hidden"))) PARKLOT_NOSAN void* ParklotUnwinderFind(
    const char* name, const char* version) {
  using namespace parklot::internal::preload;
  Objects local;
  const Objects& o = GetObjects(&local);
  static void* g_libgcc_s = nullptr;
  void* handle = __atomic_load_n(&g_libgcc_s, __ATOMIC_ACQUIRE);
  if (handle == nullptr) {
    handle = RealGlibc().dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_LOCAL |
                                                     RTLD_NODELETE);
    if (handle == nullptr) return nullptr;
    __atomic_store_n(&g_libgcc_s, handle, __ATOMIC_RELEASE);
  }
  return reinterpret_cast<DlvsymFn>(o.glibc_dlvsym)(handle, name, version);
}

__attribute__((visibility("hidden"))) PARKLOT_NOSAN void* ParklotUnwinderOwn(
    const char* name, const char* version) {
  void* fn = ParklotUnwinderFind(name, version);
  if (fn == nullptr) parklot::internal::preload::Fatal(name);
  return fn;
}

__attribute__((visibility("hidden"))) PARKLOT_NOSAN void* ParklotDlsymSlow(
    void* handle, const char* name, const void* caller) {
  return parklot::internal::preload::Lookup(handle, name, nullptr, caller, false);
}

__attribute__((visibility("hidden"))) PARKLOT_NOSAN void* ParklotDlvsymSlow(
    void* handle, const char* name, const char* version, const void* caller) {
  return parklot::internal::preload::Lookup(handle, name, version, caller, true);
}

// Where the stub jumps: glibc's function (the caller's frame intact), or
// the slow path above.
__attribute__((visibility("hidden"))) PARKLOT_NOSAN const void*
ParklotLookupRoute(void* handle, const char* name, const char* version,
                   const void* caller, int versioned) {
  using namespace parklot::internal::preload;
  Objects local;
  const Objects& o = GetObjects(&local);
  const void* glibc = versioned != 0 ? o.glibc_dlvsym : o.glibc_dlsym;
  const auto c = reinterpret_cast<uintptr_t>(caller);
  if (SteppingAside() || IsNull(name) || (versioned != 0 && IsNull(version)) ||
      (c >= o.shim_lo && c < o.shim_hi) ||
      FindSymbol(o.shim, name, Want::kAny, nullptr) == 0) {
    return glibc;
  }
  // RTLD_NEXT is glibc's answer as it is: from the program and the objects
  // before the shim it is already the shim's function, and an object after
  // the shim asks for the function it wraps, whose next is glibc's (the
  // shim's RealGlibc() may call that wrapper: answering the shim's would
  // make the two call each other).
  if (handle == RTLD_NEXT) return glibc;
  return versioned != 0 ? reinterpret_cast<const void*>(&ParklotDlvsymSlow)
                        : reinterpret_cast<const void*>(&ParklotDlsymSlow);
}
}  // extern "C"

// The exported dlsym and dlvsym: save the arguments, ask the route, restore
// them and jump (the caller's return address stays on top: glibc's function
// reads it, the slow path gets it as its last argument). Stack: 16-byte
// aligned at each call.
asm(R"(
  .text
  .globl dlsym
  .type dlsym, @function
  .p2align 4
dlsym:
  .cfi_startproc
  endbr64
  push %rdi
  .cfi_adjust_cfa_offset 8
  push %rsi
  .cfi_adjust_cfa_offset 8
  sub $8, %rsp
  .cfi_adjust_cfa_offset 8
  xor %edx, %edx
  mov 24(%rsp), %rcx
  xor %r8d, %r8d
  call ParklotLookupRoute
  add $8, %rsp
  .cfi_adjust_cfa_offset -8
  pop %rsi
  .cfi_adjust_cfa_offset -8
  pop %rdi
  .cfi_adjust_cfa_offset -8
  mov (%rsp), %rdx
  jmp *%rax
  .cfi_endproc
  .size dlsym, .-dlsym

  .globl dlvsym
  .type dlvsym, @function
  .p2align 4
dlvsym:
  .cfi_startproc
  endbr64
  push %rdi
  .cfi_adjust_cfa_offset 8
  push %rsi
  .cfi_adjust_cfa_offset 8
  push %rdx
  .cfi_adjust_cfa_offset 8
  mov 24(%rsp), %rcx
  mov $1, %r8d
  call ParklotLookupRoute
  pop %rdx
  .cfi_adjust_cfa_offset -8
  pop %rsi
  .cfi_adjust_cfa_offset -8
  pop %rdi
  .cfi_adjust_cfa_offset -8
  mov (%rsp), %rcx
  jmp *%rax
  .cfi_endproc
  .size dlvsym, .-dlvsym
)");

// glibc's symbol versions (symbol_versions.h).
PARKLOT_VERSIONS_LOOKUP;
