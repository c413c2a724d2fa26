#!/usr/bin/env bash
# Checks the include graph against the layers of docs/architecture.md. Each layer may
# include its own headers and those of the layers below it, never one above:
#
#   0 runtime/ (bridge-probe; only runtime/env_hash.h is shared with the launcher)
#   1 launcher/        model: diagnostics, YAML, recipe, topology, overlap, launch env, utilities
#   2 plugins/         plugins that derive the launch env (see plugins/plugin.h)
#   3 launcher/plan/   the plan and runtime adapters
#   4 launcher/jobs/   the job record and registry
#   5 executors/       local, Slurm, Kubernetes
#   6 app/             CLI, completion, the composition root (main)
#
# Because every edge points down, there is no cycle between folders. Production code never
# includes tests/. Prints each violation as "file:line: includes X (layer A -> layer B)" and
# exits 1; `--quiet` prints only violations (the build runs it that way).
set -euo pipefail
cd "$(dirname "$0")/.."
quiet=0
[[ "${1:-}" == "--quiet" ]] && quiet=1

layer_of() {  # folder -> layer number, or "" when the folder is not a layer
  case "$1" in
    runtime) echo 0 ;; launcher) echo 1 ;; plugins) echo 2 ;; launcher/plan) echo 3 ;;
    launcher/jobs) echo 4 ;; executors) echo 5 ;; app) echo 6 ;; *) echo "" ;;
  esac
}

violations=0
edges=0
files=0
for dir in runtime launcher plugins launcher/plan launcher/jobs executors app; do
  own=$(layer_of "$dir")
  for file in "$dir"/*.h "$dir"/*.cpp; do
    [[ -e "$file" ]] || continue
    files=$((files + 1))
    while IFS=: read -r line target; do
      edges=$((edges + 1))
      # An include without a folder is relative to the including file.
      [[ "$target" == */* ]] || target="$dir/$target"
      tdir=$(dirname "$target")
      tl=$(layer_of "$tdir")
      why=""
      if [[ -z "$tl" ]]; then
        why="$tdir/ is not a layer (production code never includes tests/ or tools)"
      elif ((tl > own)); then
        why="layer $own ($dir/) -> layer $tl ($tdir/): includes point down only"
      elif [[ "$tdir" == runtime && "$dir" != runtime && "$target" != runtime/env_hash.h ]]; then
        why="only runtime/env_hash.h is shared between bridge-probe and the launcher"
      elif [[ "$dir" == runtime && "$tdir" != runtime ]]; then
        why="bridge-probe stands alone: runtime/ includes only runtime/"
      fi
      if [[ -n "$why" ]]; then
        echo "$file:$line: includes \"$target\": $why"
        violations=$((violations + 1))
      fi
    done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" |
             sed -E 's/^([0-9]+):.*"([^"]+)".*/\1:\2/')
  done
done
if ((violations > 0)); then
  echo "check-layers: $violations include(s) break the layering (docs/architecture.md)"
  exit 1
fi
((quiet)) || echo "check-layers: $files files, $edges includes, all point down a layer"
