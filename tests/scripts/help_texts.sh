#!/bin/bash
# Every command's --help, as a user reads it: each subcommand of dlh-launch, dlh-estimate and
# dlh-data that the tool's own usage lists, and dlh-report. Each must exit 0 with its options
# (no other word needed), and show its defaults as a user would type them: Program_options
# writes a double's default with every digit it holds ("--margin arg
# (=0.10000000000000001)"), which common/cli.hpp's HelpNumber avoids.
source "$(dirname "$0")/common.bash"

# subcommands TOOL: the words its usage lists as commands.
subcommands() {
  case $1 in
    dlh-launch) dlh-launch --help | sed -nE 's/^(usage: |       )dlh-launch ([a-z][a-z-]*).*/\2/p' ;;
    dlh-estimate) dlh-estimate --help | sed -nE 's/^  ([a-z][a-z-]*) .*/\1/p' ;;
    dlh-data) dlh-data --help | sed -nE 's/^  ([a-z][a-z-]*) .*/\1/p' ;;
  esac | sort -u
}

count=0
for tool in dlh-launch dlh-estimate dlh-data dlh-report; do
  words=("")
  [[ $tool == dlh-report ]] || mapfile -t words < <(subcommands "$tool")
  ((${#words[@]} > 0)) || fail "$tool --help lists no commands"
  for word in "${words[@]}"; do
    name="$tool${word:+ $word}"
    rc=0
    # shellcheck disable=SC2086  # $word: the subcommand, or nothing for dlh-report
    $tool $word --help >"$WORK/help.txt" 2>&1 || rc=$?
    ((rc == 0)) || { cat "$WORK/help.txt"; fail "$name --help exited $rc"; }
    grep -q -- '--help' "$WORK/help.txt" || { cat "$WORK/help.txt"; fail "$name --help shows no options"; }
    if grep -nE '\(=-?[0-9]*\.[0-9]{7,}' "$WORK/help.txt" >"$WORK/long.txt"; then
      fail "$name --help shows a default with every digit of a double: $(head -1 "$WORK/long.txt")"
    fi
    count=$((count + 1))
  done
done
((count >= 30)) || fail "only $count commands' help read: a tool's usage changed its layout?"
check "$count commands' --help exit 0 and show their defaults as a user types them"
echo "help_texts.sh: all checks passed"
