#!/usr/bin/env bash
# The layers of detail/h2expr/detail/ include only downward (README, "How the code is laid out"):
#   core < primitives < operands < structure < h2 < randomized < expressions < operations < distributed
# and nothing there includes a public header (include/h2expr/*.hpp: the facades on top). Within a layer,
# the host/ and cuda/ backends do not include each other directly (a CUDA file may include the
# primitives' interface, batched.hpp, which reaches both). Exits 1 and names every upward include.
set -euo pipefail
cd "$(dirname "$0")/.."
layers=(core primitives operands structure h2 randomized expressions operations distributed)
rank() { local i; for i in "${!layers[@]}"; do [ "${layers[$i]}" = "$1" ] && { echo "$i"; return; }; done; echo -1; }
bad=0
while IFS= read -r file; do
  rel=${file#detail/h2expr/detail/}
  layer=${rel%%/*}
  own=$(rank "$layer")
  if [ "$own" -lt 0 ] || [ "$layer" = "$rel" ]; then
    echo "$file: not in a layer folder (${layers[*]})"; bad=1; continue
  fi
  while IFS=: read -r line target; do
    case "$target" in
      h2expr/detail/*)
        to=${target#h2expr/detail/}
        to_layer=${to%%/*}
        if [ ! -f "detail/$target" ] || [ "$(rank "$to_layer")" -lt 0 ]; then
          echo "$file:$line: includes <$target>, which is not a header of a layer"; bad=1
        elif [ "$(rank "$to_layer")" -gt "$own" ]; then
          echo "$file:$line: includes <$target>, a layer above $layer"; bad=1
        fi
        if { [[ $rel == */host/* ]] && [[ $to == */cuda/* ]]; } || { [[ $rel == */cuda/* ]] && [[ $to == */host/* ]]; }; then
          echo "$file:$line: includes <$target>, the other backend"; bad=1
        fi ;;
      h2expr/*) echo "$file:$line: includes the public header <$target>"; bad=1 ;;
    esac
  done < <(grep -no '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]h2expr/[^>"]*' "$file" | sed -E 's/:[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]/:/')
done < <(find detail/h2expr/detail -type f | sort)
[ "$bad" = 0 ] && echo "layers: every include in detail/ points down"
exit "$bad"
