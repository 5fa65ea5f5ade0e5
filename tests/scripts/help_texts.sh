#!/bin/bash
# Every command's --help, as a user reads it: each subcommand of dlh-launch, dlh-estimate and
# dlh-data that the tool's own usage lists, and dlh-report. Each must exit 0 with its options
# (no other word needed), and show its defaults as a user would type them: Program_options
# writes a double's default with every digit it holds ("--margin arg
# (=0.10000000000000001)"), which common/cli.hpp's HelpNumber avoids.
source "$(dirname "$0")/common.bash"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

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
    cp "$WORK/help.txt" "$WORK/help-$tool${word:+-$word}.txt"  # for the man pages below
    count=$((count + 1))
  done
done
((count >= 30)) || fail "only $count commands' help read: a tool's usage changed its layout?"
check "$count commands' --help exit 0 and show their defaults as a user types them"

# Every option a command's --help lists is in its man page's section (docs/man/TOOL.md,
# "## COMMAND ..."; dlh-data's imports also have "Common options of the imports"; options
# that are also the positional argument are named once, in OPTIONS): 2026-12-07, four
# options of dlh-estimate were in --help and in no section.
for tool in dlh-launch dlh-estimate dlh-data; do
  mapfile -t words < <(subcommands "$tool")
  python3 - "$tool" "$ROOT/docs/man/$tool.md" "$WORK" "${words[@]}" <<'PY' || fail "$tool: options missing from docs/man/$tool.md (above)"
import re, sys
tool, man, work, words = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
sections, current = {}, None
for line in open(man):
    if line.startswith("# "):
        current = None
    m = re.match(r"^##+ (?:dlh-\w+ )?([a-z][a-z-]*)", line)
    if line.startswith("## Common options"):
        current = "common"
    elif m:
        current = m.group(1)
    if current:
        sections[current] = sections.get(current, "") + line
missing = []
for word in words:
    text = open(f"{work}/help-{tool}-{word}.txt").read()  # the --help read above
    section = sections.get(word)
    if section is None:
        missing.append(f"{tool} {word}: no section '## {word}'")
        continue
    if tool == "dlh-data" and (word.startswith("import-") or word == "synthetic"):
        section += sections.get("common", "")
    for name, rest in re.findall(r"^  (?:-\w \[ )?(--[a-z0-9-]+)[^\n]*((?:\n {20,}[^\n]*)*)", text, re.M):
        if name == "--help" or "positional argument" in rest:
            continue
        if "\\" + name not in section and name not in section:
            missing.append(f"{tool} {word}: {name}")
for m in missing:
    print(m)
sys.exit(1 if missing else 0)
PY
done
check "every option of every command's --help is in its man page's section"
echo "help_texts.sh: all checks passed"
