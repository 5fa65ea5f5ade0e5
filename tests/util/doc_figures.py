#!/usr/bin/env python3
"""Checks that the measured figures README.md and docs/ quote are BENCHMARKS.md's own.

The rule (docs/developer-guide.md, "Figures"): a measured figure outside BENCHMARKS.md is a
Markdown link to the BENCHMARKS.md section it comes from, its text quoting the figure as that
section states it, e.g. [13.5% MAPE](../BENCHMARKS.md#whole-jobs-...). This script fails, one
line per finding naming the file and line, when
  - a relative link names no file, or an anchor that no heading of the linked page has;
  - a number in such a link's text does not appear in the linked section (the section runs
    to the next heading of the same or a higher level, so its sub-sections count);
  - a line quotes a measured figure (MAPE, R², samples/s, GFLOP/s, "x PyTorch", "of dd")
    outside any link: a copy that nothing checks would drift.
Usage: doc_figures.py ROOT   (checks ROOT/README.md and ROOT/docs/**/*.md against
ROOT/BENCHMARKS.md; exit 0 when all is well, 1 with the findings on stderr otherwise)
"""
import os
import re
import sys

LINK = re.compile(r"\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
# A number as quoted: 13.5, 2,387, 0.97, 1.41 (the "x" or "%" after it is not part of it).
NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?")
# Words that make a number beside them a measurement someone read off a run.
MEASURED = re.compile(
    r"(\d[\d,]*(?:\.\d+)?\s*(?:%|x|×)?\s*(?:MAPE|samples/s|[GT]FLOP/s|(?:x|×)\s*PyTorch|of\s+`?dd`?"
    r"|(?:test\s+)?accuracy))"
    r"|((?:MAPE|R²|R\^2|R2)\s*(?:of|=|:)?\s*\d)")
# A number after one of these is a goal's threshold or a setting, not a measurement.
THRESHOLD = re.compile(r"(<|≤|>|≥|<=|>=|under|below|above|at most|at least|time to|goal|target)\s*$",
                       re.IGNORECASE)


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*?|__?", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text, flags=re.UNICODE)
    return text.replace(" ", "-")


def sections(path):
    """{anchor: section text} for every heading of a Markdown file."""
    lines = open(path, encoding="utf-8").read().splitlines()
    heads, in_fence = [], False
    for i, line in enumerate(lines):
        if FENCE.match(line):
            in_fence = not in_fence
        m = None if in_fence else HEADING.match(line)
        if m:
            heads.append((i, len(m.group(1)), m.group(2)))
    result, seen = {}, {}
    for k, (start, level, title) in enumerate(heads):
        end = next((s for s, lv, _ in heads[k + 1:] if lv <= level), len(lines))
        anchor = slug(title)
        n = seen.get(anchor, 0)
        seen[anchor] = n + 1
        result[anchor if n == 0 else f"{anchor}-{n}"] = "\n".join(lines[start:end])
    return result


def numbers(text):
    return [m.group(0) for m in NUMBER.finditer(text)]


def has_number(number, text):
    pattern = r"(?<![\d.,])" + re.escape(number) + r"(?![\d]|[.,]\d)"
    return re.search(pattern, text) is not None


def doc_files(root):
    yield os.path.join(root, "README.md")
    for folder, _, names in sorted(os.walk(os.path.join(root, "docs"))):
        for name in sorted(names):
            if name.endswith(".md"):
                yield os.path.join(folder, name)


def check_file(path, root, bench, bench_sections, findings):
    where = os.path.relpath(path, root)
    in_fence = False
    for number, line in enumerate(open(path, encoding="utf-8").read().splitlines(), 1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        # Code spans show syntax, not figures: `[text](BENCHMARKS.md#...)` in prose is an example.
        for m in LINK.finditer(re.sub(r"`[^`]*`", " CODE ", line)):
            text, target = m.group(1), m.group(2)
            file_part, _, anchor = target.partition("#")
            if re.match(r"[a-z]+:", target):
                continue  # a web address
            linked = os.path.normpath(os.path.join(os.path.dirname(path), file_part or
                                                   os.path.basename(path)))
            if not os.path.exists(linked):
                findings.append(f"{where}:{number}: the link to '{target}' names no file")
                continue
            if linked != bench:
                if anchor and linked.endswith(".md") and anchor not in sections(linked):
                    findings.append(f"{where}:{number}: no heading in "
                                    f"{os.path.relpath(linked, root)} has the anchor '#{anchor}'")
                continue
            if anchor and anchor not in bench_sections:
                findings.append(f"{where}:{number}: no heading in BENCHMARKS.md has the anchor "
                                f"'#{anchor}'")
                continue
            section = bench_sections[anchor] if anchor else open(bench, encoding="utf-8").read()
            for figure in numbers(text):
                if not has_number(figure, section):
                    findings.append(f"{where}:{number}: '{figure}' (in [{text}]) is not in "
                                    f"BENCHMARKS.md#{anchor or ''}")
        bare = LINK.sub(" LINK ", re.sub(r"`[^`]*`", " CODE ", line))
        for m in MEASURED.finditer(bare):
            if THRESHOLD.search(bare[:m.start()]):
                continue
            findings.append(f"{where}:{number}: measured figure '{m.group(0).strip()}' is not a "
                            "link to its BENCHMARKS.md section")


def main(argv):
    if len(argv) != 2:
        print("usage: doc_figures.py ROOT", file=sys.stderr)
        return 2
    root = os.path.abspath(argv[1])
    bench = os.path.join(root, "BENCHMARKS.md")
    bench_sections = sections(bench)
    findings = []
    checked = 0
    for path in doc_files(root):
        if os.path.exists(path):
            check_file(path, root, bench, bench_sections, findings)
            checked += 1
    for finding in findings:
        print(finding, file=sys.stderr)
    if findings:
        return 1
    print(f"doc_figures: {checked} files, every linked figure is in its BENCHMARKS.md section")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
