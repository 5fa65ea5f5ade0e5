#!/bin/bash
# dlh-data stage on storage that users share (issue 41): a second local user plants a copy
# and a record that say "already staged", a folder above the victim's that others may
# write, a symbolic link in place of the staging folder, and inside the victim's folder a
# FIFO, a deep and a foreign record and a foreign copy (those as root would). Each attack is
# refused with one line before a byte is read or written, or the planted file is not trusted
# and the data set is copied again; the copy keeps the source's mode (0600), and %u, %j and
# the default folder name the user and the job. Needs root (useradd, runuser).
source "$(dirname "$0")/common.bash"
unset SLURMD_NODENAME SLURM_JOB_ID
if [[ $(id -u) -ne 0 ]] || ! command -v useradd >/dev/null || ! command -v runuser >/dev/null; then
  [[ ${REQUIRE_SLURM:-0} == 0 ]] || fail "needs root, useradd and runuser (a second local user)"
  echo "  skip: needs root, useradd and runuser (a second local user)"
  exit 0
fi
VICTIM=dlhstage1 PLANTER=dlhstage2
for u in $VICTIM $PLANTER; do
  for _ in $(seq 20); do  # another test may hold the passwd lock for a moment
    id "$u" >/dev/null 2>&1 || useradd --no-create-home --shell /usr/sbin/nologin "$u" 2>/dev/null || true
    id "$u" >/dev/null 2>&1 && break
    sleep 0.5
  done
  id "$u" >/dev/null 2>&1 || fail "cannot create the local user $u"
done
as() { local u=$1; shift; runuser -u "$u" -- env PATH="$PATH" HOME=/ "$@"; }
trap 'rm -rf "$WORK" /tmp/dlh-$VICTIM' EXIT
chmod 0755 "$WORK"
mkdir -m 0755 "$WORK/data" && chown $VICTIM "$WORK/data"
mkdir -m 1777 "$WORK/tmp"  # a node's /tmp
as $VICTIM dlh-data synthetic --out "$WORK/data/d.h5" --shape 1x8x8 --classes 4 --train 300 --test 20 >/dev/null
chmod 0600 "$WORK/data/d.h5"
D=$WORK/data/d.h5

# expect_refused PATTERN ARGS...: the victim's stage exits 1 with PATTERN on one line.
expect_refused() {
  local pattern=$1; shift
  local rc=0
  as $VICTIM dlh-data stage "$D" "$@" >"$WORK/out.txt" 2>"$WORK/err.txt" || rc=$?
  [[ $rc -eq 1 ]] || { cat "$WORK/out.txt" "$WORK/err.txt" >&2; fail "stage $* exited $rc, expected 1"; }
  [[ $(wc -l <"$WORK/err.txt") -eq 1 ]] && grep -q -- "$pattern" "$WORK/err.txt" ||
    { cat "$WORK/err.txt" >&2; fail "stage $*: no one line '$pattern'"; }
  check "$(cat "$WORK/err.txt")"
}

# The victim's own folder: created 0700, the copy keeps the data set's mode 0600; %u and %j.
as $VICTIM env SLURM_JOB_ID=42 dlh-data stage "$D" --to "$WORK/tmp/%u/job-%j" >"$WORK/out.txt" ||
  { cat "$WORK/out.txt"; fail "staging into the victim's own folder failed"; }
own=$WORK/tmp/$VICTIM/job-42
[[ $(stat -c %a "$own") == 700 && $(stat -c %a "$own/d.h5") == 600 && $(stat -c %U "$own/d.h5") == "$VICTIM" ]] ||
  { ls -la "$own"; fail "folder or copy mode: want 700 and 600, the victim's"; }
cmp -s "$D" "$own/d.h5" || fail "the copy differs"
check "own folder $own (700), copy 600 like the source"
as $VICTIM env SLURM_JOB_ID=43 dlh-data stage "$D" >"$WORK/out.txt" || { cat "$WORK/out.txt"; fail "default folder"; }
grep -q " /tmp/dlh-$VICTIM/job-43/d.h5, " "$WORK/out.txt" || { cat "$WORK/out.txt"; fail "not the default /tmp/dlh-%u/job-%j"; }
check "no --to: /tmp/dlh-$VICTIM/job-43"

# 1. A planted copy and a record that matches it, in a folder the planter made for the
# victim's path: refused, and nothing of the planted files is read or changed.
planted=$WORK/tmp/$VICTIM-stage
as $PLANTER mkdir -m 0777 "$planted"
as $PLANTER dlh-data synthetic --out "$planted/d.h5.src" --shape 1x8x8 --classes 4 --train 300 --test 20 --seed 9 >/dev/null
as $PLANTER cp "$planted/d.h5.src" "$planted/d.h5"
truncate -s "$(stat -c %s "$D")" "$planted/d.h5"
python3 - "$D" "$planted" <<'PY'
import json, os, sys, zlib
src, planted = sys.argv[1], sys.argv[2]
st = os.stat(src)
json.dump({"source": os.path.abspath(src), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
           "crc32": zlib.crc32(open(f"{planted}/d.h5", "rb").read())},
          open(f"{planted}/.d.h5.stage.json", "w"))
PY
chown $PLANTER "$planted/d.h5" "$planted/.d.h5.stage.json"
before=$(ls -la --time-style=+%s.%N "$planted" | md5sum)
expect_refused "^dlh-data: $planted: refused as the staging folder: owned by user '$PLANTER' (uid [0-9]*), not by you ($VICTIM)$" --to "$planted"
expect_refused "^dlh-data: $planted: refused as the staging folder: owned by user '$PLANTER'" --to "$planted" --verify
[[ $(ls -la --time-style=+%s.%N "$planted" | md5sum) == "$before" ]] || fail "the planted folder changed"
check "a planted copy and record: nothing read, nothing written"

# 2. A folder above the victim's that others may write, without the sticky bit: the planter
# could rename the victim's folder away and put theirs in its place.
as $PLANTER mkdir -m 0777 "$WORK/tmp/open"
expect_refused "^dlh-data: $WORK/tmp/open: refused as a folder above the staging folder: owned by user '$PLANTER'" --to "$WORK/tmp/open/mine"
mkdir -m 0777 "$WORK/wide"
expect_refused "^dlh-data: $WORK/wide: refused as a folder above the staging folder: writable by others without the sticky bit (mode 0777)" --to "$WORK/wide/mine"
[[ ! -e $WORK/tmp/open/mine && ! -e $WORK/wide/mine ]] || fail "a folder was created under a refused one"

# 3. A symbolic link in place of the staging folder, to a folder of the planter's; and the
# victim's own folder left writable by others.
as $PLANTER mkdir -m 0777 "$WORK/tmp/planter-dir"
as $PLANTER ln -s "$WORK/tmp/planter-dir" "$WORK/tmp/$VICTIM-link"
expect_refused "^dlh-data: $WORK/tmp/$VICTIM-link: refused as the staging folder: a symbolic link owned by user '$PLANTER'" --to "$WORK/tmp/$VICTIM-link"
[[ -z $(ls -A "$WORK/tmp/planter-dir") ]] || fail "something was written through the planted link"
as $VICTIM mkdir -m 0777 "$WORK/tmp/$VICTIM-careless"
expect_refused "^dlh-data: $WORK/tmp/$VICTIM-careless: refused as the staging folder: writable by others (mode 0777): chmod go-w " --to "$WORK/tmp/$VICTIM-careless"

# 4. Inside the victim's own folder, what only root could put there: a FIFO as the record
# (it must not block), a record nested 60,000 deep, a record and a copy of another user's.
# None is trusted; the data set is staged again and the record replaced.
stage_again() {  # stage_again WHAT: the victim's stage copies again, with a note on stderr
  timeout 30 runuser -u $VICTIM -- env PATH="$PATH" HOME=/ dlh-data stage "$D" --to "$own" >"$WORK/out.txt" 2>"$WORK/err.txt" ||
    { cat "$WORK/out.txt" "$WORK/err.txt"; fail "$1: stage failed or hung"; }
  grep -q "^staged " "$WORK/out.txt" || { cat "$WORK/out.txt"; fail "$1: not staged again"; }
  cmp -s "$D" "$own/d.h5" && [[ $(stat -c %U "$own/d.h5") == "$VICTIM" && -f $own/.d.h5.stage.json && ! -L $own/.d.h5.stage.json ]] ||
    fail "$1: the copy or the record is not the victim's"
  check "$1: staged again ($(head -1 "$WORK/err.txt"))"
}
rm "$own/.d.h5.stage.json" && mkfifo "$own/.d.h5.stage.json" && chown $VICTIM "$own/.d.h5.stage.json"
stage_again "a FIFO as the record"
python3 -c 'print("[" * 60000)' >"$own/.d.h5.stage.json" && chown $VICTIM "$own/.d.h5.stage.json"
stage_again "a record nested 60000 deep"
chown $PLANTER "$own/.d.h5.stage.json"
stage_again "another user's record"
chown $PLANTER "$own/d.h5"
stage_again "another user's copy"
as $VICTIM dlh-data stage "$D" --to "$own" >"$WORK/out.txt"
grep -q "^already staged " "$WORK/out.txt" || { cat "$WORK/out.txt"; fail "the victim's own record was not trusted"; }
check "the victim's own copy and record: already staged"
[[ -z $(find "$WORK/tmp" -name '.d.h5.??????' 2>/dev/null) ]] || fail "a temporary file was left"
