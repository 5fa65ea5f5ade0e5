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
         share/dlh/python/dlh_progress.py share/dlh/slurm/cli_filter.lua \
         share/dlh/cluster/example.json share/dlh/calibration/cpu.json share/doc/dlh/README.md \
         share/modulefiles/dlh/.version; do
  [[ -e "$WORK/stage/opt/dlh-test/$f" ]] || fail "missing after install: $f"
done
ls "$WORK/stage/opt/dlh-test/share/modulefiles/dlh" | grep -qv '^\.' || fail "no modulefile"
check "installed under DESTDIR: binaries, share/dlh, docs, modulefile"

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
command -v dlh-launch
dlh-estimate --version
SH
env -i HOME="$HOME" PATH=/usr/bin:/bin bash "$WORK/job.sh" >"$WORK/module.txt" 2>&1 || { cat "$WORK/module.txt"; fail "module load failed"; }
grep -q "DLH_HOME=$WORK/prefix" "$WORK/module.txt" || { cat "$WORK/module.txt"; fail "DLH_HOME not set"; }
grep -q "^$WORK/prefix/bin/dlh-launch" "$WORK/module.txt" || { cat "$WORK/module.txt"; fail "dlh-launch not on PATH"; }
grep -q "^dlh-estimate " "$WORK/module.txt" || fail "dlh-estimate does not run"
grep -q "^dlh_progress from $WORK/prefix/share/dlh/python/dlh_progress.py" "$WORK/module.txt" ||
  { cat "$WORK/module.txt"; fail "dlh_progress is not on PYTHONPATH"; }
check "module load dlh: $(grep '^dlh-estimate' "$WORK/module.txt"), DLH_HOME, PATH and PYTHONPATH (dlh_progress) set"
make -s -C "$ROOT" BUILDDIR="$BUILD" uninstall PREFIX="$WORK/prefix"
[[ ! -e "$WORK/prefix/bin/dlh-launch" ]] || fail "uninstall left dlh-launch"
check "make uninstall removes it"
