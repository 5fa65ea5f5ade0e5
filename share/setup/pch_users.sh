#!/bin/bash
# The C++ files whose compile the precompiled header speeds up (the Makefile's PCH): those
# that include nlohmann-json, Boost.Program_options or GoogleTest, directly or through the
# project's own headers. The others compile faster without it: loading the 200 MB .gch costs
# about 1 s, more than a small file's whole compile (2026-12-02: common/median.cpp 0.4 s
# without, 1.5 s with). Prints one path per line; the project includes its headers by their
# path from the repository root ("common/spec.hpp"), which is what this follows.
#
#   pch_users.sh DIR...
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck disable=SC2016 # the $ in awk's program are awk's
find "$@" \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' \) -type f -print0 |
  xargs -0 awk '
    FNR == 1 { files[FILENAME] = 1 }
    /^[ \t]*#[ \t]*include[ \t]*<(nlohmann\/json\.hpp|boost\/program_options\.hpp|gtest\/gtest\.h)>/ {
      heavy[FILENAME] = 1
    }
    /^[ \t]*#[ \t]*include[ \t]*"/ {
      split($0, part, "\"")
      n = ++count[FILENAME]
      include[FILENAME, n] = part[2]
    }
    END {
      # Heaviness flows from a header to every file that includes it, until nothing changes.
      do {
        changed = 0
        for (f in files) {
          if (f in heavy) continue
          for (i = 1; i <= count[f]; i++) {
            if (include[f, i] in heavy) { heavy[f] = 1; changed = 1; break }
          }
        }
      } while (changed)
      for (f in heavy) if (f ~ /\.cpp$/) print f
    }'
