#!/usr/bin/env bash
# `parklot run` with --stats, --deadlock or --profile stays the program's
# parent and prints what every process of it reported (tests/tools/BUILD).
#   run_reports_test.sh TREE_TAR
set -uo pipefail
tree_tar=$1
work="${TEST_TMPDIR:-$(mktemp -d)}/run_reports"
rm -rf "$work" && mkdir -p "$work/tree" "$work/tmp"
tar -xf "$tree_tar" -C "$work/tree" || { echo "FAIL: unpack $tree_tar"; exit 1; }
launcher="$work/tree/bin/parklot"
# The launcher's private directories go here: none may be left behind.
export TMPDIR="$work/tmp"

# closer CODE [fork|contend]: locks a mutex (so the shim has something to
# report), with "fork" lets a child lock it too and exit, with "contend"
# makes a thread wait for it 20 times; closes its stderr as sort and xz do,
# and exits with CODE.
cat > "$work/closer.c" <<'C'
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static atomic_int started;
static void* waiter(void* arg) {
  atomic_store(&started, 1);
  pthread_mutex_lock(&m);
  pthread_mutex_unlock(&m);
  return arg;
}
int main(int argc, char** argv) {
  pthread_mutex_lock(&m);
  pthread_mutex_unlock(&m);
  if (argc > 2 && strcmp(argv[2], "fork") == 0) {
    pid_t p = fork();
    if (p == 0) {
      pthread_mutex_lock(&m);
      pthread_mutex_unlock(&m);
      close(2);
      exit(0);
    }
    waitpid(p, NULL, 0);
  }
  for (int i = 0; argc > 2 && strcmp(argv[2], "contend") == 0 && i < 20; ++i) {
    pthread_t t;
    atomic_store(&started, 0);
    pthread_mutex_lock(&m);
    pthread_create(&t, NULL, waiter, NULL);
    while (!atomic_load(&started)) usleep(1000);
    usleep(20000);
    pthread_mutex_unlock(&m);
    pthread_join(t, NULL);
  }
  close(2);
  return atoi(argv[1]);
}
C
gcc -pthread "$work/closer.c" -o "$work/closer" || { echo "FAIL: gcc"; exit 1; }

status=0
fail() { echo "FAIL: $*"; status=1; }

echo "== a program that closes its stderr: the launcher prints its report"
timeout 30 "$launcher" run --stats -- "$work/closer" 0 2>"$work/err"
rc=$?
n=$(grep -c '^parklot statistics (pid [0-9]*)$' "$work/err")
if [ "$rc" -ne 0 ] || [ "$n" -ne 1 ] || ! grep -q '^served by parklot: [1-9][0-9]* mutex acquisitions' "$work/err"; then
  fail "rc $rc (want 0), $n reports (want 1):"; cat "$work/err"
else
  echo "ok: one report, rc 0"
fi

echo "== fork children's reports too; the exit status comes through"
timeout 30 "$launcher" run --stats "$work/closer" 7 fork 2>"$work/err"
rc=$?
pids=$(sed -n 's/^parklot statistics (pid \([0-9]*\))$/\1/p' "$work/err" | sort -u | wc -l)
if [ "$rc" -ne 7 ] || [ "$pids" -ne 2 ]; then
  fail "rc $rc (want 7), reports from $pids processes (want 2):"; cat "$work/err"
else
  echo "ok: reports of parent and child, rc 7"
fi

echo "== --deadlock: a run with nothing to report says so in one line"
timeout 30 "$launcher" run --deadlock -- /bin/true 2>"$work/err"
rc=$?
if [ "$rc" -ne 0 ] || [ "$(cat "$work/err")" != "parklot: /bin/true: no lock-order cycle" ]; then
  fail "/bin/true under --deadlock: rc $rc, stderr:"; cat "$work/err"
else
  echo "ok: nothing to report, one line says so"
fi

echo "== --profile: the profile lands where asked, and is named"
mkdir -p "$work/prof"
(cd "$work" && timeout 30 "$launcher" run --profile=prof/p.%p.prof --profile-rate=1 "$work/closer" 0 contend 2>"$work/err")
rc=$?
prof=$(ls "$work/prof" | grep -v holders | head -1)
if [ "$rc" -ne 0 ] || [ -z "$prof" ] || ! head -1 "$work/prof/$prof" | grep -q '^--- contention' ||
   ! grep -qx 'sampling period=1' "$work/prof/$prof" || [ ! -s "$work/prof/$prof.holders" ] ||
   ! grep -q "^parklot: contention profile of pid [0-9]*: prof/$prof" "$work/err"; then
  fail "--profile: rc $rc, files '$(ls "$work/prof")', stderr:"; cat "$work/err"
else
  echo "ok: prof/$prof written and named"
fi

echo "== SIGTERM to the launcher reaches the program; the launcher exits 143"
"$launcher" run --stats -- sleep 20 2>"$work/err" &
lpid=$!
# The launcher forks the program: wait until sleep runs under it.
child=""
for _ in $(seq 100); do
  child=$(ps -o pid= --ppid "$lpid" 2>/dev/null | tr -d ' ' | head -1)
  [ -n "$child" ] && [ "$(ps -o comm= -p "$child" 2>/dev/null)" = sleep ] && break
  child=""
  sleep 0.1
done
[ -n "$child" ] || fail "no sleep under the launcher (pid $lpid)"
kill -TERM "$lpid"
wait "$lpid"
rc=$?
if [ "$rc" -ne 143 ]; then
  fail "launcher exited $rc after SIGTERM (want 143)"; cat "$work/err"
elif [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
  fail "the program (pid $child) still runs"; kill -KILL "$child"
else
  echo "ok: 143, the program is gone"
fi

echo "== no private directory left behind"
left=$(ls -A "$work/tmp")
[ -z "$left" ] && echo "ok: none" || fail "left in TMPDIR: $left"

echo "== a plain LD_PRELOAD keeps writing to the program's stderr (closed: nothing)"
out=$(PARKLOT_STATS=1 LD_PRELOAD="$work/tree/lib/libparklot_preload.so" "$work/closer" 0 2>&1)
[ -z "$out" ] && echo "ok: nothing" || fail "plain LD_PRELOAD printed: $out"

exit $status
