#!/bin/bash
# Runs libFuzzer targets one after the other (`make fuzz`; tests/fuzz/README.md).
#
#   run.sh FUZZ_DIR SECONDS TARGET...
#
# Each target FUZZ_DIR/<target>_fuzz runs for SECONDS on a scratch copy of its seed corpus
# tests/fuzz/corpus/<target>/ (what it adds never lands in the repository), as a single
# process (no -jobs/-fork: the machine is shared), with -timeout=10 and -rss_limit_mb=2048.
# A crash, sanitizer report, timeout, out-of-memory or leak is saved under
# FUZZ_DIR/artifacts/<target>/ and the full log is FUZZ_DIR/logs/<target>.log.
# Prints one line per target (runs, seconds, exec/s, coverage, crashed or not) and exits 1
# if any target crashed. FUZZ_SEED (a positive integer) fixes libFuzzer's seed, so that a run
# (.ci/run's) can be repeated; unset or 0, a new seed each run.
set -uo pipefail
cd "$(dirname "$0")/../.."

(($# >= 3)) || { echo "usage: $0 FUZZ_DIR SECONDS TARGET..." >&2; exit 2; }
fuzz_dir=$1 seconds=$2
shift 2
[[ $seconds =~ ^[1-9][0-9]*$ ]] || { echo "fuzz: SECONDS must be a positive integer, got '$seconds'" >&2; exit 2; }

# Longest input per target: a little above the largest seed (a longer one only makes each
# run slower without reaching new code).
max_len_of() {
  case $1 in
    plugin_options | stage_record) echo 1024 ;;
    plan | spec) echo 4096 ;;
    cluster) echo 8192 ;;
    calibration) echo 16384 ;;
    checkpoint) echo 2048 ;;
    checkpoint_bytes) echo 24576 ;;
    run_folder) echo 8192 ;;
    *) echo 4096 ;;
  esac
}

# HDF5's own leaks on corrupt files are not ours (lsan.supp says which).
export LSAN_OPTIONS=suppressions=$PWD/tests/fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}

# ASan options per target. checkpoint: HDF5 mallocs whatever size a corrupt header claims
# (H5C_protect, 0xc000000000000 bytes); glibc returns NULL for that and HDF5 fails the open
# cleanly, while ASan would abort. allocator_may_return_null=1 gives HDF5 the NULL that
# production gives it (sizes up to 1 TB still allocate, and libFuzzer reports any single
# allocation over -rss_limit_mb).
asan_options_of() {
  case $1 in
    checkpoint | checkpoint_bytes) echo allocator_may_return_null=1 ;;
    *) echo "" ;;
  esac
}

# Targets whose input goes through another library's parser that has bugs of its own (HDF5's:
# README.md, "HDF5"), as a regular expression for that library's frames. They run in fork
# mode, going on after a crash; every crash is then replayed and judged by where it happened:
# in the library's own code (the first frame of the report that is not the C library's or
# the sanitizer's), a known foreign bug, listed and not a failure; anywhere else, a crash of
# ours, which fails the run.
foreign_of() {
  case $1 in
    checkpoint_bytes) echo '(^H5|libhdf5)' ;;  # H5O__msg_iterate_real, ... in libhdf5*.so
    *) echo "" ;;
  esac
}

# crash_site BIN INPUT: the first frame of the sanitizer's report on INPUT that is neither
# the C library's (memcpy's SIMD body) nor the sanitizer's, as "function (module)" or
# "file:line"; "" when INPUT no longer crashes. The sanitizer's interceptors are named
# __interceptor_strdup or plain strdup (clang 14, seen in a CI run: HDF5's H5MM_strdup read
# past an unterminated name, and the report's first frame was "strdup (<target>+0x...)"):
# any frame inside the target binary without a source line is the sanitizer's or libFuzzer's,
# since the project's own code is built with -g and shows its file and line.
crash_site() {
  local out binary
  binary=$(basename "$1")
  # TMPDIR: the checkpoint targets write a file per input, left behind by a crash.
  out=$(TMPDIR=$scratch/tmp ASAN_OPTIONS=$(asan_options_of "$target")${ASAN_OPTIONS:+:$ASAN_OPTIONS} \
    "$1" "$2" 2>&1 || true)
  grep -E '^ *#[0-9]+ 0x[0-9a-f]+ ' <<<"$out" |
    sed -E 's/^ *#[0-9]+ 0x[0-9a-f]+ +(in )?//' |
    grep -vE '^(__interceptor_|__asan_|__ubsan_|__sanitizer_|__lsan_)|/sysdeps/|/libc\.so' |
    grep -vE "\(([^()]*/)?${binary}\+0x[0-9a-f]+\)" |
    head -n 1
}

# Dictionaries: JSON tokens and edge numbers for the JSON inputs, the keys for the plugin's.
dict_of() {
  case $1 in
    spec | cluster | plan | calibration | stage_record | plan_core) echo tests/fuzz/json.dict ;;
    plugin_options) echo tests/fuzz/plugin_options.dict ;;
    *) echo "" ;;
  esac
}

# Scratch corpora and the targets' own files (TMPDIR: the checkpoint targets write one per
# input) on a RAM disk when there is one; removed at the end, also after a crash.
scratch_base=${TMPDIR:-/tmp}
[[ -d /dev/shm && -w /dev/shm ]] && scratch_base=/dev/shm
scratch=$(mktemp -d "$scratch_base/dlh-fuzz-XXXXXX") || exit 1
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$fuzz_dir/logs"

failed=()
for target in "$@"; do
  bin=$fuzz_dir/${target}_fuzz
  seeds=tests/fuzz/corpus/$target
  [[ -x $bin ]] || { echo "fuzz: no $bin (make fuzz-build)" >&2; exit 2; }
  [[ -d $seeds ]] || { echo "fuzz: no seed corpus $seeds" >&2; exit 2; }
  corpus=$scratch/$target
  artifacts=$fuzz_dir/artifacts/$target/
  log=$fuzz_dir/logs/$target.log
  mkdir -p "$corpus" "$artifacts" "$scratch/tmp"
  cp -r "$seeds/." "$corpus/"
  echo "== $target: ${seconds}s, seeds $seeds ($(find "$seeds" -type f | wc -l) files), log $log"

  start=$(date +%s)
  rc=0
  asan=$(asan_options_of "$target")
  dict=$(dict_of "$target")
  foreign=$(foreign_of "$target")
  stamp=$scratch/$target.started
  : >"$stamp"
  TMPDIR=$scratch/tmp ASAN_OPTIONS=$asan${ASAN_OPTIONS:+${asan:+:}$ASAN_OPTIONS} "$bin" "$corpus" -max_total_time="$seconds" -max_len="$(max_len_of "$target")" -timeout=10 \
    -rss_limit_mb=2048 -seed="${FUZZ_SEED:-0}" -print_final_stats=1 -artifact_prefix="$artifacts" ${dict:+-dict="$dict"} \
    ${foreign:+-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1} >"$log" 2>&1 || rc=$?
  took=$(($(date +%s) - start))
  if [[ -n $foreign ]]; then
    # Fork mode: every crash it went on after is judged here, by where it happened.
    ours=0 theirs=0 ours_sites=()
    while IFS= read -r -d '' input; do
      site=$(crash_site "$bin" "$input")
      [[ -n $site ]] || continue  # no longer crashes alone (a timeout or memory limit)
      if [[ $site =~ $foreign ]]; then
        theirs=$((theirs + 1))
        echo "  foreign: $(basename "$input"): in $site" >>"$log"
      else
        ours=$((ours + 1))
        echo "  ours: $(basename "$input"): in $site"
        ours_sites+=("$site")
      fi
    done < <(find "$artifacts" -maxdepth 1 -type f -name 'crash-*' -newer "$stamp" -print0)
    # The triage decides: libFuzzer's fork mode exits 1 when any job crashed, even with
    # -ignore_crashes (seen in a clean-clone CI: 4 crashes, all inside HDF5, exit 1), so
    # its status counts only where the run did not end as fork mode ends ("INFO: exiting:").
    if ((ours > 0)); then
      rc=1
    elif ((rc != 0)) && grep -q '^INFO: exiting: ' "$log"; then
      rc=0
    fi
    ((theirs == 0)) || echo "  $target: $theirs crash(es) inside HDF5 (its own bugs, README.md): not failures"
  fi

  # libFuzzer's last status line "#N DONE cov: C ft: F corp: ..." (or the last "#N ..." line
  # before a crash) and its final stats.
  status=$(grep -E '^#[0-9]+' "$log" | tail -1)
  runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -1)
  [[ -n $runs ]] || runs=$(sed -nE 's/^#([0-9]+).*/\1/p' <<<"$status")
  per_s=$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+).*/\1/p' "$log" | tail -1)
  cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$status")
  ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$status")
  corp=$(sed -nE 's/.* corp: ([0-9]+).*/\1/p' <<<"$status")
  rss=$(sed -nE 's/^stat::peak_rss_mb: *([0-9]+).*/\1/p' "$log" | tail -1)
  if ((rc != 0)); then
    what=$(grep -m1 -oE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer): [^ ]+|runtime error: .*|threw .*' "$log" |
      cut -c1-120)
    echo "$target: CRASHED (exit $rc) after ${runs:-?} runs in ${took}s: ${what:-see $log}"
    # The crash sites again, here at the end where a CI log's tail shows them.
    [[ -z $foreign ]] || for site in "${ours_sites[@]}"; do echo "  ours: in $site"; done
    grep -E '^artifact_prefix|Test unit written to' "$log" | sed 's/^/  /'
    failed+=("$target")
  else
    echo "$target: ok, ${runs:-?} runs in ${took}s (${per_s:-?} exec/s), cov ${cov:-?}, ft ${ft:-?}," \
      "corpus ${corp:-?}, peak RSS ${rss:-?} MB, crashed: no"
  fi
  rm -rf "$corpus"
done

if ((${#failed[@]})); then
  echo "fuzz: ${#failed[@]} target(s) crashed: ${failed[*]} (inputs under $fuzz_dir/artifacts/)"
  exit 1
fi
echo "fuzz: all $# target(s) ran ${seconds}s without a crash"
