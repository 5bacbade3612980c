// The return gadget and the trampoline that calls through it (call_as.h).
//
// The gadget stands in glibc's return-address slot, so an unwinder
// (libgcc's, behind backtrace() and C++ exceptions; gdb's) looks up the
// unwind rules of the code around it in its object's .eh_frame, at
// gadget - 1 as for any return address, and applies them to the stack
// ParklotCallAs built. A `ret` byte is walkable where those rules are
//  - CFA = rsp + 8, return address at CFA - 8, no register saved: the walk
//    returns into ParklotCallAs, whose own rules are %rbp-based; or
//  - CFA = rbp + 16, return address at CFA - 8, rbp at CFA - 16, and any
//    of rbx, r12-r15 at CFA - 24 ... CFA - 56: %rbp is ParklotCallAs's frame
//    pointer, laid out the same, so the walk steps straight to its caller,
//    and ParklotCallAs stores each of those registers (unchanged since its
//    caller) in the slot the rules name (ReturnGadget::saves).
// The rules are read from the object's PT_GNU_EH_FRAME search table in the
// layout GNU ld writes, with a small interpreter for the call-frame
// instructions compilers emit. An object with no walkable `ret` (or laid
// out otherwise) gets its first `ret` byte: glibc still sees the right
// caller, and a stack walk from inside the call stops at the gadget.
#include "preload/call_as.h"

#include <elf.h>
#include <string.h>

#include <cstddef>

namespace parklot::internal::preload {
namespace {

// Reading other objects' code and tables, which sanitizers do not know.
#define PARKLOT_NOSAN __attribute__((no_sanitize("address", "undefined")))

// DWARF register numbers (x86-64 psABI).
constexpr int kRbx = 3, kRbp = 6, kRsp = 7, kR12 = 12, kR15 = 15, kRa = 16;

// Little-endian reads of the unwind tables within [p, end).
struct CfiReader {
  const unsigned char* p;
  const unsigned char* end;
  bool ok = true;

  PARKLOT_NOSAN uint64_t Uleb() {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      if (p >= end || shift > 63) {
        ok = false;
        return 0;
      }
      const unsigned char b = *p++;
      v |= uint64_t{b & 0x7fu} << shift;
      if (!(b & 0x80)) return v;
    }
  }
  PARKLOT_NOSAN int64_t Sleb() {
    uint64_t v = 0;
    int shift = 0;
    unsigned char b;
    do {
      if (p >= end || shift > 63) {
        ok = false;
        return 0;
      }
      b = *p++;
      v |= uint64_t{b & 0x7fu} << shift;
      shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40)) v |= ~uint64_t{0} << shift;
    return static_cast<int64_t>(v);
  }
  template <typename T>
  PARKLOT_NOSAN T Fixed() {
    T v{};
    if (end - p < static_cast<ptrdiff_t>(sizeof(T))) {
      ok = false;
      return v;
    }
    memcpy(&v, p, sizeof(T));
    p += sizeof(T);
    return v;
  }
};

// The unwind rules in effect at one address, as far as a gadget needs them:
// the CFA, and where each register is saved (as a multiple of -8 from the
// CFA; 0 = not saved).
struct CfaRow {
  int cfa_reg = kRsp;
  int64_t cfa_off = 8;
  int64_t saved[kRa + 1] = {};
  bool other_saved = false;  // a register or a rule this does not follow

  // Whether a walk through a gadget here reaches ParklotCallAs's caller
  // (file comment); *saves as ReturnGadget::saves.
  PARKLOT_NOSAN bool Walkable(uint64_t* saves) const {
    if (other_saved || saved[kRa] != 1) return false;
    *saves = 0;
    if (cfa_reg == kRsp && cfa_off == 8) {
      for (int r = 0; r < kRa; ++r) {
        if (saved[r] != 0) return false;
      }
      return true;
    }
    if (cfa_reg != kRbp || cfa_off != 16 || saved[kRbp] != 2) return false;
    for (int r = 0; r < kRa; ++r) {
      if (r == kRbp || saved[r] == 0) continue;
      const int64_t slot = saved[r] - 2;  // CFA - 8n is %rbp - 8(n - 2)
      const int index = r == kRbx ? 0 : r - kR12 + 1;
      if ((r != kRbx && (r < kR12 || r > kR15)) || slot < 1 || slot > 5) {
        return false;
      }
      *saves |= static_cast<uint64_t>(slot) << (8 * index);
    }
    return true;
  }
};

// Runs call-frame instructions [p, end) (code alignment 1, data alignment
// -8) from `row` at address `loc`, stopping at the first row past `target`.
// False for an instruction it does not follow.
PARKLOT_NOSAN bool RunCfi(const unsigned char* p, const unsigned char* end,
                          uintptr_t loc, uintptr_t target, const CfaRow& initial,
                          CfaRow* row) {
  CfiReader r{p, end};
  CfaRow remembered[4];
  int depth = 0;
  auto save = [row](uint64_t reg, int64_t factored) PARKLOT_NOSAN {
    if (reg <= static_cast<uint64_t>(kRa)) {
      row->saved[reg] = factored;
    } else {
      row->other_saved = true;
    }
  };
  while (r.ok && r.p < r.end) {
    const unsigned char op = *r.p++;
    uint64_t delta = 0;
    switch (op >> 6) {
      case 1:  // advance_loc
        delta = op & 0x3f;
        break;
      case 2:  // offset
        save(op & 0x3f, static_cast<int64_t>(r.Uleb()));
        continue;
      case 3:  // restore
        if ((op & 0x3f) <= kRa) row->saved[op & 0x3f] = initial.saved[op & 0x3f];
        continue;
      default:
        switch (op) {
          case 0x00:  // nop
            continue;
          case 0x02:  // advance_loc1, 2, 4
            delta = r.Fixed<uint8_t>();
            break;
          case 0x03:
            delta = r.Fixed<uint16_t>();
            break;
          case 0x04:
            delta = r.Fixed<uint32_t>();
            break;
          case 0x05: {  // offset_extended
            const uint64_t reg = r.Uleb();
            save(reg, static_cast<int64_t>(r.Uleb()));
            continue;
          }
          case 0x11: {  // offset_extended_sf
            const uint64_t reg = r.Uleb();
            save(reg, r.Sleb());
            continue;
          }
          case 0x0a:  // remember_state
            if (depth == 4) return false;
            remembered[depth++] = *row;
            continue;
          case 0x0b:  // restore_state
            if (depth == 0) return false;
            *row = remembered[--depth];
            continue;
          case 0x0c:  // def_cfa
            row->cfa_reg = static_cast<int>(r.Uleb());
            row->cfa_off = static_cast<int64_t>(r.Uleb());
            continue;
          case 0x0d:  // def_cfa_register
            row->cfa_reg = static_cast<int>(r.Uleb());
            continue;
          case 0x0e:  // def_cfa_offset
            row->cfa_off = static_cast<int64_t>(r.Uleb());
            continue;
          default:  // expressions, same_value, undefined, register, ...
            return false;
        }
    }
    if (loc + delta > target) return r.ok;
    loc += delta;
  }
  return r.ok;
}

// Whether [p, p + size) lies in one of the object's mapped segments with
// `flags`.
PARKLOT_NOSAN bool Mapped(uintptr_t base, const ElfW(Phdr)* phdr, int phnum,
                          uintptr_t p, uintptr_t size, uint32_t flags) {
  for (int i = 0; i < phnum; ++i) {
    const ElfW(Phdr)& ph = phdr[i];
    const uintptr_t start = base + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && (ph.p_flags & flags) == flags && p >= start &&
        size <= ph.p_filesz && p - start <= ph.p_filesz - size) {
      return true;
    }
  }
  return false;
}

// One table record (CIE or FDE) at `rec`: its body [*body, *end), if the
// record lies in a readable segment.
PARKLOT_NOSAN bool Record(uintptr_t base, const ElfW(Phdr)* phdr, int phnum,
                          const unsigned char* rec, const unsigned char** body,
                          const unsigned char** end) {
  const auto at = reinterpret_cast<uintptr_t>(rec);
  uint32_t len;
  if (!Mapped(base, phdr, phnum, at, 4, PF_R)) return false;
  memcpy(&len, rec, 4);
  if (len < 4 || len == 0xffffffff ||
      !Mapped(base, phdr, phnum, at, 4 + uintptr_t{len}, PF_R)) {
    return false;
  }
  *body = rec + 4;
  *end = rec + 4 + len;
  return true;
}

// The CIE compilers give x86-64 code without a personality: augmentation
// "zR", code factor 1, data factor -8, return address register 16, and
// pc-relative 32-bit addresses; its initial rules run into *row.
PARKLOT_NOSAN bool ReadCie(const unsigned char* body, const unsigned char* end,
                           CfaRow* row) {
  CfiReader r{body, end};
  if (r.Fixed<uint32_t>() != 0) return false;  // a CIE's id
  const uint8_t version = r.Fixed<uint8_t>();
  if (!r.ok || (version != 1 && version != 3)) return false;
  if (r.end - r.p < 3 || memcmp(r.p, "zR", 3) != 0) return false;
  r.p += 3;
  if (r.Uleb() != 1 || r.Sleb() != -8) return false;
  const uint64_t ra = version == 1 ? r.Fixed<uint8_t>() : r.Uleb();
  if (ra != static_cast<uint64_t>(kRa) || r.Uleb() != 1) return false;
  if (r.Fixed<uint8_t>() != 0x1b || !r.ok) return false;  // pcrel sdata4
  *row = CfaRow{};
  row->saved[kRa] = 0;
  CfaRow initial = *row;
  return RunCfi(r.p, r.end, 0, 0, initial, row) && row->cfa_reg == kRsp &&
         row->cfa_off == 8 && row->saved[kRa] == 1;
}

// A walkable `ret` byte of one FDE's function, or address 0.
PARKLOT_NOSAN ReturnGadget FromFde(uintptr_t base, const ElfW(Phdr)* phdr,
                                   int phnum, const unsigned char* fde) {
  const unsigned char *body, *end, *cie_body, *cie_end;
  if (!Record(base, phdr, phnum, fde, &body, &end)) return {};
  CfiReader r{body, end};
  const uint32_t cie_off = r.Fixed<uint32_t>();
  if (!r.ok || cie_off == 0) return {};
  CfaRow entry;
  if (!Record(base, phdr, phnum, body - cie_off, &cie_body, &cie_end) ||
      !ReadCie(cie_body, cie_end, &entry)) {
    return {};
  }
  const unsigned char* begin_at = r.p;
  const int32_t begin_rel = r.Fixed<int32_t>();
  const int32_t range = r.Fixed<int32_t>();
  const uint64_t aug = r.Uleb();
  if (!r.ok || range < 2 || aug > static_cast<uint64_t>(r.end - r.p)) return {};
  r.p += aug;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(begin_at) + begin_rel;
  if (!Mapped(base, phdr, phnum, begin, static_cast<uintptr_t>(range),
              PF_R | PF_X)) {
    return {};
  }
  const auto* code = reinterpret_cast<const unsigned char*>(begin);
  for (int32_t at = 1; at < range; ++at) {
    if (code[at] != 0xc3) continue;
    CfaRow row = entry;
    ReturnGadget g;
    if (RunCfi(r.p, r.end, begin, begin + at - 1, entry, &row) &&
        row.Walkable(&g.saves)) {
      g.address = begin + at;
      return g;
    }
  }
  return {};
}

// A walkable gadget from the object's unwind search table, or address 0.
PARKLOT_NOSAN ReturnGadget Walkable(uintptr_t base, const ElfW(Phdr)* phdr,
                                    int phnum) {
  for (int i = 0; i < phnum; ++i) {
    const ElfW(Phdr)& ph = phdr[i];
    if (ph.p_type != PT_GNU_EH_FRAME || ph.p_memsz < 12 ||
        !Mapped(base, phdr, phnum, base + ph.p_vaddr, ph.p_memsz, PF_R)) {
      continue;
    }
    const auto* hdr = reinterpret_cast<const unsigned char*>(base + ph.p_vaddr);
    // GNU ld's layout: version 1; eh_frame_ptr pc-relative sdata4; the count
    // udata4; the table's entries data-relative sdata4 pairs.
    if (hdr[0] != 1 || hdr[1] != 0x1b || hdr[2] != 0x03 || hdr[3] != 0x3b) {
      continue;
    }
    uint32_t count;
    memcpy(&count, hdr + 8, 4);
    if (count > (ph.p_memsz - 12) / 8) continue;
    for (uint32_t k = 0; k < count; ++k) {
      int32_t fde_rel;
      memcpy(&fde_rel, hdr + 12 + 8 * k + 4, 4);
      const ReturnGadget g = FromFde(base, phdr, phnum, hdr + fde_rel);
      if (g.address != 0) return g;
    }
  }
  return {};
}

}  // namespace

PARKLOT_NOSAN ReturnGadget FindReturnGadget(uintptr_t base,
                                            const ElfW(Phdr)* phdr, int phnum) {
  const ReturnGadget walkable = Walkable(base, phdr, phnum);
  if (walkable.address != 0) return walkable;
  for (int i = 0; i < phnum; ++i) {
    const ElfW(Phdr)& ph = phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & (PF_X | PF_R)) != (PF_X | PF_R)) {
      continue;
    }
    const auto* code = reinterpret_cast<const unsigned char*>(base + ph.p_vaddr);
    for (size_t k = 0; k < ph.p_filesz; ++k) {
      if (code[k] == 0xc3) return {reinterpret_cast<uintptr_t>(code + k), 0};
    }
  }
  return {};
}

}  // namespace parklot::internal::preload

// ParklotCallAs(fn, a, b, c, gadget, saves): a frame on %rbp; below it five
// slots where `saves` puts rbx, r12-r15 for the gadget's unwind rules (the
// file comment), then the continuation and `gadget` as fn's return address:
// fn returns to the gadget, whose `ret` returns to the continuation. The
// stack is aligned for fn as after a call.
asm(R"(
  .text
  .globl ParklotCallAs
  .hidden ParklotCallAs
  .type ParklotCallAs, @function
  .p2align 4
ParklotCallAs:
  .cfi_startproc
  endbr64
  push %rbp
  .cfi_def_cfa_offset 16
  .cfi_offset %rbp, -16
  mov %rsp, %rbp
  .cfi_def_cfa_register %rbp
  sub $40, %rsp
  movzbl %r9b, %eax
  test %eax, %eax
  jz .Lcall_as_r12
  neg %rax
  mov %rbx, (%rbp,%rax,8)
.Lcall_as_r12:
  shr $8, %r9
  movzbl %r9b, %eax
  test %eax, %eax
  jz .Lcall_as_r13
  neg %rax
  mov %r12, (%rbp,%rax,8)
.Lcall_as_r13:
  shr $8, %r9
  movzbl %r9b, %eax
  test %eax, %eax
  jz .Lcall_as_r14
  neg %rax
  mov %r13, (%rbp,%rax,8)
.Lcall_as_r14:
  shr $8, %r9
  movzbl %r9b, %eax
  test %eax, %eax
  jz .Lcall_as_r15
  neg %rax
  mov %r14, (%rbp,%rax,8)
.Lcall_as_r15:
  shr $8, %r9
  movzbl %r9b, %eax
  test %eax, %eax
  jz .Lcall_as_go
  neg %rax
  mov %r15, (%rbp,%rax,8)
.Lcall_as_go:
  mov %rdi, %rax
  mov %rsi, %rdi
  mov %rdx, %rsi
  mov %rcx, %rdx
  lea .Lcall_as_back(%rip), %rcx
  push %rcx
  push %r8
  jmp *%rax
.Lcall_as_back:
  leave
  .cfi_def_cfa %rsp, 8
  ret
  .cfi_endproc
  .size ParklotCallAs, .-ParklotCallAs

  .globl ParklotShadowStack
  .hidden ParklotShadowStack
  .type ParklotShadowStack, @function
  .p2align 4
ParklotShadowStack:
  .cfi_startproc
  endbr64
  xor %eax, %eax
  rdsspq %rax
  ret
  .cfi_endproc
  .size ParklotShadowStack, .-ParklotShadowStack
)");
