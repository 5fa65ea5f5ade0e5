#!/bin/bash
# REQUIRE_GPU=1 turns a skipped GPU test into a failed run. Without a usable GPU (CI),
# gpu_tests exits 0 with its SKIPPING line, and with REQUIRE_GPU=1 it exits non-zero with a
# line naming the skipped tests; with a GPU it passes either way, because nothing skips.
source "$(dirname "$0")/common.bash"
GPU_TESTS=$BINDIR/gpu_tests
if [[ ! -x $GPU_TESTS ]]; then
  echo "  skipped: no $GPU_TESTS (built only with the CUDA backend: nvcc, WITH_CUDA=1)"
  exit 0
fi

rc=0
env -u REQUIRE_GPU "$GPU_TESTS" --gtest_brief=1 >"$WORK/plain.txt" 2>&1 || rc=$?
[[ $rc -eq 0 ]] || { cat "$WORK/plain.txt" >&2; fail "gpu_tests without REQUIRE_GPU exited $rc"; }
rc=0
REQUIRE_GPU=1 "$GPU_TESTS" --gtest_brief=1 >"$WORK/required.txt" 2>&1 || rc=$?

if grep -q "^gpu_tests: SKIPPING every GPU test (no usable GPU: " "$WORK/plain.txt"; then
  [[ $rc -ne 0 ]] || { cat "$WORK/required.txt" >&2; fail "REQUIRE_GPU=1 gpu_tests exited 0 with every test skipped"; }
  line=$(grep "^gpu_tests: FAIL: REQUIRE_GPU=1 but [1-9][0-9]* of [0-9]* tests skipped (no usable GPU: " \
    "$WORK/required.txt") || { cat "$WORK/required.txt" >&2; fail "no line saying why REQUIRE_GPU=1 failed"; }
  check "no GPU: plain run exits 0 ($(head -1 "$WORK/plain.txt" | cut -c1-60)...)"
  check "REQUIRE_GPU=1 exits $rc: ${line:0:110}..."
  rc=0
  REQUIRE_GPU=0 "$GPU_TESTS" --gtest_brief=1 >/dev/null 2>&1 || rc=$?
  [[ $rc -eq 0 ]] || fail "REQUIRE_GPU=0 gpu_tests exited $rc (0 means not required)"
  check "REQUIRE_GPU=0 is the same as unset: exit 0"
else
  [[ $rc -eq 0 ]] || { cat "$WORK/required.txt" >&2; fail "REQUIRE_GPU=1 gpu_tests exited $rc on a GPU machine"; }
  ! grep -q "REQUIRE_GPU" "$WORK/required.txt" || { cat "$WORK/required.txt" >&2; fail "a test skipped on a GPU machine"; }
  check "GPU machine: REQUIRE_GPU=1 gpu_tests passes with nothing skipped"
fi
