// Where the shim's reports go, and how they name call sites. One sink for
// the statistics (PARKLOT_STATS) and the diagnostic reports
// (PARKLOT_DEADLOCK, to PARKLOT_REPORT): reports never go through stdio
// (no FILE lock, no buffer the program's output shares) and never change
// what the program itself prints, when sent to a file.
#ifndef PARKLOT_PRELOAD_REPORT_H_
#define PARKLOT_PRELOAD_REPORT_H_

#include <cstddef>

#include "absl/strings/string_view.h"
#include "runtime/config.h"

namespace parklot::preload {

enum class Sink { kStats, kReport };

// Fixes the sinks from `config` (stats_path, report_path): copies the path
// templates, and duplicates stderr (close-on-exec, fd >= 100) for the
// sinks that have none, so that a program that closes stderr before exit
// (coreutils' close_stdout does) still gets its report. Records the pid:
// later processes are fork children. Call once, from the shim's
// constructor, before any report. Not thread-safe.
void InitReportSinks(const Config& config);

// Writes `text` to `sink` with write(2), all of it unless an error stops
// it: to its file if a path was given ("%p" replaced by the calling
// process's pid, "%%" by "%"; opened for appending, created 0666 minus the
// umask, closed again), else to the stderr duplicate. A file that cannot
// be opened loses the report. Async-signal-safe; no allocation; any
// thread.
void WriteReport(Sink sink, absl::string_view text);

// Whether a process leaving by _exit() reports to `sink`: the process the
// shim started in does; a fork child only where the path has "%p" (it
// asked for a file of its own). Async-signal-safe.
bool ReportsAtUnderscoreExit(Sink sink);

// Writes into `buf` (NUL-terminated, cut to `size`) a readable name for the
// call site whose return address is `pc`: "FUNCTION+0xOFF (MODULE+0xADDR)"
// where the module's symbol table (.symtab or .dynsym) names it, else
// "MODULE+0xADDR"; "?" for null. MODULE+0xADDR is the call instruction's
// address as `addr2line -e MODULE 0xADDR` reads it (an offset into a
// position-independent object, the address itself in a fixed-address
// executable), so that stripped binaries with separate debug info resolve
// too. Reads ELF files (Abseil's symbolizer, its own mmap arena): only when
// a report is written, which for a lock-order cycle or a deadlock is on
// that lock's path (DeadlockBeforeLock, DeadlockCheckWait). No malloc. Any
// thread.
void DescribeCallSite(const void* pc, char* buf, size_t size);

}  // namespace parklot::preload

#endif  // PARKLOT_PRELOAD_REPORT_H_
