#!/usr/bin/env bash
# Checks the include graph against the layers of docs/architecture.md: one folder per layer,
# read bottom-up. A file may include headers of its own folder and of the folders below it,
# never one above. The table is the whole rule:
#
#   layer  folder      what it holds
#   0      probe       bridge-probe, standing alone (only probe/env_hash.h is shared)
#   1      base        diagnostics and text utilities (UTF-8, quoting, numbers, YAML tree)
#   2      system      processes, clock, random, host environment, templates, log files
#   3      model       recipe, loader, schema, topology, GPU table, overlap rules, launch env
#   4      plugins     plugins that derive the launch env (see plugins/plugin.h)
#   5      plan        the plan and the runtime adapters
#   6      jobs        the job record, registry, progress and triage
#   7      executors   local, Slurm, Kubernetes
#   8      launcher    the bridge-launch program: commands, completion, the composition root
#
# Because every edge points down, there is no cycle between folders. Production code never
# includes tests/, and executors never read the recipe (only the plan's job view). Prints each violation as "file:line: includes X: why" and exits 1;
# `--quiet` prints only violations (the build runs it that way).
set -euo pipefail
cd "$(dirname "$0")/.."
quiet=0
[[ "${1:-}" == "--quiet" ]] && quiet=1

readonly LAYERS=(probe base system model plugins plan jobs executors launcher)
declare -A layer_of=()
for i in "${!LAYERS[@]}"; do layer_of[${LAYERS[$i]}]=$i; done

violations=0
edges=0
files=0
for dir in "${LAYERS[@]}"; do
  own=${layer_of[$dir]}
  for file in "$dir"/*.h "$dir"/*.cpp; do
    [[ -e "$file" ]] || continue
    files=$((files + 1))
    while IFS=: read -r line target; do
      edges=$((edges + 1))
      # An include without a folder is relative to the including file.
      [[ "$target" == */* ]] || target="$dir/$target"
      tdir=$(dirname "$target")
      tl=${layer_of[$tdir]:-}
      why=""
      if [[ -z "$tl" ]]; then
        why="$tdir/ is not a layer (production code never includes tests/ or tools)"
      elif ((tl > own)); then
        why="layer $own ($dir/) -> layer $tl ($tdir/): includes point down only"
      elif [[ "$tdir" == probe && "$dir" != probe && "$target" != probe/env_hash.h ]]; then
        why="only probe/env_hash.h is shared between bridge-probe and the launcher"
      elif [[ "$dir" == probe && "$tdir" != probe ]]; then
        why="bridge-probe stands alone: probe/ includes only probe/"
      fi
      if [[ -n "$why" ]]; then
        echo "$file:$line: includes \"$target\": $why"
        violations=$((violations + 1))
      fi
    done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" |
             sed -E 's/^([0-9]+):.*"([^"]+)".*/\1:\2/')
  done
done
# Executors render from the plan's typed values and its job view (Plan::job in plan/plan.h),
# never from the recipe itself: what they submit is then what the plan shows.
while IFS=: read -r file line _; do
  echo "$file:$line: reads the recipe: an executor reads plan.job (plan/plan.h), never plan.recipe"
  violations=$((violations + 1))
done < <(grep -nE '\.recipe\b|\bRecipe *&' executors/*.h executors/*.cpp | grep -vE '^[^:]+:[0-9]+: *//')

# Outside executors/, an executor is known by its row's traits (model/executor_kind.h), never
# by comparing its name: a new executor would otherwise be missed by every such comparison.
# The names, read from the rows of model/executor_kind.cpp (`.name = "slurm"`): a new row is
# checked with no list here to extend.
EXECUTOR_NAMES="\"($(grep -oE '\.name = "[a-z0-9_-]+"' model/executor_kind.cpp | sed -E 's/.*"(.*)"/\1/' |
  paste -sd'|'))\""
readonly EXECUTOR_NAMES
while IFS=: read -r file line _; do
  echo "$file:$line: compares an executor's name: ask its row in model/executor_kind.h instead"
  violations=$((violations + 1))
done < <(grep -nE "executor[A-Za-z_.()>-]*[[:space:]]*[!=]=[[:space:]]*$EXECUTOR_NAMES|$EXECUTOR_NAMES[[:space:]]*[!=]=[[:space:]]*[A-Za-z_.()>-]*executor" \
           base/*.cpp base/*.h system/*.cpp system/*.h model/*.cpp model/*.h plugins/*.cpp \
           plugins/*.h plan/*.cpp plan/*.h jobs/*.cpp jobs/*.h launcher/*.cpp launcher/*.h)

# One last-resort catch-all, in launcher/main.cpp. Elsewhere a `catch (...)` may only carry the
# exception to another thread (std::current_exception), never end it.
while IFS=: read -r file line _; do
  next=$(sed -n "$((line + 1)),$((line + 4))p" "$file")
  [[ "$next" == *current_exception* ]] && continue
  echo "$file:$line: a catch-all outside launcher/main.cpp: catch what the library throws, in the one file that uses it"
  violations=$((violations + 1))
done < <(grep -nE 'catch[[:space:]]*\([[:space:]]*\.\.\.[[:space:]]*\)' \
           base/*.cpp system/*.cpp model/*.cpp plugins/*.cpp plan/*.cpp jobs/*.cpp \
           executors/*.cpp launcher/*.cpp probe/*.cpp | grep -v '^launcher/main.cpp:')

# Errors are values (base/status.h, base/diagnostics.h): no `std::string& error` out-parameter.
while IFS=: read -r file line _; do
  echo "$file:$line: a std::string& error out-parameter: return a Status or StatusOr instead"
  violations=$((violations + 1))
done < <(grep -nE '(^|[(,])[[:space:]]*std::string[[:space:]]*[&*][[:space:]]*(error|err|why|problem)[[:space:]]*([),]|$)' \
           base/*.h system/*.h model/*.h plugins/*.h plan/*.h jobs/*.h executors/*.h launcher/*.h \
           probe/*.h base/*.cpp system/*.cpp model/*.cpp plugins/*.cpp plan/*.cpp jobs/*.cpp \
           executors/*.cpp launcher/*.cpp probe/*.cpp)

if ((violations > 0)); then
  echo "check-layers: $violations violation(s) of the layering (docs/architecture.md)"
  exit 1
fi
((quiet)) || echo "check-layers: $files files, $edges includes, all point down a layer"
