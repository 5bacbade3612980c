// dlopen with RTLD_DEEPBIND. Such an object looks its symbols up in its own
// scope (itself, then its dependencies, libc among them) before the global
// one, where the preloaded shim sits; its pthread_mutex_lock and the rest
// bind to glibc's, and glibc's and the shim's operations on one mutex (the
// program passes the object its locks, or the object's locks are the
// program's) do not know each other's lock words: both sides hang.
//
// The shim interposes dlopen. Without the flag it jumps to glibc's with the
// caller's frame intact: glibc picks the caller's search path (its
// DT_RUNPATH) and namespace by the return address. With the flag, after the
// load it points the new objects' GOT entries for what the shim serves at
// the shim's functions, as the lookup without the flag would have, unless
// the object's own scope defines them itself (the reason to ask for the
// flag). The object's constructors have run by then, against glibc's
// functions. A library calling dlopen with the flag for a bare file name
// gets the search path of the calling object, found with dlinfo, as glibc
// would use it. Thread-safe: concurrent loads rebind to the same values,
// each GOT entry with one aligned store.
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "preload/shim.h"

namespace parklot::preload {
namespace {

// The base address of the object holding `p`, or 0.
uintptr_t ObjectBase(const void* p) {
  Dl_info info;
  if (p == nullptr || dladdr(p, &info) == 0) return 0;
  return reinterpret_cast<uintptr_t>(info.dli_fbase);
}

// The absolute address of a dynamic-section pointer: glibc relocates them
// in place, except in read-only dynamic sections.
uintptr_t DynPtr(const link_map* m, uintptr_t p) {
  return p < m->l_addr ? p + m->l_addr : p;
}

struct Relro {
  uintptr_t start = 0, end = 0;  // page-rounded
};

Relro RelroOf(const link_map* m) {
  struct Query {
    const link_map* m;
    Relro relro;
  } q{m, {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* arg) {
        auto* q = static_cast<Query*>(arg);
        if (info->dlpi_addr != q->m->l_addr) return 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_GNU_RELRO) continue;
          const uintptr_t page = static_cast<uintptr_t>(getpagesize());
          const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
          q->relro.start = start & ~(page - 1);
          q->relro.end = (start + ph.p_memsz + page - 1) & ~(page - 1);
        }
        return 1;
      },
      &q);
  return q.relro;
}

// Writes `value` into the GOT entry at `slot`, opening a read-only
// (RELRO) page for the store.
void WriteSlot(uintptr_t slot, uintptr_t value, const Relro& relro) {
  const bool read_only = slot >= relro.start && slot < relro.end;
  const uintptr_t page = slot & ~(static_cast<uintptr_t>(getpagesize()) - 1);
  if (read_only && mprotect(reinterpret_cast<void*>(page), getpagesize(),
                            PROT_READ | PROT_WRITE) != 0) {
    return;
  }
  __atomic_store_n(reinterpret_cast<uintptr_t*>(slot), value,
                   __ATOMIC_RELEASE);
  if (read_only) mprotect(reinterpret_cast<void*>(page), getpagesize(), PROT_READ);
}

// Points `m`'s GOT entries that `handle`'s scope binds to glibc, for
// functions the global scope finds in the shim, at the shim's.
void RebindObject(const link_map* m, void* handle, uintptr_t shim_base,
                  uintptr_t libc_base) {
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  const ElfW(Rela)* tables[2] = {nullptr, nullptr};
  size_t sizes[2] = {0, 0};
  for (const ElfW(Dyn)* d = m->l_ld; d != nullptr && d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB:
        symtab = reinterpret_cast<const ElfW(Sym)*>(DynPtr(m, d->d_un.d_ptr));
        break;
      case DT_STRTAB:
        strtab = reinterpret_cast<const char*>(DynPtr(m, d->d_un.d_ptr));
        break;
      case DT_JMPREL:
        tables[0] = reinterpret_cast<const ElfW(Rela)*>(DynPtr(m, d->d_un.d_ptr));
        break;
      case DT_PLTRELSZ: sizes[0] = d->d_un.d_val; break;
      case DT_RELA:
        tables[1] = reinterpret_cast<const ElfW(Rela)*>(DynPtr(m, d->d_un.d_ptr));
        break;
      case DT_RELASZ: sizes[1] = d->d_un.d_val; break;
    }
  }
  if (symtab == nullptr || strtab == nullptr) return;
  Relro relro;
  bool relro_known = false;
  for (int t = 0; t < 2; ++t) {
    if (tables[t] == nullptr) continue;
    for (size_t i = 0; i < sizes[t] / sizeof(ElfW(Rela)); ++i) {
      const ElfW(Rela)& r = tables[t][i];
      const uint32_t type = ELF64_R_TYPE(r.r_info);
      if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT &&
          !(type == R_X86_64_64 && r.r_addend == 0)) {
        continue;
      }
      const ElfW(Sym)& sym = symtab[ELF64_R_SYM(r.r_info)];
      const int sym_type = ELF64_ST_TYPE(sym.st_info);
      if (sym.st_name == 0 || sym.st_shndx != SHN_UNDEF ||
          (sym_type != STT_FUNC && sym_type != STT_NOTYPE)) {
        continue;
      }
      const char* name = strtab + sym.st_name;
      void* global = dlsym(RTLD_DEFAULT, name);
      if (ObjectBase(global) != shim_base) continue;
      void* deep = dlsym(handle, name);
      if (deep == global || ObjectBase(deep) != libc_base) continue;
      const uintptr_t slot = m->l_addr + r.r_offset;
      if (*reinterpret_cast<const uintptr_t*>(slot) ==
          reinterpret_cast<uintptr_t>(global)) {
        continue;
      }
      if (!relro_known) {
        relro = RelroOf(m);
        relro_known = true;
      }
      WriteSlot(slot, reinterpret_cast<uintptr_t>(global), relro);
    }
  }
}

// The full path of `file` on the search path of the object holding
// `caller`, or "" (then glibc's own search from the shim is as good).
std::string FindForCaller(const char* file, const void* caller) {
  if (strchr(file, '/') != nullptr) return "";
  Dl_info info;
  link_map* lm = nullptr;
  if (dladdr1(caller, &info, reinterpret_cast<void**>(&lm), RTLD_DL_LINKMAP) ==
          0 ||
      lm == nullptr) {
    return "";
  }
  Dl_serinfo size;
  if (dlinfo(lm, RTLD_DI_SERINFOSIZE, &size) != 0) return "";
  // A handle is a link_map in glibc. Sized by glibc; malloc is safe here
  // (dlopen allocates anyway).
  auto* paths = static_cast<Dl_serinfo*>(malloc(size.dls_size));
  if (paths == nullptr) return "";
  std::string found;
  if (dlinfo(lm, RTLD_DI_SERINFOSIZE, paths) == 0 &&
      dlinfo(lm, RTLD_DI_SERINFO, paths) == 0) {
    for (unsigned i = 0; i < paths->dls_cnt && found.empty(); ++i) {
      std::string candidate =
          std::string(paths->dls_serpath[i].dls_name) + "/" + file;
      if (access(candidate.c_str(), F_OK) == 0) found = std::move(candidate);
    }
  }
  free(paths);
  return found;
}

}  // namespace
}  // namespace parklot::preload

extern "C" {
// glibc's dlopen for the stub below, which cannot call RealGlibc(): set at
// the first call (dlopen may come before the shim's constructor, from
// another preloaded library's).
__attribute__((visibility("hidden"))) void* (*parklot_glibc_dlopen)(const char*,
                                                                   int) = nullptr;

__attribute__((visibility("hidden"))) void* (*ParklotResolveDlopen())(
    const char*, int) {
  auto fn = parklot::preload::RealGlibc().dlopen;
  __atomic_store_n(&parklot_glibc_dlopen, fn, __ATOMIC_RELEASE);
  return fn;
}

// dlopen(file, flags | RTLD_DEEPBIND) from `caller` (the return address).
__attribute__((visibility("hidden"))) void* ParklotDlopenDeepbind(
    const char* file, int flags, const void* caller) {
  using namespace parklot::preload;
  std::string path = file != nullptr ? FindForCaller(file, caller) : "";
  void* handle = RealGlibc().dlopen(path.empty() ? file : path.c_str(), flags);
  if (handle == nullptr) return nullptr;
  link_map* lm = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || lm == nullptr) return handle;
  const uintptr_t shim_base =
      ObjectBase(reinterpret_cast<const void*>(&ParklotDlopenDeepbind));
  const uintptr_t libc_base =
      ObjectBase(reinterpret_cast<const void*>(RealGlibc().mutex_lock));
  for (const link_map* m = lm; m != nullptr; m = m->l_next) {
    const uintptr_t base = m->l_addr;
    if (base == shim_base || base == libc_base) continue;
    RebindObject(m, handle, shim_base, libc_base);
  }
  return handle;
}
}

static_assert(RTLD_DEEPBIND == 8, "the dlopen stub tests bit 3");

// The exported dlopen: a jump to glibc's without the flag (so glibc sees
// the program's return address), else the rebinding path above with the
// return address as the caller.
asm(R"(
  .text
  .globl dlopen
  .type dlopen, @function
  .p2align 4
dlopen:
  .cfi_startproc
  endbr64
  test $8, %esi
  jnz 1f
  mov parklot_glibc_dlopen(%rip), %rax
  test %rax, %rax
  jz 2f
  jmp *%rax
1:
  mov (%rsp), %rdx
  jmp ParklotDlopenDeepbind
2:
  push %rdi
  .cfi_adjust_cfa_offset 8
  push %rsi
  .cfi_adjust_cfa_offset 8
  sub $8, %rsp
  .cfi_adjust_cfa_offset 8
  call ParklotResolveDlopen
  add $8, %rsp
  .cfi_adjust_cfa_offset -8
  pop %rsi
  .cfi_adjust_cfa_offset -8
  pop %rdi
  .cfi_adjust_cfa_offset -8
  jmp *%rax
  .cfi_endproc
  .size dlopen, .-dlopen
)");
