#!/usr/bin/env bash
# Where reports go (preload/diag/report.h; docs/design.md section 6,
# invariants 8 and 9), as a program and its user meet it:
# - descriptors: the shim holds none the program can see, and a daemon
#   that closes every descriptor from 3 up and reuses one for its data
#   never gets a report in its data file;
# - report files: a symbolic link, a FIFO, a directory, a missing directory
#   or a path longer than PATH_MAX is refused with one line on stderr (the
#   report is not sent to stderr instead, nor lost without a word); a file
#   is created private (0600) even under umask 000.
#
#   report_files_test.sh SHIM DAEMON_PROG
set -uo pipefail
root=$PWD
source "$root/tests/preload/shim_preload.sh"
shim_test_begin "$1" "$2" report_files
daemon=$prog
umask 000

# run NAME VAR=VALUE...: the daemon under the shim, data file $work/NAME.data.
run() {
  local name=$1
  shift
  timeout -k 5 60 env LD_PRELOAD="$PRELOAD" "$@" "$daemon" "$work/$name.data" \
    >"$work/$name.out" 2>"$work/$name.err"
  local rc=$?
  [ "$rc" -eq 0 ] || fail "$name: rc $rc: $(head -c 400 "$work/$name.err")"
  [ "$(cat "$work/$name.data")" = "the daemon's data" ] ||
    fail "$name: the daemon's data file holds: $(head -c 200 "$work/$name.data")"
}

# Descriptors: stderr reports go to the program's stderr.
run stats PARKLOT_STATS=1
grep -q 'parklot statistics' "$work/stats.err" || fail "stats: no report on stderr"
run deadlock PARKLOT_DEADLOCK=report
grep -q 'lock-order' "$work/deadlock.err" || fail "deadlock: no lock-order report on stderr"

# refused NAME PATH WHY: PARKLOT_STATS=PATH writes one line naming PATH's
# problem (WHY, a pattern) and nothing else.
refused() {
  local name=$1 path=$2 why=$3
  run "$name" PARKLOT_STATS="$path"
  local lines
  lines=$(wc -l <"$work/$name.err")
  grep -q "^parklot: statistics report (PARKLOT_STATS) not written to .*$why" "$work/$name.err" ||
    fail "$name: no line saying why: $(head -c 300 "$work/$name.err")"
  [ "$lines" -eq 1 ] || fail "$name: $lines lines on stderr, want 1"
}
echo original >"$work/target"
ln -s "$work/target" "$work/link"
refused symlink "$work/link" 'ELOOP'
[ "$(cat "$work/target")" = original ] || fail "symlink: the link's target was written"
mkfifo "$work/fifo"
refused fifo "$work/fifo" 'not a regular file'
# A FIFO with a reader is refused before it is opened (an open would have
# succeeded, and only the fstat refused it; on a device node the open
# itself can act): the reader never sees a writer come and go, so it is
# still waiting afterwards.
mkfifo "$work/fifo_read"
timeout 20 cat "$work/fifo_read" >"$work/fifo_read.out" &
reader=$!
sleep 0.2
refused fifo_with_reader "$work/fifo_read" 'not a regular file'
sleep 0.2
kill -0 "$reader" 2>/dev/null || fail "fifo_with_reader: the shim opened the FIFO (its reader saw end of file)"
kill "$reader" 2>/dev/null
wait "$reader" 2>/dev/null
refused device /dev/null 'not a regular file'
mkdir "$work/dir"
refused directory "$work/dir" 'EISDIR'
refused missing "$work/missing/stats" 'ENOENT'
long="$work/$(printf 'x%.0s' $(seq 1 5000))"
refused too_long "$long" 'longer than PATH_MAX'
refused too_long_report "$long" 'longer than PATH_MAX'

# A report file is created 0600 under umask 000, and holds the report.
run file PARKLOT_STATS="$work/stats.%p"
files=("$work"/stats.[0-9]*)
[ -f "${files[0]}" ] || fail "file: no report file"
mode=$(stat -c %a "${files[0]}" 2>/dev/null)
[ "$mode" = 600 ] || fail "file: report file mode $mode, want 600"
grep -q 'parklot statistics' "${files[0]}" || fail "file: no report in the file"
[ -s "$work/file.err" ] && fail "file: wrote to stderr: $(head -c 300 "$work/file.err")"

[ "$status" -eq 0 ] && echo PASS
exit "$status"
