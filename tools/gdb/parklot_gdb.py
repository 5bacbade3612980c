# gdb extension for programs under the parklot shim: `info parklot` lists,
# in a live process or a core file, each thread parked in the lot, the
# address it waits on (with the symbol there), the lock's holder where the
# lock records one, and the wait-for cycles among them (a deadlock).
#
#   gdb -p PID -ex 'source PREFIX/share/parklot/parklot_gdb.py' -ex 'info parklot'
#   gdb PROGRAM CORE -ex 'source .../parklot_gdb.py' -ex 'info parklot'
#
# It needs no debug information of the shim or of the program: the shim
# exports `parklot_debug_info`, which says where each thread's data lies in
# its TLS, how it leads to the thread's queue record, and how both are laid
# out (docs/design.md §5.17); each thread's TLS is found from its %fs_base. Holders: a
# mutex the shim runs keeps glibc's values in its lock word, its holder's
# registry slot beside it (in __list) and the holder's thread id in glibc's
# __owner, a write-locked rwlock its
# writer's slot in its word and the id in glibc's __cur_writer; both must
# name one thread of the process. The lock's type is shown where the
# program's debug information has the symbol's. Each parked thread shows the
# time of day it queued and how long before now (a live process) or before
# the core file was written it had waited. Not shown: tasks that park on a
# guest record (clone(CLONE_VM) without CLONE_SETTLS).
import os
import re
import struct
import time

import gdb

_MAGIC = 0x544C4B50
# Layout version 3: the mutex fields as MutexCore keeps them now (glibc's
# values in the word, the holder's slot beside it), and the registry's
# description (for `parklot top`) after the 64 bytes this extension reads.
_VERSION = 3
_LAYOUT = "<IIqIIIIIIIIII2I"  # parklot_debug_info's first 64 bytes


def _read(addr, size):
    return bytes(gdb.selected_inferior().read_memory(addr, size))


def _u32(addr):
    return struct.unpack("<I", _read(addr, 4))[0]


def _i32(addr):
    return struct.unpack("<i", _read(addr, 4))[0]


def _u64(addr):
    return struct.unpack("<Q", _read(addr, 8))[0]


def _debug_info():
    try:
        addr = int(gdb.parse_and_eval("(unsigned long)&parklot_debug_info"))
    except gdb.error:
        return None
    f = struct.unpack(_LAYOUT, _read(addr, 64))
    info = {
        "magic": f[0], "version": f[1], "tls_offset": f[2], "record_ptr": f[3],
        "key": f[4], "parker": f[5], "queued": f[6], "slot": f[7],
        "mutex_slot": f[8], "locked_max": f[9],
        "writer": f[10], "rw_shift": f[11], "rw_bits": f[12],
        "since": f[13], "own_record": f[14],
    }
    if info["magic"] != _MAGIC:
        raise gdb.GdbError("parklot: parklot_debug_info has a bad magic number")
    if info["version"] != _VERSION:
        raise gdb.GdbError("parklot: parklot_debug_info version %d, this "
                           "extension reads %d" % (info["version"], _VERSION))
    if info["tls_offset"] == 0:
        raise gdb.GdbError("parklot: the shim's constructor has not run yet")
    return info


def _symbol(addr):
    out = gdb.execute("info symbol 0x%x" % addr, to_string=True).strip()
    if out.startswith("No symbol"):
        return None, None
    name = out.split(" in section ")[0]
    base = name.split(" + ")[0]
    kind = None
    try:
        sym = gdb.lookup_global_symbol(base) or gdb.lookup_static_symbol(base)
        if sym is not None and " + " not in name:
            kind = str(sym.type)
    except gdb.error:
        pass
    return name, kind


class _Record:
    def __init__(self, thread, info):
        self.thread = thread
        fs_base = int(gdb.parse_and_eval("(unsigned long)$fs_base"))
        data = fs_base + info["tls_offset"]
        # The thread's queue record: in the registry while the thread is
        # registered, else in its thread data.
        rec = _u64(data + info["record_ptr"]) or data + info["own_record"]
        self.parker = _u32(rec + info["parker"])
        self.key = _u64(rec + info["key"])
        self.slot = _u32(data + info["slot"])
        self.queued = (self.parker & info["queued"]) != 0
        self.since_ns = _u64(data + info["since"])

    def name(self):
        return "Thread %d (LWP %d)" % (self.thread.num, self.thread.ptid[1])


def _now_ns():
    """Wall-clock ns of the process's "now": this moment for a live
    process, the core file's modification time for a core (None if it
    cannot be read)."""
    target = gdb.execute("info target", to_string=True)
    core = re.search(r"Local core dump file:\s*`([^']+)'", target)
    if core is None:
        return time.time_ns()
    try:
        return os.stat(core.group(1)).st_mtime_ns
    except OSError:
        return None


def _since(since_ns, now_ns):
    """', parked since HH:MM:SS.mmm (N.NNN s)' or '' when unknown."""
    if since_ns <= 0:
        return ""
    sec, ns = divmod(since_ns, 10**9)
    text = ", parked since %s.%03d" % (
        time.strftime("%H:%M:%S", time.localtime(sec)), ns // 10**6)
    if now_ns is not None:
        text += " (%.3f s)" % (max(0, now_ns - since_ns) / 1e9)
    return text


def _holder(key, records, info):
    """The record of the thread holding the lock at `key` and the glibc
    field that names it, or (None, None). A lock word of the shim names the
    holder's registry slot and glibc's field its thread id: both must name
    the same thread, which rules out words of other kinds."""
    by_lwp = {r.thread.ptid[1]: r for r in records}
    word = _u32(key)
    # A mutex: locked while 1..locked_max (glibc's values), the slot at
    # its offset; glibc's __owner at offset 8.
    if 1 <= word <= info["locked_max"]:
        r = by_lwp.get(_i32(key + 8))
        slot = _u32(key + info["mutex_slot"])
        if r is not None and slot != 0 and r.slot == slot:
            return r, "__owner"
    # An rwlock held for writing: writer bits, slot in its field of the
    # 64-bit word; glibc's __cur_writer at offset 24.
    if word & info["writer"]:
        r = by_lwp.get(_i32(key + 24))
        slot = (_u64(key) >> info["rw_shift"]) & ((1 << info["rw_bits"]) - 1)
        if r is not None and slot != 0 and r.slot == slot:
            return r, "__cur_writer"
    return None, None


class InfoParklot(gdb.Command):
    """List the threads parked in parklot, what they wait on, its holder, and
wait-for cycles (deadlocks). Live processes and core files."""

    def __init__(self):
        super().__init__("info parklot", gdb.COMMAND_STATUS)

    def invoke(self, arg, from_tty):
        info = _debug_info()
        if info is None:
            print("parklot: the shim is not loaded in this process")
            return
        inferior = gdb.selected_inferior()
        current = gdb.selected_thread()
        records = []
        try:
            for t in sorted(inferior.threads(), key=lambda t: t.num):
                t.switch()
                records.append(_Record(t, info))
        finally:
            if current is not None:
                current.switch()
        parked = [r for r in records if r.queued]
        now_ns = _now_ns()
        print("parklot: %d of %d threads parked" % (len(parked), len(records)))
        waits_for = {}
        for r in parked:
            name, kind = _symbol(r.key)
            where = "0x%x" % r.key + (" <%s>" % name if name else "")
            if kind:
                where += " (%s)" % kind
            holder, how = _holder(r.key, records, info)
            line = "  %s waits on %s" % (r.name(), where)
            line += _since(r.since_ns, now_ns)
            if holder is not None:
                line += ", held by %s (%s)" % (holder.name(), how)
                waits_for[r.thread.num] = (holder, name or "0x%x" % r.key)
            print(line)
        # Each thread waits for at most one holder: follow the chains.
        reported = set()
        for start in sorted(waits_for):
            path, seen = [], {}
            num = start
            while num in waits_for and num not in seen:
                seen[num] = len(path)
                holder, lock = waits_for[num]
                path.append((num, lock))
                num = holder.thread.num
            if num in seen:
                cycle = path[seen[num]:]
                key = frozenset(n for n, _ in cycle)
                if key in reported:
                    continue
                reported.add(key)
                text = " -> ".join("Thread %d -> %s" % (n, lock) for n, lock in cycle)
                print("deadlock: %s -> Thread %d" % (text, cycle[0][0]))


InfoParklot()
