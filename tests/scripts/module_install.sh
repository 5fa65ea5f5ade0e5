#!/bin/bash
# make install PREFIX=... DESTDIR=... puts everything in place, and `module load dlh` works
# in a plain (non-interactive) bash script with a clean environment.
source "$(dirname "$0")/common.bash"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(dirname "$BINDIR")

echo "make install"
make -s -C "$ROOT" BUILDDIR="$BUILD" install PREFIX=/opt/dlh-test DESTDIR="$WORK/stage" >"$WORK/install.txt"
for f in bin/dlh-launch bin/dlh-estimate bin/dlh-data lib/dlh/spank_dlh.so \
         share/dlh/examples/fashion-mnist.json share/dlh/examples/ddp_fashion.py \
         share/dlh/python/dlh_progress.py share/dlh/python/dlh/__init__.py share/dlh/slurm/cli_filter.lua \
         share/dlh/cluster/example.json share/dlh/calibration/cpu.json share/doc/dlh/README.md \
         share/doc/dlh/BENCHMARKS.md share/doc/dlh/docs/researcher-guide.md \
         share/doc/dlh/docs/admin-guide.md share/doc/dlh/docs/reference/README.md \
         share/doc/dlh/docs/man/dlh-launch.md \
         share/man/man1/dlh-launch.1 share/man/man1/dlh-estimate.1 share/man/man1/dlh-report.1 \
         share/man/man1/dlh-data.1 share/man/man8/spank_dlh.8 \
         share/modulefiles/dlh/.version; do
  [[ -e "$WORK/stage/opt/dlh-test/$f" ]] || fail "missing after install: $f"
done
ls "$WORK/stage/opt/dlh-test/share/modulefiles/dlh" | grep -qv '^\.' || fail "no modulefile"
check "installed under DESTDIR: binaries, share/dlh, docs, man pages, modulefile"

echo "module load dlh in a plain bash script"
# The modulefile names PREFIX; install once more without DESTDIR into a real prefix.
make -s -C "$ROOT" BUILDDIR="$BUILD" install PREFIX="$WORK/prefix" >/dev/null
cat >"$WORK/job.sh" <<SH
#!/bin/bash
set -e
source /usr/share/modules/init/bash
module use "$WORK/prefix/share/modulefiles"
module load dlh
echo "DLH_HOME=\$DLH_HOME"
python3 -c 'import dlh_progress; print("dlh_progress from", dlh_progress.__file__)'
python3 -c 'import dlh; print("dlh from", dlh.__file__, dlh.in_dlh())'
command -v dlh-launch
dlh-estimate --version
echo "MANPATH=\$MANPATH"
echo "man-w: \$(man -w dlh-launch)"
echo "man-w8: \$(man -w 8 spank_dlh)"
echo "man-w-system: \$(man -w 1 man 2>/dev/null || echo none)"
MANWIDTH=80 man dlh-launch >"$WORK/dlh-launch.txt"
MANWIDTH=80 man 8 spank_dlh >"$WORK/spank_dlh.txt"
module help dlh 2>"$WORK/help.txt"
module unload dlh
echo "after unload: MANPATH \${MANPATH-unset}, PATH \$PATH"
SH
env -i HOME="$HOME" PATH=/usr/bin:/bin bash "$WORK/job.sh" >"$WORK/module.txt" 2>&1 || { cat "$WORK/module.txt"; fail "module load failed"; }
grep -q "DLH_HOME=$WORK/prefix" "$WORK/module.txt" || { cat "$WORK/module.txt"; fail "DLH_HOME not set"; }
grep -q "^$WORK/prefix/bin/dlh-launch" "$WORK/module.txt" || { cat "$WORK/module.txt"; fail "dlh-launch not on PATH"; }
grep -q "^dlh-estimate " "$WORK/module.txt" || fail "dlh-estimate does not run"
grep -q "^dlh_progress from $WORK/prefix/share/dlh/python/dlh_progress.py" "$WORK/module.txt" ||
  { cat "$WORK/module.txt"; fail "dlh_progress is not on PYTHONPATH"; }
grep -q "^dlh from $WORK/prefix/share/dlh/python/dlh/__init__.py False" "$WORK/module.txt" ||
  { cat "$WORK/module.txt"; fail "the dlh module is not on PYTHONPATH"; }
check "module load dlh: $(grep '^dlh-estimate' "$WORK/module.txt"), DLH_HOME, PATH and PYTHONPATH (dlh_progress, dlh) set"

echo "man pages after module load dlh"
# man finds DLH's pages in the install prefix through the MANPATH the module set, and still
# finds the system's own pages (the module keeps man's default path).
grep -q "^man-w: $WORK/prefix/share/man/man1/dlh-launch.1" "$WORK/module.txt" ||
  { cat "$WORK/module.txt"; fail "man -w dlh-launch does not resolve inside the install prefix"; }
grep -q "^man-w8: $WORK/prefix/share/man/man8/spank_dlh.8" "$WORK/module.txt" ||
  { cat "$WORK/module.txt"; fail "man -w 8 spank_dlh does not resolve inside the install prefix"; }
if [[ -n $(man -w 1 man 2>/dev/null) ]]; then  # a system with man's own page installed
  grep -q "^man-w-system: /" "$WORK/module.txt" ||
    { cat "$WORK/module.txt"; fail "after module load dlh, man no longer finds the system's pages"; }
fi
grep -q "^DLH-LAUNCH(1)" "$WORK/dlh-launch.txt" || fail "man dlh-launch: no DLH-LAUNCH(1) header"
[[ $(grep -A1 "^NAME" "$WORK/dlh-launch.txt") =~ dlh-launch\ +-\ +train ]] ||
  { head -8 "$WORK/dlh-launch.txt"; fail "man dlh-launch: no NAME line"; }
grep -q -- "--comm-timeout S" "$WORK/dlh-launch.txt" || fail "man dlh-launch: no --comm-timeout"
[[ $(grep -A1 "^NAME" "$WORK/spank_dlh.txt") =~ spank_dlh\ +-\ + ]] ||
  { head -8 "$WORK/spank_dlh.txt"; fail "man 8 spank_dlh: no NAME line"; }
grep -q "cluster=FILE" "$WORK/spank_dlh.txt" || fail "man 8 spank_dlh: no cluster=FILE"
grep -q "docs/admin-guide.md" "$WORK/help.txt" || { cat "$WORK/help.txt"; fail "module help dlh names no docs"; }
grep -qx "after unload: MANPATH unset, PATH /usr/bin:/bin" "$WORK/module.txt" ||
  { cat "$WORK/module.txt"; fail "module unload dlh did not give back MANPATH and PATH as they were"; }
check "module unload dlh: MANPATH unset and PATH as before"
check "man dlh-launch and man 8 spank_dlh from the install prefix; module help names the docs"

# Every installed page renders without a warning, both by man and by groff itself.
pages=("$WORK"/prefix/share/man/man[18]/*)
((${#pages[@]} == 5)) || fail "expected 5 man pages, found ${#pages[@]}: ${pages[*]}"
for p in "${pages[@]}"; do
  warn=$(MANWIDTH=80 man --warnings -E UTF-8 -l "$p" 2>&1 >/dev/null) || fail "man -l $p failed: $warn"
  [[ -z $warn ]] || fail "man warns about $(basename "$p"): $warn"
  warn=$(groff -ww -z -man "$p" 2>&1) || fail "groff failed on $p: $warn"
  [[ -z $warn ]] || fail "groff warns about $(basename "$p"): $warn"
done
check "${#pages[@]} man pages render without warnings (man --warnings, groff -ww)"
# The local cluster's scripts run as installed (they were installed 644: Permission denied).
for s in start-cluster.sh stop-cluster.sh; do
  [[ -x $WORK/prefix/share/dlh/slurm/$s ]] || fail "share/dlh/slurm/$s is not executable"
done
[[ ! -x $WORK/prefix/share/dlh/cluster/local.json ]] || fail "local.json installed executable"
check "the installed scripts are executable, the data files not"
# What the site put beside the install (its cluster description) outlives an uninstall.
echo '{"name": "site"}' >"$WORK/prefix/share/dlh/cluster/site.json"
make -s -C "$ROOT" BUILDDIR="$BUILD" uninstall PREFIX="$WORK/prefix" >"$WORK/uninstall.txt"
[[ ! -e "$WORK/prefix/bin/dlh-launch" ]] || fail "uninstall left dlh-launch"
left=$(find "$WORK/prefix/share/man" "$WORK/prefix/share/doc" "$WORK/prefix/share/modulefiles" -type f 2>/dev/null)
[[ -z $left ]] || fail "uninstall left: $left"
left=$(find "$WORK/prefix/share/dlh" -type f)
[[ $left == "$WORK/prefix/share/dlh/cluster/site.json" ]] || fail "uninstall left or removed: '$left'"
grep -q "^  $WORK/prefix/share/dlh/cluster/site.json$" "$WORK/uninstall.txt" ||
  { cat "$WORK/uninstall.txt"; fail "uninstall does not say it kept site.json"; }
check "make uninstall removes it, man pages and docs included, and keeps the site's site.json (saying so)"
