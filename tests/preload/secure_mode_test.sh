#!/usr/bin/env bash
# Secure mode (docs/design.md section 6, invariant 8), tried as an attacker
# would: the shim named in /etc/ld.so.preload, a setuid-root program run by an
# unprivileged user whose environment asks for reports in a root-only directory,
# through a symbolic link to a root-only file, and for knobs. In secure mode the
# shim must read no PARKLOT_* variable and write nothing anywhere.
#
# The machine stays untouched: everything happens in a private mount
# namespace (unshare -m) on a tmpfs, with a copy of /etc bind-mounted over
# /etc. Needs root (to make a setuid-root program and the namespace); as
# another user the test says so and passes without running.
#
#   secure_mode_test.sh SHIM PROG
set -uo pipefail

if [ "${1:-}" != --inside ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: needs root (a setuid-root program, a mount namespace)"
    exit 0
  fi
  shim=$(readlink -f "$1") prog=$(readlink -f "$2")
  exec unshare --mount --propagation private bash "$0" --inside "$shim" "$prog"
fi
shim=$2 prog=$3
status=0
fail() { echo "FAIL: $*"; status=1; }

top=$(mktemp -d /tmp/parklot-secure.XXXXXX)
trap 'umount -l /etc 2>/dev/null; umount -l "$top" 2>/dev/null; rmdir "$top"' EXIT
mount -t tmpfs -o mode=0755 parklot-secure "$top" || { echo "FAIL: tmpfs"; exit 1; }
mkdir -m 0755 "$top/lib" "$top/bin"
install -m 0755 "$shim" "$top/lib/libparklot_preload.so"
install -m 4755 -o root "$prog" "$top/bin/setuid_prog"
install -m 0755 -o nobody "$prog" "$top/bin/plain_prog"
cp -a /etc "$top/etc"
echo "$top/lib/libparklot_preload.so" >"$top/etc/ld.so.preload"
mount --bind "$top/etc" /etc || { echo "FAIL: bind-mount /etc"; exit 1; }
# A root-only directory with a root-only file, and the attacker's home.
mkdir -m 0700 "$top/rootonly"
echo secret >"$top/rootonly/secret"
chmod 0600 "$top/rootonly/secret"
mkdir -m 0755 "$top/home"
chown nobody:nogroup "$top/home"

as_nobody() {
  setpriv --reuid=65534 --regid=65534 --clear-groups -- \
    env -i PATH=/usr/bin:/bin "$@"
}
as_nobody ln -s "$top/rootonly/secret" "$top/home/link"
as_nobody ln -s "$top/rootonly/created" "$top/home/dangling"

# attack NAME PROGRAM VAR=VALUE...: runs PROGRAM as nobody under umask 000
# with the variables; its stdout and stderr go to $top/NAME.out, .err.
attack() {
  local name=$1 program=$2
  shift 2
  as_nobody sh -c 'umask 000; exec env "$@"' sh "$@" "$program" \
    >"$top/$name.out" 2>"$top/$name.err"
  echo "$name: rc $? $(head -c 300 "$top/$name.out")"
}
root_only_untouched() {
  [ "$(cat "$top/rootonly/secret")" = secret ] || fail "$1: the root-only file was written through the link"
  [ "$(ls "$top/rootonly")" = secret ] || fail "$1: root created $(ls "$top/rootonly" | tr '\n' ' ')in the root-only directory"
}
quiet() {
  [ ! -s "$top/$1.err" ] || fail "$1: wrote to stderr: $(head -c 300 "$top/$1.err")"
}

knobs=(PARKLOT_POLICY=fixed:1 PARKLOT_SPIN=off PARKLOT_DEADLOCK=report
       PARKLOT_SYSCALL_FUTEX=1 PARKLOT_PROFILE_RATE=1)
attack files "$top/bin/setuid_prog" "${knobs[@]}" \
  PARKLOT_STATS="$top/rootonly/stats" PARKLOT_REPORT="$top/home/link" \
  PARKLOT_PROFILE="$top/rootonly/profile"
grep -q '^shim=1 secure=1 ruid=65534 euid=0 ' "$top/files.out" ||
  fail "files: not a secure-mode process with the shim loaded"
grep -q 'policy=adaptive .*spin=adaptive' "$top/files.out" ||
  fail "files: a PARKLOT_* knob was honoured in secure mode"
grep -q 'syscall_futex\|deadlock=\|profile' "$top/files.out" &&
  fail "files: PARKLOT_SYSCALL_FUTEX, PARKLOT_DEADLOCK or PARKLOT_PROFILE honoured in secure mode"
quiet files
root_only_untouched files

attack links "$top/bin/setuid_prog" PARKLOT_STATS="$top/home/link" \
  PARKLOT_REPORT="$top/home/dangling" PARKLOT_DEADLOCK=report \
  PARKLOT_PROFILE="$top/home/link" PARKLOT_PROFILE_RATE=1
quiet links
root_only_untouched links

# Nothing on stderr either: not the report, not a line about a bad knob.
attack stderr "$top/bin/setuid_prog" PARKLOT_STATS=1 PARKLOT_DEADLOCK=report \
  PARKLOT_POLICY=bogus PARKLOT_BUCKETS=x
quiet stderr

# Real setuid-root programs of the system, under the same preload.
for cmd in /usr/bin/passwd /usr/bin/mount; do
  [ -u "$cmd" ] || continue
  name=$(basename "$cmd")
  arg=--version
  [ "$name" = passwd ] && arg=-S
  as_nobody sh -c 'umask 000; exec env "$@"' sh \
    PARKLOT_STATS="$top/rootonly/stats.$name" PARKLOT_REPORT="$top/home/link" \
    PARKLOT_DEADLOCK=report "$cmd" "$arg" >"$top/$name.out" 2>"$top/$name.err"
  echo "$name $arg: rc $?"
  grep -q parklot "$top/$name.err" && fail "$name: parklot wrote to its stderr"
  root_only_untouched "$name"
done

# The control: the same program without the setuid bit, same user, same
# preload. Outside secure mode the knobs hold and the report is written,
# so the checks above can fail; the file is created private (0600) even
# under umask 000.
attack control "$top/bin/plain_prog" PARKLOT_POLICY=fixed:1 \
  PARKLOT_STATS="$top/home/stats" PARKLOT_PROFILE="$top/home/profile" \
  PARKLOT_PROFILE_RATE=1
grep -q '^shim=1 secure=0 ruid=65534 euid=65534 .*policy=fixed:1' "$top/control.out" ||
  fail "control: the knobs were not honoured outside secure mode"
[ -s "$top/home/stats" ] || fail "control: no statistics report written"
mode=$(stat -c '%a %U' "$top/home/stats" 2>/dev/null)
[ "$mode" = "600 nobody" ] || fail "control: report file is '$mode', want '600 nobody'"
[ -s "$top/home/profile" ] || fail "control: no contention profile written"
mode=$(stat -c '%a %U' "$top/home/profile" 2>/dev/null)
[ "$mode" = "600 nobody" ] || fail "control: profile file is '$mode', want '600 nobody'"

[ "$status" -eq 0 ] && echo PASS
exit "$status"
