#!/usr/bin/env bash
# No layer includes a higher one (docs/design.md section 1). The layers,
# lowest first: base/, hash/, runtime/, sync/ (with include/parklot/, its
# public face), preload/. Every quoted #include of a layer's file that
# names another layer's folder must name a layer at or below its own.
#
#   layers_test.sh README.md   (README.md as Bazel data: the test finds the
#                               source tree from it)
set -uo pipefail
repo=$(dirname "$(readlink -f "$1")")
layers=(base hash runtime sync preload)
rank() {
  local i
  for i in "${!layers[@]}"; do [ "${layers[$i]}" = "$1" ] && { echo "$i"; return; }; done
  echo -1
}
status=0
checked=0
for dir in base hash runtime sync include/parklot preload; do
  [ -d "$repo/$dir" ] || continue
  own=$(rank "${dir%%/*}")
  [ "$dir" = include/parklot ] && own=$(rank sync)
  while IFS= read -r hit; do
    file=${hit%%:*}
    rest=${hit#*:}
    line=${rest%%:*}
    target=$(sed -E 's/^[^"]*"([^"]*)".*/\1/' <<<"${rest#*:}")
    r=$(rank "${target%%/*}")
    checked=$((checked + 1))
    if [ "$r" -gt "$own" ]; then
      echo "FAIL: ${file#"$repo"/}:$line includes $target, a layer above ${dir%%/*}/"
      status=1
    fi
  done < <(grep -rn '^#include "' "$repo/$dir" --include='*.h' --include='*.cc')
done
[ "$checked" -gt 100 ] || { echo "FAIL: only $checked includes checked"; status=1; }
echo "$checked includes checked"
[ "$status" -eq 0 ] && echo PASS
exit "$status"
