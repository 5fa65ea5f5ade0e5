# tests/nccl_standin/: libdlh_nccl_standin.so, the NCCL calls DLH makes on shared memory, so
# that several ranks run the GPU engine on one GPU and faults can be injected (see
# nccl_standin.cpp), and its tests. Built with the CUDA backend (it links the CUDA runtime for
# device memory); make check runs the tests on host memory with 1 to 4 ranks. Never installed.
# Included before tests/module.mk, whose CHECK_TARGETS takes NCCL_STANDIN_CHECKS.
ifeq ($(WITH_CUDA),1)
NCCL_STANDIN_LIB_SRCS := $(addprefix tests/nccl_standin/,nccl_standin.cpp collectives.cpp \
    shm_group.cpp fault.cpp)
NCCL_STANDIN := $(LIBDIR)/libdlh_nccl_standin.so
NCCL_STANDIN_TEST_BIN := $(BINDIR)/nccl_standin_tests

$(OBJDIR)/tests/nccl_standin/%.o: tests/nccl_standin/%.cpp
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  CXX   %s\n' $<
	$(Q)$(CXX) $(CPPFLAGS) -isystem $(CUDA_HOME)/include $(DEP_CFLAGS) $(CXXFLAGS) \
	  -fvisibility=hidden -MMD -MP -c $< -o $@

# The gate kernel that holds a stream until the worker is done (stream_gate.cu).
$(OBJDIR)/tests/nccl_standin/%.cu.o: tests/nccl_standin/%.cu
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  NVCC  %s\n' $<
	$(Q)$(NVCC) -std=c++17 -O2 $(CUDA_ARCH_FLAGS) -Xcompiler -fPIC,-Wall,-Wextra -c $< -o $@

# The tests themselves at -Og, as tests/module.mk's (the code under test keeps the build's).
ifneq ($(DEBUG),1)
$(OBJDIR)/tests/nccl_standin/standin_mpitest.o \
    $(OBJDIR)/tests/nccl_standin/grad_sync_logic_mpitest.o: override CXXFLAGS += -Og
endif

# Only NCCL's names (and the stand-in's test hook) are exported: with LD_PRELOAD they take
# the place of libnccl's.
$(NCCL_STANDIN): $(NCCL_STANDIN_LIB_SRCS:%.cpp=$(OBJDIR)/%.o) \
    $(OBJDIR)/tests/nccl_standin/stream_gate.cu.o
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  LD    %s\n' $@
	$(Q)$(CXX) -shared $(LDFLAGS) $^ -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart \
	  -lrt -o $@

# With the stand-in's own tests, the GPU engine's gradient sync (grad_sync_logic.hpp) on a host
# fake of the device: its NCCL communicator and checked calls come from the backend's objects.
$(NCCL_STANDIN_TEST_BIN): $(OBJDIR)/tests/nccl_standin/standin_mpitest.o \
    $(OBJDIR)/tests/nccl_standin/grad_sync_logic_mpitest.o $(OBJDIR)/tests/mpi/mpi_main.o \
    $(OBJDIR)/launcher/engine/cuda/nccl_comm.o $(OBJDIR)/launcher/engine/cuda/check.o \
    $(LAUNCH_LIB) $(NN_LIB) $(COMMON_LIB) $(NCCL_STANDIN)
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  LD    %s\n' $@
	$(Q)$(CXX) $(LDFLAGS) $(filter %.o %.a,$^) -L$(LIBDIR) -ldlh_nccl_standin \
	  -Wl,-rpath,'$$ORIGIN/../lib' $(GTEST_LIBS) $(DEP_LIBS) -o $@

tests: $(NCCL_STANDIN_TEST_BIN)
test-nccl-standin/%: $(NCCL_STANDIN_TEST_BIN) FORCE
	$(Q)bash tests/run_test.sh "NCCL stand-in, $* ranks" env $(MPIRUN_ENV) $(MPIRUN) -np $* \
	  $(NCCL_STANDIN_TEST_BIN) --gtest_color=no --gtest_brief=1
NCCL_STANDIN_CHECKS := $(addprefix test-nccl-standin/,1 2 3 4)
else
NCCL_STANDIN_CHECKS :=
endif
