# estimator/: libdlh_estimator.a (pure: features, time model, cluster, communication and
# energy model, recommender; linked by the SPANK plugin), the calibration runner (times
# real steps with the launcher's neural-network library, libdlh_nn.a: no MPI, HDF5 or CUDA)
# and the dlh-estimate CLI.
ESTIMATE_MAIN := estimator/main_estimate.cpp
# `dlh-estimate slurm-plan` (share/slurm/cli_filter.lua) runs the plugin's planning code:
# it links libdlh_plugin.a (pure parts and dlsym only; no Slurm library).
SLURM_PLAN_CMD := estimator/slurm_plan_cmd.cpp
# `dlh-estimate cluster --from-slurm` runs sinfo (its pure part, cluster_from_slurm.cpp, is
# in the library).
CLUSTER_CMD := estimator/cluster_cmd.cpp
# `dlh-estimate calibrate --slurm` runs sinfo, sbatch, scontrol and scancel (its pure part,
# slurm_calibration.cpp, is in the library).
CALIBRATE_SLURM_CMD := estimator/calibrate_slurm_cmd.cpp
CALIBRATE_SRCS := $(filter-out $(CALIBRATE_SLURM_CMD),$(wildcard estimator/calibrate*.cpp))
ESTIMATOR_SRCS := $(filter-out $(ESTIMATE_MAIN) $(SLURM_PLAN_CMD) $(CLUSTER_CMD) \
    $(CALIBRATE_SLURM_CMD) $(CALIBRATE_SRCS),\
    $(wildcard estimator/*.cpp))
ESTIMATOR_LIB := $(LIBDIR)/libdlh_estimator.a
CALIBRATE_LIB := $(LIBDIR)/libdlh_calibrate.a
$(ESTIMATOR_LIB): $(ESTIMATOR_SRCS:%.cpp=$(OBJDIR)/%.o)
$(CALIBRATE_LIB): $(CALIBRATE_SRCS:%.cpp=$(OBJDIR)/%.o)

# Only OpenBLAS and Boost: the estimator needs no MPI or HDF5.
ESTIMATE_LIBS = $(shell $(PKG_CONFIG) --libs openblas) -lboost_program_options

$(BINDIR)/dlh-estimate: $(OBJDIR)/$(ESTIMATE_MAIN:.cpp=.o) $(OBJDIR)/estimator/slurm_plan_cmd.o \
    $(OBJDIR)/$(CLUSTER_CMD:.cpp=.o) $(OBJDIR)/$(CALIBRATE_SLURM_CMD:.cpp=.o) \
    $(CALIBRATE_LIB) $(LIBDIR)/libdlh_plugin.a $(ESTIMATOR_LIB) $(NN_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  LD    %s\n' $@
	$(Q)$(CXX) $(LDFLAGS) -Wl,--as-needed $^ $(ESTIMATE_LIBS) -o $@

INSTALL_BINS += $(BINDIR)/dlh-estimate
all: $(ESTIMATOR_LIB) $(BINDIR)/dlh-estimate
estimator: $(BINDIR)/dlh-estimate
.PHONY: estimator

# The engines' fingerprints (estimator/engine_fingerprint.hpp): a hash of the sources whose
# speed a calibration measures. The object depends on those sources, so any change to them
# rebuilds it and marks older calibrations as measured with another engine.
CPU_ENGINE_SRCS := $(sort $(wildcard launcher/nn/*.cpp launcher/nn/*.hpp launcher/nn/layers/*.cpp \
    launcher/nn/layers/*.hpp))
# A GPU step runs launcher/engine/cuda/ and, of launcher/nn/, only what the headers it
# includes declare or inline (the dropout kernel's counter-based generator in random.hpp).
# The CPU layers (launcher/nn/layers/, headers and .cpp files alike) are not in its
# fingerprint: the GPU engine includes none of them, so making them faster does not mark a
# GPU calibration as measured with another engine.
CUDA_ENGINE_SRCS := $(sort $(wildcard launcher/nn/*.hpp launcher/engine/cuda/*.cu \
    launcher/engine/cuda/*.cpp launcher/engine/cuda/*.hpp))
Fingerprint = $(shell cat $(1) | sha256sum | cut -c1-12)
ENGINE_FINGERPRINT_OBJS := $(OBJDIR)/estimator/engine_fingerprint.o \
    $(OBJDIR)/plugin-so/estimator/engine_fingerprint.o
# This file too: a change to the lists above changes the fingerprints' values.
$(ENGINE_FINGERPRINT_OBJS): $(CPU_ENGINE_SRCS) $(CUDA_ENGINE_SRCS) estimator/module.mk
$(ENGINE_FINGERPRINT_OBJS): override CPPFLAGS += \
    -DDLH_CPU_ENGINE_FINGERPRINT=\"$(call Fingerprint,$(CPU_ENGINE_SRCS))\" \
    -DDLH_CUDA_ENGINE_FINGERPRINT=\"$(call Fingerprint,$(CUDA_ENGINE_SRCS))\"
