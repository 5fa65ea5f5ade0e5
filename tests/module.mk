# tests/: unit (no MPI processes), mpi (under mpirun with 2, 3 and 4 ranks), scripts
# (whole binaries end to end: kill-and-resume, bad input); util/ holds headers the C++
# tests share (TempDir), scripts/common.bash the shell helpers.
UNIT_SRCS := $(wildcard tests/unit/*_test.cpp)
UNIT_BIN := $(BINDIR)/unit_tests
MPI_TEST_SRCS := $(wildcard tests/mpi/*_mpitest.cpp) tests/mpi/mpi_main.cpp
MPI_TEST_BIN := $(BINDIR)/mpi_tests
GTEST_LIBS := $(shell $(PKG_CONFIG) --libs gtest 2>/dev/null || echo -lgtest)

# A stand-in for NVIDIA's libnvidia-ml.so.1 (tests/fixtures/fake_nvml.c) that energy_test.cpp
# opens through $DLH_NVML_LIBRARY from the lib folder beside bin/: the NVML meter is tested
# through a real dlopen on machines without a GPU. Not linked into anything.
FAKE_NVML := $(LIBDIR)/libdlh_fake_nvml.so
$(FAKE_NVML): tests/fixtures/fake_nvml.c
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  CC    %s\n' $@
	$(Q)$(CC) -std=c11 -O1 -Wall -Wextra -fPIC -shared $< -o $@

# The test sources themselves compile with -Og (the last -O wins): half of -O3's compile
# time (tests/unit/recommender_test.cpp: 6.3 s against 12.2 s), while the code under test
# comes from the libraries, built as they ship. DEBUG=1 keeps -O0.
TEST_OBJS := $(UNIT_SRCS:%.cpp=$(OBJDIR)/%.o) $(MPI_TEST_SRCS:%.cpp=$(OBJDIR)/%.o)
ifneq ($(DEBUG),1)
TEST_OPTFLAGS := -Og
$(TEST_OBJS): override CXXFLAGS += $(TEST_OPTFLAGS)
endif
ifeq ($(PCH),1)
$(eval $(call pch_rule,test,tests/util/precompiled_test.hpp,$(TEST_OPTFLAGS)))
$(eval $(call pch_objs,test,$(TEST_OBJS)))
endif

$(UNIT_BIN): $(UNIT_SRCS:%.cpp=$(OBJDIR)/%.o) $(PLUGIN_LIB) $(PLAN_LIB) $(REPLAY_LIB) $(CALIBRATE_LIB) $(ESTIMATOR_LIB) $(LAUNCH_LIB) \
    $(REPORT_LIB) $(NN_LIB) $(COMMON_LIB) | $(FAKE_NVML)
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  LD    %s\n' $@
	$(Q)$(CXX) $(LDFLAGS) $^ $(GTEST_LIBS) -lgtest_main $(DEP_LIBS) -o $@

$(MPI_TEST_BIN): $(MPI_TEST_SRCS:%.cpp=$(OBJDIR)/%.o) $(LAUNCH_LIB) $(NN_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  LD    %s\n' $@
	$(Q)$(CXX) $(LDFLAGS) $(WAIT_NAP_LDFLAGS) $^ $(GTEST_LIBS) $(DEP_LIBS) -o $@

# tests/gpu/: the GPU layers and kernels against the CPU engine, built with the CUDA backend.
# Every test skips, saying why, on a machine without a usable GPU (CI has none);
# REQUIRE_GPU=1 (share/gpu/gpu-check.sh, on a GPU machine) makes any skip a failure.
ifeq ($(WITH_CUDA),1)
GPU_TEST_SRCS := $(wildcard tests/gpu/*.cpp)
GPU_TEST_BIN := $(BINDIR)/gpu_tests
ifneq ($(DEBUG),1)
$(GPU_TEST_SRCS:%.cpp=$(OBJDIR)/%.o): override CXXFLAGS += -Og
endif
$(OBJDIR)/tests/gpu/%.o: tests/gpu/%.cpp
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  CXX   %s\n' $<
	$(Q)$(CXX) $(CPPFLAGS) -isystem $(CUDA_HOME)/include $(DEP_CFLAGS) $(CXXFLAGS) -MMD -MP -c $< -o $@

$(GPU_TEST_BIN): $(GPU_TEST_SRCS:%.cpp=$(OBJDIR)/%.o) $(CUDA_OBJS) $(LAUNCH_LIB) $(NN_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  LD    %s\n' $@
	$(Q)$(CXX) $(LDFLAGS) $^ $(GTEST_LIBS) $(CUDA_LIBS) $(DEP_LIBS) -o $@
tests: $(GPU_TEST_BIN) $(CUDA_BACKEND)
# These two ask gpu_tests whether this machine has a usable GPU: it must be built first.
test-script/tests/scripts/require_gpu.sh test-script/tests/scripts/device_cli.sh: $(GPU_TEST_BIN)
check-gpu: $(GPU_TEST_BIN)
	$(Q)$(GPU_TEST_BIN) --gtest_brief=1
else
check-gpu:
	@echo "gpu tests: not built (no nvcc at $(NVCC); WITH_CUDA=0)"
endif

# Open MPI refuses root and more ranks than cores without these; a rank waiting in MPI yields
# its core (tests/scripts/common.bash says why).
MPIRUN ?= mpirun
MPIRUN_ENV := OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1

tests: $(UNIT_BIN) $(MPI_TEST_BIN) $(BINDIR)/dlh-launch $(BINDIR)/dlh-data $(BINDIR)/dlh-estimate \
    $(BINDIR)/dlh-report $(PLUGIN_SO)

# UNIT_FILTER=Suite.*:Other.*: only those tests (gtest's --gtest_filter; make check-tsan).
UNIT_FILTER ?=
check-unit: $(UNIT_BIN)
	$(Q)$(UNIT_BIN) --gtest_brief=1 $(if $(UNIT_FILTER),--gtest_filter='$(UNIT_FILTER)')

check-mpi: $(MPI_TEST_BIN)
	$(Q)for np in 2 3 4; do echo "== mpi tests, $$np ranks"; \
	  $(MPIRUN_ENV) $(MPIRUN) -np $$np $(MPI_TEST_BIN) --gtest_color=no --gtest_brief=1 || exit 1; done

check-scripts: $(BINDIR)/dlh-launch $(BINDIR)/dlh-data $(BINDIR)/dlh-estimate $(BINDIR)/dlh-report
	$(Q)for t in tests/scripts/*.sh; do echo "== $$t"; s=$$SECONDS; \
	  BINDIR=$(BINDIR) bash $$t || { echo "FAILED: $$t"; exit 1; }; echo "   ($$((SECONDS - s)) s)"; done

# tests/slurm/: on a real local Slurm cluster (share/slurm/start-cluster.sh; needs root,
# slurm-wlm and munge, which install-deps.sh build installs). Part of `make check`. Without
# root or Slurm each test skips with one line; REQUIRE_SLURM=1 (.ci/run) makes that a failure.
# Each test's time follows its name, so a slow one shows in CI's log.
check-slurm: $(PLUGIN_SO) $(BINDIR)/dlh-launch $(BINDIR)/dlh-estimate
	$(Q)for t in tests/slurm/*.sh; do echo "== $$t"; s=$$SECONDS; \
	  BINDIR=$(BINDIR) bash $$t || { echo "FAILED: $$t"; exit 1; }; echo "   ($$((SECONDS - s)) s)"; done

# The faults on namespace hosts alone (about 3.5 minutes), to run them again after a change.
check-faults: $(PLUGIN_SO) $(BINDIR)/dlh-launch $(BINDIR)/dlh-estimate
	$(Q)BINDIR=$(BINDIR) bash tests/slurm/faults_test.sh

.PHONY: tests check-unit check-mpi check-scripts check-slurm check-faults check-gpu

# ---- make check: every test a target of its own, side by side ------------------------------
# The tests share nothing: each script makes its own temporary folder, each Slurm test its
# own local cluster on free ports, and the unit tests split into gtest shards. So `make
# check` runs them as targets of one parallel make, CHECK_JOBS at a time, each test's lines
# kept together (--output-sync) and followed by its time (tests/run_test.sh). Each test
# depends on what it runs, not on the whole build, so the Slurm tests (mostly waiting: for
# jobs, timeouts and faults) start as soon as the programs are linked, while the test
# binaries still compile. SLOW_TESTS start first, longest first (measured 2026-11-28 on 2
# cores, side by side), so that the short tests fill the time around them.
SCRIPT_TESTS := $(sort $(wildcard tests/scripts/*.sh))
SLURM_TESTS := $(sort $(wildcard tests/slurm/*.sh))
SLOW_TESTS := tests/slurm/faults_test.sh tests/scripts/estimate_cli.sh \
    tests/slurm/stall_requeue_test.sh tests/scripts/stall_defaults.sh \
    tests/scripts/kill_resume.sh tests/slurm/train_test.sh tests/scripts/torch_spec.sh \
    tests/slurm/suggest_sbatch_test.sh \
    tests/scripts/balance.sh tests/scripts/resnet.sh tests/scripts/run_cmd.sh \
    tests/slurm/run_torch_test.sh tests/slurm/mixed_shares_test.sh \
    tests/scripts/calibrate_cuda.sh tests/scripts/bad_input.sh
UNIT_SHARDS ?= 2
UNIT_SHARD_TARGETS := $(addprefix test-unit/,$(shell seq 0 $$(($(UNIT_SHARDS) - 1))))
MPI_RANK_COUNTS := 2 3 4
# What the script and Slurm tests run: the programs, the plugin, the CUDA backend where it is
# built, and the man pages (module_install.sh reads them after `make install`).
TEST_PROGRAMS := $(BINDIR)/dlh-launch $(BINDIR)/dlh-data $(BINDIR)/dlh-estimate \
    $(BINDIR)/dlh-report $(PLUGIN_SO) $(if $(filter 1,$(WITH_CUDA)),$(CUDA_BACKEND)) man

test-unit/%: $(UNIT_BIN) FORCE
	$(Q)GTEST_TOTAL_SHARDS=$(UNIT_SHARDS) GTEST_SHARD_INDEX=$* bash tests/run_test.sh \
	  "unit tests, shard $* of $(UNIT_SHARDS)" $(UNIT_BIN) --gtest_brief=1 \
	  $(if $(UNIT_FILTER),--gtest_filter='$(UNIT_FILTER)')
test-mpi/%: $(MPI_TEST_BIN) FORCE
	$(Q)bash tests/run_test.sh "mpi tests, $* ranks" env $(MPIRUN_ENV) $(MPIRUN) -np $* \
	  $(MPI_TEST_BIN) --gtest_color=no --gtest_brief=1
test-script/%: $(TEST_PROGRAMS) FORCE
	$(Q)BINDIR=$(BINDIR) bash tests/run_test.sh $* bash $*
FORCE:

# What `make check` runs side by side: the plain build runs every tier; a sanitized one
# leaves out the Slurm tests and check-abi (see the Makefile's check).
CHECK_TESTS := $(SLOW_TESTS) $(filter-out $(SLOW_TESTS),$(SLURM_TESTS) $(SCRIPT_TESTS))
ifneq ($(SANITIZE),)
CHECK_TESTS := $(filter-out $(SLURM_TESTS),$(CHECK_TESTS))
endif
# In make's order: the longest test, then the unit, MPI and GPU tests (their binaries compile
# while it waits on its faults), then the other tests, longest first.
CHECK_TARGETS := $(addprefix test-script/,$(firstword $(CHECK_TESTS))) $(UNIT_SHARD_TARGETS) \
    $(addprefix test-mpi/,$(MPI_RANK_COUNTS)) check-gpu $(NCCL_STANDIN_CHECKS) \
    $(if $(SANITIZE),,check-abi) check-fuzz-replay \
    $(addprefix test-script/,$(wordlist 2,$(words $(CHECK_TESTS)),$(CHECK_TESTS)))
check-parallel: $(CHECK_TARGETS)

# make check-quick: the inner loop, in well under 3 minutes once the tree is built: the unit
# tests, the MPI tests on 2 ranks and the script tests that take seconds, side by side.
QUICK_TESTS := $(filter $(addprefix tests/scripts/,layering.sh doc_figures.sh leftovers.sh \
    data_cli.sh help_texts.sh device_cli.sh bench_modes.sh bench_mixed_report.sh bench_memory_report.sh mixed_split.sh lr_find.sh data_import_numpy.sh \
    module_install.sh),$(SCRIPT_TESTS))
check-quick-parallel: $(UNIT_SHARD_TARGETS) test-mpi/2 $(addprefix test-script/,$(QUICK_TESTS))

.PHONY: check-parallel check-quick-parallel FORCE
