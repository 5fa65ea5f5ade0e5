#!/bin/bash
# The C/C++/CUDA style of .clang-format, applied by one pinned clang-format: Debian 12's
# clang-format 14 (install-deps.sh build installs it). Another major version formats the
# same file differently, so it is refused rather than used.
#
#   format.sh check   lists the tracked files that differ from the style; exit 1 if any
#   format.sh fix     reformats them in place
#
# Files: git ls-files '*.cpp' '*.hpp' '*.c' '*.h' '*.cu'. CLANG_FORMAT=PATH picks the binary
# (default: clang-format-14, else clang-format); it must still be major version 14.
set -euo pipefail
cd "$(dirname "$0")/../.."
want=14
mode=${1:-}
[[ $mode == check || $mode == fix ]] || { echo "usage: $0 check|fix" >&2; exit 2; }

bin=${CLANG_FORMAT:-$(command -v clang-format-$want || command -v clang-format || true)}
if [[ -z $bin ]] || ! command -v "$bin" >/dev/null; then
  echo "format: no clang-format $want${bin:+ at '$bin'} (Debian: apt-get install clang-format-$want," \
    "or share/setup/install-deps.sh build)" >&2
  exit 1
fi
version=$("$bin" --version 2>&1 || true)
major=$(sed -nE 's/.*clang-format version ([0-9]+)\..*/\1/p' <<<"$version" | head -1)
if [[ $major != "$want" ]]; then
  echo "format: $bin is '${version:-no version}', but the style is pinned to clang-format $want" \
    "(set CLANG_FORMAT to a clang-format $want binary)" >&2
  exit 1
fi

mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.c' '*.h' '*.cu')
((${#files[@]})) || { echo "format: no C/C++/CUDA files tracked by git" >&2; exit 1; }

if [[ $mode == fix ]]; then
  "$bin" -i "${files[@]}"
  echo "format: ${#files[@]} files formatted with $bin ($want)"
  exit 0
fi

# --dry-run -Werror reports every place as FILE:LINE:COL: error: ...[-Wclang-format-violations];
# one line per file is what a reader needs.
rc=0
out=$("$bin" --dry-run -Werror "${files[@]}" 2>&1) || rc=$?
if ((rc == 0)); then
  echo "check-format: all ${#files[@]} files match .clang-format (clang-format $want)"
  exit 0
fi
differ=$(sed -nE 's/^(.*):[0-9]+:[0-9]+: (error|warning): code should be clang-formatted.*/\1/p' <<<"$out" |
  uniq -c | awk '{printf "  %s (%d place%s)\n", $2, $1, $1 == 1 ? "" : "s"}')
if [[ -z $differ ]]; then  # failed for another reason (a bad .clang-format, an unreadable file)
  echo "$out" >&2
  echo "check-format: $bin failed (exit $rc)" >&2
  exit 1
fi
echo "$differ" >&2
echo "check-format: $(wc -l <<<"$differ") of ${#files[@]} files differ from .clang-format" \
  "(clang-format $want); 'make format' rewrites them" >&2
exit 1
