# tests/fuzz/: libFuzzer targets for the inputs a user or a site hands DLH (tests/fuzz/README.md).
# Built with clang 14 (Debian's clang++-14: libFuzzer, ASan and UBSan) into $(BUILDDIR)/fuzz,
# never with the g++ objects: the project sources a target needs are compiled again, with
# the fuzz flags, into $(BUILDDIR)/fuzz/obj.
#
#   make fuzz                         builds every target and runs each for FUZZ_SECONDS
#   make fuzz FUZZ_TARGETS=spec       only some targets (names as in tests/fuzz/*_fuzz.cpp)
#   make fuzz-build                   builds them only
#
# Not part of `make check`: a run takes FUZZ_SECONDS per target (default 60).
FUZZ_CXX ?= clang++-14
FUZZ_SECONDS ?= 60
FUZZ_DIR := $(BUILDDIR)/fuzz
FUZZ_OBJDIR := $(FUZZ_DIR)/obj
FUZZ_ALL := $(patsubst tests/fuzz/%_fuzz.cpp,%,$(wildcard tests/fuzz/*_fuzz.cpp))
# checkpoint_bytes (raw bytes through HDF5's own parser) stops at HDF5's bugs, not ours
# (tests/fuzz/README.md, "HDF5"): run it by name.
FUZZ_TARGETS ?= $(filter-out checkpoint_bytes,$(FUZZ_ALL))

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
  launcher/data/numpy_file.cpp launcher/data/csv_file.cpp
FUZZ_LIB := $(FUZZ_DIR)/libdlh_fuzz.a
# HDF5 (openmpi variant, as the launcher), zlib (checkpoint checksums), OpenBLAS (Eigen in
# the time model), libzip (.npz); --as-needed drops them from the targets that do not use them.
FUZZ_LIBS = -Wl,--as-needed $(shell $(PKG_CONFIG) --libs hdf5-openmpi ompi-c openblas libzip) -lz

$(FUZZ_OBJDIR)/%.o: %.cpp | fuzz-cxx
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  FUZZCXX %s\n' $<
	$(Q)$(FUZZ_CXX) $(CPPFLAGS) $(DEP_CFLAGS) $(FUZZ_CXXFLAGS) -MMD -MP -c $< -o $@

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
