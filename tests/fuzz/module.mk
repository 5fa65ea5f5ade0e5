# tests/fuzz/: libFuzzer targets for the inputs a user or a site hands DLH (tests/fuzz/README.md).
# Built with clang 14 (Debian's clang++-14: libFuzzer, ASan and UBSan) into $(BUILDDIR)/fuzz,
# never with the g++ objects: the project sources a target needs are compiled again, with
# the fuzz flags, into $(BUILDDIR)/fuzz/obj.
#
#   make fuzz                         builds every target and runs each for FUZZ_SECONDS
#   make fuzz FUZZ_TARGETS=spec       only some targets (names as in tests/fuzz/*_fuzz.cpp)
#   make fuzz-build                   builds them only
#
# A fuzzing run takes FUZZ_SECONDS per target (default 60) and is not part of `make check`;
# .ci/run fuzzes every target for a bounded time. make check replays every corpus instead
# (check-fuzz-replay, below), with the project's compiler: seconds, no clang.
FUZZ_CXX ?= clang++-14
FUZZ_SECONDS ?= 60
FUZZ_DIR := $(BUILDDIR)/fuzz
FUZZ_OBJDIR := $(FUZZ_DIR)/obj
FUZZ_ALL := $(patsubst tests/fuzz/%_fuzz.cpp,%,$(wildcard tests/fuzz/*_fuzz.cpp))
# checkpoint_bytes (raw bytes through HDF5's own parser) also finds HDF5's bugs: run.sh
# judges each of its crashes by where it happened (tests/fuzz/README.md, "HDF5").
FUZZ_TARGETS ?= $(FUZZ_ALL)

# UBSan findings abort (they would only be printed otherwise, and libFuzzer would go on).
FUZZ_SAN := -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
FUZZ_CXXFLAGS := -std=c++17 -O1 -g -fno-omit-frame-pointer -Wall -Wextra -Wshadow -pthread \
  $(FUZZ_SAN)

# The project sources the targets call, all in one archive: each target links only the
# objects it needs.
FUZZ_LIB_SRCS := common/spec.cpp common/json_parse.cpp common/file_text.cpp \
  common/duration.cpp common/atomic_file.cpp \
  estimator/cluster/cluster.cpp estimator/model/features.cpp estimator/model/time_model.cpp \
  estimator/plan/options.cpp launcher/train/plan.cpp launcher/observe/record.cpp \
  launcher/storage/checkpoint_format.cpp launcher/storage/checkpoint_save.cpp \
  launcher/storage/checkpoint_load.cpp launcher/storage/checkpoint_dir.cpp launcher/storage/h5.cpp \
  common/thread_cpu.cpp \
  common/svg_chart.cpp common/html_page.cpp \
  launcher/report/run_data.cpp launcher/report/headline.cpp launcher/report/report_html.cpp \
  launcher/report/report_results.cpp \
  launcher/data/numpy_file.cpp launcher/data/csv_file.cpp \
  launcher/data/stage.cpp launcher/data/owned_folder.cpp
# The planning core (plan_core, sinfo): the plugin's planning and everything it calls.
FUZZ_LIB_SRCS += $(filter-out $(FUZZ_LIB_SRCS),$(sort $(PLAN_SRCS) $(ESTIMATOR_SRCS) \
  $(CALIBRATE_SRCS) $(wildcard launcher/observe/*.cpp common/*.cpp)))
FUZZ_LIB := $(FUZZ_DIR)/libdlh_fuzz.a
# The engines' fingerprints as the build's (estimator/module.mk), so that the shipped
# calibrations read as they do in dlh-estimate.
$(FUZZ_OBJDIR)/estimator/model/engine_fingerprint.o: $(CPU_ENGINE_SRCS) $(CUDA_ENGINE_SRCS) \
    $(CPU_FLAGS_STAMP) $(CUDA_FLAGS_STAMP) estimator/module.mk
$(FUZZ_OBJDIR)/estimator/model/engine_fingerprint.o: override CPPFLAGS += \
    $(ENGINE_FINGERPRINT_DEFINES)
# The CUDA backend's targets, as the build's: the planner leaves out the same GPU types.
$(FUZZ_OBJDIR)/estimator/model/cuda_targets.o: launcher/engine/cuda/module.mk
$(FUZZ_OBJDIR)/estimator/model/cuda_targets.o: override CPPFLAGS += $(CUDA_TARGETS_DEFINE)
# HDF5 (openmpi variant, as the launcher), zlib (checkpoint checksums), OpenBLAS (Eigen in
# the time model), libzip (.npz); --as-needed drops them from the targets that do not use them.
FUZZ_LIBS = -Wl,--as-needed $(shell $(PKG_CONFIG) --libs hdf5-openmpi ompi-c openblas libzip) -lz

# Without the shipped build's -DNDEBUG: a header's assert (nlohmann-json's, Eigen's) that an
# input trips is a finding.
$(FUZZ_OBJDIR)/%.o: %.cpp | fuzz-cxx
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  FUZZCXX %s\n' $<
	$(Q)$(FUZZ_CXX) $(filter-out $(RELEASE_CPPFLAGS),$(CPPFLAGS)) $(DEP_CFLAGS) $(FUZZ_CXXFLAGS) \
	  -MMD -MP -c $< -o $@

$(FUZZ_LIB): $(FUZZ_LIB_SRCS:%.cpp=$(FUZZ_OBJDIR)/%.o)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  AR    %s\n' $@
	$(Q)rm -f $@ && ar rcs $@ $^

$(FUZZ_DIR)/%_fuzz: $(FUZZ_OBJDIR)/tests/fuzz/%_fuzz.o $(FUZZ_LIB)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  LD    %s\n' $@
	$(Q)$(FUZZ_CXX) $(FUZZ_SAN) -pthread $^ $(FUZZ_LIBS) -o $@

fuzz-cxx:
	@command -v $(FUZZ_CXX) >/dev/null || \
	  { echo "fuzz: no $(FUZZ_CXX) (Debian: apt-get install clang-14)"; exit 1; }

fuzz-build: $(FUZZ_TARGETS:%=$(FUZZ_DIR)/%_fuzz)

fuzz: fuzz-build
	$(Q)bash tests/fuzz/run.sh $(FUZZ_DIR) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

.PHONY: fuzz fuzz-build fuzz-cxx
.PRECIOUS: $(FUZZ_OBJDIR)/%.o

-include $(shell find $(FUZZ_OBJDIR) -name '*.d' 2>/dev/null)

# ---- the corpora replayed in make check (tests/fuzz/replay_main.cpp) -----------------------
# Each target's LLVMFuzzerTestOneInput under a name of its own, all in one program linked as
# the unit tests are: the project's compiler, flags and libraries (a sanitized build's too).
FUZZ_REPLAY_BIN := $(BINDIR)/fuzz_replay
FUZZ_REPLAY_OBJS := $(FUZZ_ALL:%=$(OBJDIR)/tests/fuzz/replay/%_fuzz.o) \
    $(OBJDIR)/tests/fuzz/replay/replay_main.o
$(OBJDIR)/tests/fuzz/replay/%_fuzz.o: tests/fuzz/%_fuzz.cpp
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  CXX   %s\n' $<
	$(Q)$(CXX) $(CPPFLAGS) $(DEP_CFLAGS) $(CXXFLAGS) -Og -DLLVMFuzzerTestOneInput=DlhFuzz_$* \
	  -MMD -MP -c $< -o $@
# Rebuilt when a target is added (a newer prerequisite).
$(OBJDIR)/tests/fuzz/replay/replay_main.o: tests/fuzz/replay_main.cpp $(wildcard tests/fuzz/*_fuzz.cpp)
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  CXX   %s\n' $<
	$(Q)$(CXX) $(CPPFLAGS) $(CXXFLAGS) -Og '-DDLH_FUZZ_TARGETS=$(foreach t,$(FUZZ_ALL),X($(t)))' \
	  -MMD -MP -c $< -o $@
$(FUZZ_REPLAY_BIN): $(FUZZ_REPLAY_OBJS) $(PLAN_LIB) $(CALIBRATE_LIB) $(ESTIMATOR_LIB) \
    $(LAUNCH_LIB) $(REPORT_LIB) $(NN_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  LD    %s\n' $@
	$(Q)$(CXX) $(LDFLAGS) $^ $(DEP_LIBS) -o $@
check-fuzz-replay: $(FUZZ_REPLAY_BIN)
	$(Q)bash tests/run_test.sh "fuzz corpora, replayed" $(FUZZ_REPLAY_BIN) tests/fuzz/corpus
.PHONY: check-fuzz-replay
