#!/usr/bin/env bash
# The documents a user reads (README.md, CHANGELOG.md, docs/): every
# relative link resolves to a file or folder inside the repository (anchors
# and web links are not followed), and no document names a path outside it
# (another checkout's shared folder, one machine's home or work folders).
#
#   links_test.sh DOC...   (the documents, as Bazel data)
set -uo pipefail
# The data files are links into the source tree: its root is the real
# README's folder.
repo=$(dirname "$(readlink -f "$1")")
status=0
fail() { echo "FAIL: $*"; status=1; }
checked=0
for doc in "$@"; do
  real=$(readlink -f "$doc")
  rel=${real#"$repo"/}
  dir=$(dirname "$real")
  # Inline links [text](target) and reference links [x]: target.
  while IFS= read -r target; do
    target=${target%%#*}
    target=${target%% *}
    [ -n "$target" ] || continue
    case "$target" in
      http://*|https://*|mailto:*) continue ;;
    esac
    checked=$((checked + 1))
    resolved=$(realpath -m "$dir/$target")
    case "$resolved" in
      "$repo"|"$repo"/*) ;;
      *) fail "$rel links outside the repository: $target"; continue ;;
    esac
    [ -e "$resolved" ] || fail "$rel: broken link $target"
  done < <(grep -oE '\]\([^)]+\)' "$real" | sed -E 's/^\]\((.*)\)$/\1/';
           grep -oE '^\[[^]]+\]: +[^ ]+' "$real" | sed -E 's/^\[[^]]+\]: +//')
  if grep -nE '\.\./shared/|/work/|/root/|/home/[a-z]' "$real"; then
    fail "$rel names a path outside the repository (lines above)"
  fi
done
echo "$checked links checked in $# documents"
[ "$status" -eq 0 ] && echo PASS
exit "$status"
