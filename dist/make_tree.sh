#!/usr/bin/env bash
# Assembles the install tree (relative to the prefix) into a tar, for
# dist:tree (dist/defs.bzl). tools/install unpacks it and fills in @PREFIX@.
#
# usage: make_tree.sh OUT.tar MANIFEST README.md VERSION-FILE SOVERSION \
#          ABSL_PUBLIC ABSL_PRIVATE
# MANIFEST: one "SRC<tab>DEST<tab>MODE" line per file. DEST include/...:
#   our quoted includes ("sync/", "runtime/", "hash/") become
#   "parklot/sync/", ...: the installed headers' only include path is
#   PREFIX/include, as with Abseil's ("absl/...") and jemalloc's. DEST *.in:
#   a template, @VERSION@ and the like substituted, ".in" dropped.
# ABSL_*: space-separated Abseil pkg-config module names (absl_time ...);
#   the CMake targets are the same names as absl::time ...
set -euo pipefail
out=$1 manifest=$2 readme=$3 version_file=$4 soversion=$5 absl_public=$6 absl_private=$7
version=$(tr -d ' \n' <"$version_file")
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[a-z0-9.]+)?$ ]] || { echo "make_tree.sh: bad version '$version' in $version_file" >&2; exit 1; }

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT

cmake_targets() { local m r=(); for m in $1; do r+=("absl::${m#absl_}"); done; (IFS=';'; echo "${r[*]}"); }

# The README's knobs table as man(7) paragraphs: one .TP per variable.
knobs_man() {
  awk -F'|' '
    /^## / { inside = ($0 == "## Knobs"); next }
    !inside || !/^\|/ || /^\|---/ { next }
    !seen++ { next }  # the header row
    {
      for (i = 2; i <= 4; i++) {
        c = $i; gsub(/^ +| +$/, "", c)
        # A Markdown link [text](#anchor) to a README section names the
        # man page section of that name (DIAGNOSTICS below); others read as
        # their text.
        while (match(c, /\[[^]]*\]\([^)]*\)/)) {
          t = substr(c, RSTART, RLENGTH); a = t
          sub(/\]\(.*$/, "", t); t = substr(t, 2)
          if (a ~ /\]\(#/) t = toupper(t) " below"
          c = substr(c, 1, RSTART - 1) t substr(c, RSTART + RLENGTH)
        }
        gsub(/-/, "\\-", c)
        while (match(c, /`[^`]*`/)) {
          c = substr(c, 1, RSTART - 1) "\\fB" substr(c, RSTART + 1, RLENGTH - 2) "\\fR" substr(c, RSTART + RLENGTH)
        }
        cell[i] = c
      }
      printf ".TP\n%s\n%s.\nDefault: %s.\n", cell[2], cell[3], cell[4]
    }' "$readme"
}

knobs="$(knobs_man)"
[ -n "$knobs" ] || { echo "make_tree.sh: no knobs table in $readme" >&2; exit 1; }

substitute() {
  local k="$stage/.knobs"
  printf '%s\n' "$knobs" >"$k"
  # CMake compares numeric versions: 0.3.0-dev is 0.3.0 there.
  sed -e "s|@VERSION@|$version|g" -e "s|@VERSION_MAJOR@|${version%%.*}|g" \
      -e "s|@VERSION_NUMERIC@|${version%%-*}|g" \
      -e "s|@SOVERSION@|$soversion|g" \
      -e "s|@ABSL_PUBLIC@|$absl_public|g" -e "s|@ABSL_PRIVATE@|$absl_private|g" \
      -e "s|@ABSL_PUBLIC_CMAKE@|$(cmake_targets "$absl_public")|g" \
      -e "s|@ABSL_PRIVATE_CMAKE@|$(cmake_targets "$absl_private")|g" \
      -e "/@KNOBS@/{r $k" -e 'd}' "$1"
}

while IFS=$'\t' read -r src dest mode; do
  case "$dest" in *.in) dest="${dest%.in}" ;; esac
  mkdir -p "$stage/$(dirname "$dest")"
  case "$dest" in
    include/*) sed -E 's@^(#include ")(sync|runtime|hash)/@\1parklot/\2/@' "$src" >"$stage/$dest" ;;
    *) if [[ "$src" == *.in ]]; then substitute "$src" >"$stage/$dest"; else cp "$src" "$stage/$dest"; fi ;;
  esac
  chmod "$mode" "$stage/$dest"
done <"$manifest"
rm -f "$stage/.knobs"
# What `parklot --version` prints when installed.
echo "$version" >"$stage/lib/parklot/version"
chmod 0644 "$stage/lib/parklot/version"
ln -s "libparklot.so.$soversion" "$stage/lib/libparklot.so"

# Only the top folders, not ".": unpacking must not change the prefix's mode.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$out" -C "$stage" bin include lib share
