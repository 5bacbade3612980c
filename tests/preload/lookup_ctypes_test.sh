#!/usr/bin/env bash
# Python's ctypes resolves through a handle (dlopen, then dlsym): the
# functions it finds in libc.so.6 and libpthread.so.0 must be those the
# program's calls reach (docs/design.md §5.17), under the shim as against
# plain glibc. Then two Python threads take one mutex, one through libc's
# handle and one through the process's global scope (ctypes.CDLL(None)):
# mutual exclusion (a lost update is a failure), no hang.
#   lookup_ctypes_test.sh
set -uo pipefail
root="${TEST_SRCDIR:+$TEST_SRCDIR/${TEST_WORKSPACE:-parklot}}"
root="${root:-$PWD}"
shim="$root/preload/libparklot_preload.so"
py=/usr/bin/python3
[ -x "$py" ] || { echo "SKIP: no $py (Debian's python3 package)"; exit 0; }
source "$root/tests/preload/shim_preload.sh" || exit 1
shim_preload "$shim" || exit 1
script=$(cat <<'PY'
import ctypes, sys, threading
glob = ctypes.CDLL(None)              # the global scope: what direct calls reach
shim = hasattr(glob, "parklot_preload_active")
want_shim = sys.argv[1] == "shim"
if shim != want_shim:
    sys.exit("FAIL: the shim is %s" % ("loaded" if shim else "absent"))
addr = lambda f: ctypes.cast(f, ctypes.c_void_p).value
bad = 0
for soname in ("libc.so.6", "libpthread.so.0"):
    lib = ctypes.CDLL(soname)
    for name in ("pthread_mutex_lock", "pthread_mutex_unlock", "pthread_mutex_trylock",
                 "pthread_cond_wait", "pthread_cond_signal", "pthread_rwlock_wrlock",
                 "sem_post", "sem_wait", "pthread_once", "mtx_lock"):
        if addr(getattr(lib, name)) != addr(getattr(glob, name)):
            print("FAIL: %s's %s is not the function the program's calls reach" % (soname, name))
            bad += 1
    if addr(lib.getpid) != addr(glob.getpid):
        print("FAIL: %s's getpid differs" % soname); bad += 1
libc = ctypes.CDLL("libc.so.6")
mu = ctypes.create_string_buffer(64)  # zeroed: PTHREAD_MUTEX_INITIALIZER
count = [0]
def worker(lock, unlock):
    for _ in range(20000):
        lock(mu)
        c = count[0]
        unlock(mu)
        lock(mu)
        count[0] = c + 1
        unlock(mu)
# The GIL serializes bytecode; the lock calls release it (ctypes), so the
# threads contend on the mutex itself.
ts = [threading.Thread(target=worker, args=(libc.pthread_mutex_lock, libc.pthread_mutex_unlock)),
      threading.Thread(target=worker, args=(glob.pthread_mutex_lock, glob.pthread_mutex_unlock))]
for t in ts: t.start()
for t in ts: t.join()
if libc.pthread_mutex_trylock(mu) != 0 or glob.pthread_mutex_trylock(mu) == 0:
    print("FAIL: a lock taken through libc's handle is not held for the global trylock"); bad += 1
glob.pthread_mutex_unlock(mu)
print("lookups and the mutex: %s" % ("ok" if bad == 0 else "FAILED"))
sys.exit(1 if bad else 0)
PY
)
status=0
echo "=== plain glibc"
env -u LD_PRELOAD timeout -k 5 40 "$py" -c "$script" glibc || { echo "FAIL: plain glibc"; status=1; }
echo "=== under the shim"
LD_PRELOAD="$PRELOAD" timeout -k 5 40 "$py" -c "$script" shim || { echo "FAIL: under the shim"; status=1; }
exit $status
