// Where the shim's reports go, and how they name call sites. One sink for
// the statistics (PARKLOT_STATS), the diagnostic reports (PARKLOT_DEADLOCK,
// to PARKLOT_REPORT) and the contention profiles (PARKLOT_PROFILE,
// preload/diag/profile.h): reports never go through stdio
// (no FILE lock, no buffer the program's output shares) and never change
// what the program itself prints, when sent to a file.
#ifndef PARKLOT_PRELOAD_DIAG_REPORT_H_
#define PARKLOT_PRELOAD_DIAG_REPORT_H_

#include <cstddef>
#include <string_view>

#include "runtime/config.h"

namespace parklot::internal::preload {

enum class Sink { kStats, kReport, kProfile };

// Fixes the sinks from `config` (stats_path, report_path, profile_path):
// copies the path
// templates. Records the pid: later processes are fork children. Call
// once, from the shim's constructor, before any report. Not thread-safe.
//
// Descriptors (docs/design.md section 6, invariants 8 and 9): the shim holds
// none between reports. A report without a path goes to descriptor 2 as it is
// when the report is written, the program's stderr, as glibc's own messages do;
// a program that closed its stderr before exit (coreutils' close_stdout) loses
// the report, which a path keeps. A copy of stderr taken at start-up would be a
// descriptor the program can see, and one it may close and reuse for its own
// data.
void InitReportSinks(const Config& config);

// Writes `text` to `sink` with write(2), all of it unless an error stops
// it: to its file if a path was given ("%p" replaced by the calling
// process's pid, "%%" by "%"), else to descriptor 2. The file is opened for
// appending per report and closed again, with O_NOFOLLOW (a symbolic link
// as its last component is refused), O_CLOEXEC and O_NOCTTY, created with
// mode 0600 (private to the user, whatever the umask allows), and used only
// if it is a regular file. A report that cannot be written (path longer
// than PATH_MAX, open fails, not a regular file) is replaced by one line on
// stderr saying which report, where, and why (errno's name). Writes nothing
// in secure mode (SecureMode()). errno is left as it was.
// Async-signal-safe; no allocation; any thread.
void WriteReport(Sink sink, std::string_view text);

// A report too large to format in memory first (a contention profile),
// written in pieces into `sink`'s file, its path with `suffix` appended
// after the "%p" expansion: by the same rules as WriteReport's files
// (O_NOFOLLOW, O_CLOEXEC, O_NOCTTY, mode 0600 when created, a regular file
// only, one line on stderr when it cannot be written, nothing in secure
// mode), except that the file is truncated, not appended to: a file holds
// one profile, since two (two processes' address spaces) cannot be read as
// one. A sink without a path writes nothing (a profile is never sent to
// stderr). Buffered on the object (no allocation); errno is left as it
// was. Async-signal-safe. One thread at a time per object.
class ReportFile {
 public:
  ReportFile(Sink sink, const char* suffix);
  ~ReportFile();
  ReportFile(const ReportFile&) = delete;
  ReportFile& operator=(const ReportFile&) = delete;

  // Whether the file is open (false: nothing will be written).
  bool ok() const { return fd_ >= 0; }
  void Append(const char* data, size_t size);
  void Append(const char* text);  // NUL-terminated
  // `n` in decimal, or in hex with a "0x" prefix.
  void AppendDecimal(unsigned long long n);
  void AppendHex(unsigned long long n);
  // Appends the whole of the file at `path` (such as /proc/self/maps, read
  // in pieces as it is now); false if it could not be opened.
  bool AppendFileContents(const char* path);

 private:
  void Flush();

  int fd_ = -1;
  size_t used_ = 0;
  char buf_[4096];
};

// Whether a process leaving by _exit() reports to `sink`: the process the
// shim started in does; a fork child only where the path has "%p" (it
// asked for a file of its own). Async-signal-safe.
bool ReportsAtUnderscoreExit(Sink sink);

// The executable's full path (readlink of /proc/self/exe by
// InitReportSinks; "" if it failed). Async-signal-safe.
const char* ExecutablePath();

// Writes into `buf` (NUL-terminated, cut to `size`) a readable name for the
// call site whose return address is `pc`: "FILE:LINE FUNCTION
// (MODULE+0xADDR)" where the module has DWARF line information, else
// "FUNCTION+0xOFF (MODULE+0xADDR)" where its symbol table (.symtab or
// .dynsym) names it, else "MODULE+0xADDR"; "?" for null. MODULE+0xADDR is
// the call instruction's address as `addr2line -e MODULE 0xADDR` reads it
// (an offset into a position-independent object, the address itself in a
// fixed-address executable), so that stripped binaries with separate debug
// info resolve too. FILE:LINE and FUNCTION come from the diagnostics
// object (diag.h: elfutils' libdwfl for lines, Abseil's symbolizer for
// functions; loaded under PARKLOT_STATS, PARKLOT_DEADLOCK or
// PARKLOT_PROFILE), else only MODULE+0xADDR is given. Reads ELF files: only
// when a report is written, which for a lock-order cycle or a deadlock is
// on that lock's path (DeadlockBeforeLock, DeadlockCheckWait). The line
// look-up allocates (libdwfl); the rest does not. Any thread.
void DescribeCallSite(const void* pc, char* buf, size_t size);

// Writes into `buf` the name of the lock at `lock`: its symbol where it
// lies in static storage of a loaded object ("hot_lock", "table+0x40"), as
// gdb's `info symbol` names it, else its address ("0x55d0c0a01040"). The
// symbol comes from the diagnostics object (absent: the address). Returns
// whether a symbol named it.
bool DescribeLock(uintptr_t lock, char* buf, size_t size);

}  // namespace parklot::internal::preload

#endif  // PARKLOT_PRELOAD_DIAG_REPORT_H_
