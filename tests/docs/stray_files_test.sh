#!/usr/bin/env bash
# The repository holds no leftovers of a merge or a patch (*.orig, *.rej):
# where the tree is a git checkout, none is tracked; in any tree, none lies
# in it outside Bazel's output links.
#
#   stray_files_test.sh README.md   (README.md as Bazel data: the test finds
#                                    the source tree from it)
set -uo pipefail
repo=$(dirname "$(readlink -f "$1")")
[ -f "$repo/WORKSPACE" ] || { echo "FAIL: no WORKSPACE in $repo"; exit 1; }
status=0
if command -v git >/dev/null && git -C "$repo" rev-parse --git-dir >/dev/null 2>&1; then
  tracked=$(git -C "$repo" ls-files -- '*.orig' '*.rej')
  [ -z "$tracked" ] || { echo "FAIL: tracked leftovers:"; echo "$tracked"; status=1; }
fi
found=$(find "$repo" \( -name '.git' -o -name 'bazel-*' \) -prune -o -type f \
  \( -name '*.orig' -o -name '*.rej' \) -print)
[ -z "$found" ] || { echo "FAIL: leftovers in the tree:"; echo "$found"; status=1; }
((status)) || echo "no *.orig or *.rej in $repo"
exit "$status"
