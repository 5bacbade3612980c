#!/usr/bin/env bash
# Every reference in the repository's code, build files and documents
# resolves inside it: no file cites a document the repository does not hold
# (the team's brief, kept elsewhere) or an issue tracker's numbers, and every
# "docs/design.md section N" or "§N" names a heading docs/design.md has.
#
#   references_test.sh README.md   (README.md as Bazel data: the test finds
#                                   the source tree from it)
set -uo pipefail
repo=$(dirname "$(readlink -f "$1")")
[ -f "$repo/docs/design.md" ] || { echo "FAIL: no docs/design.md in $repo"; exit 1; }
status=0
fail() { echo "FAIL: $*"; status=1; }

# The repository's own text files: everything but Bazel's output links,
# git's store and vendored third-party rules.
files() {
  find "$repo" \( -name '.git' -o -name 'bazel-*' -o -path "$repo/third_party" \) -prune \
    -o -type f \( -name '*.h' -o -name '*.cc' -o -name '*.c' -o -name '*.sh' \
    -o -name '*.py' -o -name '*.md' -o -name 'BUILD' -o -name '*.bzl' \
    -o -name '*.lds' -o -name '*.in' -o -name 'WORKSPACE' -o -path "$repo/tools/*" \) \
    -print0
}

mapfile -d '' all < <(files)
[ "${#all[@]}" -gt 50 ] || fail "only ${#all[@]} files found under $repo"

# The brief outside the repository, and tracker numbers. A URL to another
# project's tracker (".../issues/611") is a citation a reader can follow.
if grep -nE 'DESIGN\.md|[Ii]ssues? #?[0-9]' "${all[@]}"; then
  fail "references outside the repository (lines above)"
fi

# The sections docs/design.md has: "## 6. Title" and "### 3.3.1 Title".
declare -A have
while read -r n; do have[$n]=1; done < <(
  grep -oE '^#{2,4} [0-9]+(\.[0-9]+)*' "$repo/docs/design.md" | grep -oE '[0-9.]+$' | sed 's/\.$//')
checked=0
while IFS=: read -r file line ref; do
  n=$(grep -oE '[0-9]+(\.[0-9]+)*$' <<<"$ref")
  checked=$((checked + 1))
  [ -n "${have[$n]:-}" ] || fail "${file#"$repo"/}:$line cites section $n, which docs/design.md does not have"
done < <(grep -noE '(design\.md,? +[Ss]ections? +|§)[0-9]+(\.[0-9]+)*' "${all[@]}")
[ "$checked" -gt 20 ] || fail "only $checked section citations found"

echo "$checked section citations checked in ${#all[@]} files"
[ "$status" -eq 0 ] && echo PASS
exit "$status"
