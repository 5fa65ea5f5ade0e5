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

$(UNIT_BIN): $(UNIT_SRCS:%.cpp=$(OBJDIR)/%.o) $(PLUGIN_LIB) $(PLAN_LIB) $(CALIBRATE_LIB) $(ESTIMATOR_LIB) $(LAUNCH_LIB) \
    $(REPORT_LIB) $(NN_LIB) $(COMMON_LIB) | $(FAKE_NVML)
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  LD    %s\n' $@
	$(Q)$(CXX) $(LDFLAGS) $^ $(GTEST_LIBS) -lgtest_main $(DEP_LIBS) -o $@

$(MPI_TEST_BIN): $(MPI_TEST_SRCS:%.cpp=$(OBJDIR)/%.o) $(LAUNCH_LIB) $(NN_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  LD    %s\n' $@
	$(Q)$(CXX) $(LDFLAGS) $^ $(GTEST_LIBS) $(DEP_LIBS) -o $@

# tests/gpu/: the GPU layers and kernels against the CPU engine, built with the CUDA backend.
# Every test skips, saying why, on a machine without a usable GPU (CI has none);
# REQUIRE_GPU=1 (share/gpu/gpu-check.sh, on a GPU machine) makes any skip a failure.
ifeq ($(WITH_CUDA),1)
GPU_TEST_SRCS := $(wildcard tests/gpu/*.cpp)
GPU_TEST_BIN := $(BINDIR)/gpu_tests
$(OBJDIR)/tests/gpu/%.o: tests/gpu/%.cpp
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  CXX   %s\n' $<
	$(Q)$(CXX) $(CPPFLAGS) -isystem $(CUDA_HOME)/include $(DEP_CFLAGS) $(CXXFLAGS) -MMD -MP -c $< -o $@

$(GPU_TEST_BIN): $(GPU_TEST_SRCS:%.cpp=$(OBJDIR)/%.o) $(CUDA_OBJS) $(LAUNCH_LIB) $(NN_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  LD    %s\n' $@
	$(Q)$(CXX) $(LDFLAGS) $^ $(GTEST_LIBS) $(CUDA_LIBS) $(DEP_LIBS) -o $@
tests: $(GPU_TEST_BIN) $(CUDA_BACKEND)
check-gpu: $(GPU_TEST_BIN)
	$(Q)$(GPU_TEST_BIN) --gtest_brief=1
else
check-gpu:
	@echo "gpu tests: not built (no nvcc at $(NVCC); WITH_CUDA=0)"
endif

# Open MPI refuses root and more ranks than cores without these.
MPIRUN ?= mpirun
MPIRUN_ENV := OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1

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
