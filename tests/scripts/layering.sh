#!/bin/bash
# The sources' layering and size, checked from the tree alone (no build; well under a second).
#
# Layers, top to bottom: plugin/ (the SPANK front end), estimator/ (planning, calibration,
# dlh-estimate), launcher/ (training, dlh-launch), common/. A file's #include may reach its
# own layer or a lower one, never a higher one: the planning core that sbatch loads must not
# drag in the plugin, and the launcher must not need the estimator. tests/ are exempt (they
# test every layer). Each problem is one line naming the file, the line and the include.
#
# And no C/C++/CUDA file of launcher/ or estimator/ (headers included) is longer than
# MAX_LINES (700): a longer file does more than one job, and should be split where it does.
set -euo pipefail
cd "$(dirname "$0")/../.."
LAYERS=(common launcher estimator plugin)  # bottom to top
MAX_LINES=${MAX_LINES:-700}

declare -A rank
for i in "${!LAYERS[@]}"; do rank[${LAYERS[$i]}]=$i; done

mapfile -t files < <(find "${LAYERS[@]}" -type f \( -name '*.cpp' -o -name '*.hpp' -o \
  -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | LC_ALL=C sort)
((${#files[@]})) || { echo "layering: no sources found under ${LAYERS[*]}" >&2; exit 1; }

problems=0
include_re='^[[:space:]]*#[[:space:]]*include[[:space:]]*["<](common|launcher|estimator|plugin)/'
while IFS= read -r hit; do
  file=${hit%%:*}
  rest=${hit#*:}
  line=${rest%%:*}
  text=${rest#*:}
  [[ $text =~ $include_re ]] || continue
  to=${BASH_REMATCH[1]}
  from=${file%%/*}
  if ((rank[$to] > rank[$from])); then
    echo "layering: $file:$line: ${text#"${text%%[![:space:]]*}"} reaches up from $from/ to $to/" >&2
    problems=$((problems + 1))
  fi
done < <(grep -HnE "$include_re" "${files[@]}" || true)

while read -r count file; do
  [[ $file == total ]] && continue
  if ((count > MAX_LINES)); then
    echo "layering: $file: $count lines, more than $MAX_LINES (split it where its jobs part)" >&2
    problems=$((problems + 1))
  fi
done < <(printf '%s\n' "${files[@]}" | grep -E '^(launcher|estimator)/' | xargs wc -l)

if ((problems > 0)); then
  echo "layering: $problems problem(s) (layers top to bottom: plugin, estimator, launcher," \
    "common)" >&2
  exit 1
fi
echo "  ok: ${#files[@]} files: every #include reaches its own layer or a lower one;" \
  "no file of launcher/ or estimator/ over $MAX_LINES lines"
