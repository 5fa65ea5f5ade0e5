# estimator/: dlh-estimate and the planning that sbatch runs, in folders by part:
#   model/      per-sample costs (features), the step-time model and its calibration file,
#               the communication model and its fit, the whole-job time, wave scaling, the
#               engines' fingerprints
#   cluster/    the cluster description, and its draft from sinfo
#   observe/    the observation store read back: records of earlier jobs correct the
#               speeds and phases (launcher/observe/ writes them)
#   recommend/  the recommender (speeds, candidates, time and energy, the choice), planning
#               from a program's profile, the decision's HTML page
#   plan/       the planning core of `--dlh-auto`: its option parsing, the live node state,
#               the plan and its Slurm options; below both front ends (the SPANK plugin and
#               `dlh-estimate slurm-plan`, which share/slurm/cli_filter.lua runs)
#   calibrate/  the calibration runner: times real steps with the launcher's neural-network
#               library (libdlh_nn.a: no MPI, HDF5 or CUDA), or through dlh-launch, or in Slurm
#               jobs (slurm_calibration: the pure part of `calibrate --slurm`)
#   replay/     `dlh-estimate replay`: a job trace through the recommender on a simulated
#               cluster (its own FIFO + EASY-backfill scheduler), one run per policy
#   cli/        dlh-estimate: one file per command group, and main
# Libraries: libdlh_estimator.a (model, cluster, recommend: pure; linked by the SPANK plugin),
# libdlh_plan.a (plan: pure, no Slurm library, linked by the plugin and dlh-estimate),
# libdlh_calibrate.a (calibrate), libdlh_replay.a (replay: dlh-estimate and the unit tests only,
# never the SPANK plugin).
ESTIMATOR_SRCS := $(wildcard estimator/model/*.cpp estimator/cluster/*.cpp \
    estimator/recommend/*.cpp estimator/observe/*.cpp)
PLAN_SRCS := $(wildcard estimator/plan/*.cpp)
CALIBRATE_SRCS := $(wildcard estimator/calibrate/*.cpp)
REPLAY_SRCS := $(wildcard estimator/replay/*.cpp)
ESTIMATE_CLI_SRCS := $(wildcard estimator/cli/*.cpp)
ESTIMATOR_LIB := $(LIBDIR)/libdlh_estimator.a
PLAN_LIB := $(LIBDIR)/libdlh_plan.a
CALIBRATE_LIB := $(LIBDIR)/libdlh_calibrate.a
REPLAY_LIB := $(LIBDIR)/libdlh_replay.a
$(ESTIMATOR_LIB): $(ESTIMATOR_SRCS:%.cpp=$(OBJDIR)/%.o)
$(PLAN_LIB): $(PLAN_SRCS:%.cpp=$(OBJDIR)/%.o)
$(CALIBRATE_LIB): $(CALIBRATE_SRCS:%.cpp=$(OBJDIR)/%.o)
$(REPLAY_LIB): $(REPLAY_SRCS:%.cpp=$(OBJDIR)/%.o)

# Only OpenBLAS and Boost: the estimator needs no MPI or HDF5.
ESTIMATE_LIBS = $(shell $(PKG_CONFIG) --libs openblas) -lboost_program_options

$(BINDIR)/dlh-estimate: $(ESTIMATE_CLI_SRCS:%.cpp=$(OBJDIR)/%.o) $(REPLAY_LIB) $(CALIBRATE_LIB) $(PLAN_LIB) \
    $(ESTIMATOR_LIB) $(OBSERVE_LIB) $(NN_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  LD    %s\n' $@
	$(Q)$(CXX) $(LDFLAGS) -Wl,--as-needed $^ $(ESTIMATE_LIBS) -o $@

INSTALL_BINS += $(BINDIR)/dlh-estimate
all: $(ESTIMATOR_LIB) $(PLAN_LIB) $(BINDIR)/dlh-estimate
estimator: $(BINDIR)/dlh-estimate
.PHONY: estimator

# The engines' fingerprints (estimator/model/engine_fingerprint.hpp): a hash of what a
# calibration's timed step runs. The object depends on those sources, so any change to them
# rebuilds it and marks older calibrations as measured with another engine.
# The CPU engine's: launcher/nn/ (layers, thread pool, optimizer), and what a training step of
# dlh-launch runs around them: the CPU engine (launcher/engine/cpu_engine.cpp, engine.hpp),
# the gradient allreduce and its transports (launcher/comm/) and the trainer's step loop
# (launcher/train/). Issue 40: the hash of launcher/nn/ alone stayed the same while the code
# around the step changed.
# Not what runs only before the first step or after the last, or between steps as a phase
# of its own that the plan prices apart: the reading of DLH_PLAN (plan.cpp, plan.hpp; issue
# 41 changed it, for node lists as hostlists), the run's start and resume (trainer_start.cpp,
# trainer_resume.cpp), its evaluations (trainer_eval.cpp), its end, summary and observation
# record (trainer_end.cpp, trainer_observe.cpp), the learning-rate tools (lr_*), and the
# Trainer's declarations (trainer_impl.hpp: its members, prototypes and clock and signal
# helpers; a step's work is in the .cpp files, and the header says to keep it there). A
# record that gains a field must not void every shipped calibration (issue 40: the first
# evaluation's seconds, the steps after the first epoch): each calibration also records
# each file's hash, and is stale only where a file of this list differs
# (engine_fingerprint.hpp).
CPU_OUTSIDE_STEP_SRCS := launcher/train/plan.cpp launcher/train/plan.hpp \
    launcher/train/trainer_start.cpp launcher/train/trainer_resume.cpp \
    launcher/train/trainer_eval.cpp launcher/train/trainer_end.cpp \
    launcher/train/trainer_observe.cpp launcher/train/trainer_impl.hpp \
    $(wildcard launcher/train/lr_*.cpp launcher/train/lr_*.hpp)
CPU_ENGINE_SRCS := $(sort $(filter-out $(CPU_OUTSIDE_STEP_SRCS), \
    $(wildcard launcher/nn/*.cpp launcher/nn/*.hpp launcher/nn/layers/*.cpp \
    launcher/nn/layers/*.hpp launcher/engine/cpu_engine.cpp launcher/engine/engine.hpp \
    launcher/comm/*.cpp launcher/comm/*.hpp launcher/train/*.cpp launcher/train/*.hpp)))
# The same sources run at another speed when compiled otherwise: the CPU fingerprint also
# hashes the compiler flags as make sees them (CXXFLAGS: -march, -ffast-math, another -O
# given by hand all change a step's time) and the compiler's version line. The flags live in
# a stamp file rewritten only when they change, so that the object rebuilds then (make tracks
# files, not variables). A test build (DEBUG=1's -O0, SANITIZE's -O1 and instrumentation)
# counts as the shipped build (RELEASE_OPTFLAGS in place of OPTFLAGS, no SANITIZE_FLAGS): it
# is for tests, which read the shipped calibrations, and never for timing or planning jobs;
# with its own fingerprint every shipped calibration would read as stale in make
# check-sanitize. Which OpenBLAS kernels run (its core type) is a fact of the machine, not of
# the build: the calibration's probe records it (launcher/probe/host_probe.hpp) and
# check-calibration compares it.
CPU_BUILD_FLAGS := $(strip $(RELEASE_OPTFLAGS) $(filter-out $(OPTFLAGS) $(SANITIZE_FLAGS), \
    $(CXXFLAGS))) | $(shell $(CXX) --version 2>/dev/null | head -1)
CPU_FLAGS_STAMP := $(OBJDIR)/estimator/model/engine_build_flags.txt
$(shell mkdir -p $(dir $(CPU_FLAGS_STAMP)) && \
  { [ "$$(cat $(CPU_FLAGS_STAMP) 2>/dev/null)" = '$(CPU_BUILD_FLAGS)' ] || \
    printf '%s\n' '$(CPU_BUILD_FLAGS)' >$(CPU_FLAGS_STAMP); })
# A GPU step runs launcher/engine/cuda/ and, of launcher/nn/, only what the headers it
# includes declare or inline (the dropout kernel's counter-based generator in random.hpp).
# The CPU layers (launcher/nn/layers/, headers and .cpp files alike) are not in its
# fingerprint: the GPU engine includes none of them, so making them faster does not mark a
# GPU calibration as measured with another engine. Nor is the backend's device probe
# (probe.cpp, probe_api.hpp): it measures the GPU, no step runs it; nor a pipeline's stage
# (cuda_pipeline.*): a calibration times whole networks. Around the device's work the host
# runs the same step as on the CPU (issue 40: a GPU step is max(host, device)): the trainer's
# step loop, the per-step control sums and the engine interface (the CPU list's files of
# launcher/train/, launcher/comm/ and engine.hpp), built with the same flags, and the
# kernels built by nvcc with its version and the backend's flags (CUDA_FLAGS_STAMP).
CUDA_ENGINE_SRCS := $(sort $(filter-out launcher/engine/cuda/probe.cpp \
    launcher/engine/cuda/probe_api.hpp launcher/engine/cuda/cuda_pipeline.cpp \
    launcher/engine/cuda/cuda_pipeline.hpp,$(wildcard launcher/nn/*.hpp \
    launcher/engine/cuda/*.cu launcher/engine/cuda/*.cpp launcher/engine/cuda/*.hpp)) \
    $(filter launcher/train/% launcher/comm/% launcher/engine/engine.hpp,$(CPU_ENGINE_SRCS)))
CUDA_BUILD_FLAGS := $(CPU_BUILD_FLAGS) | $(CUDA_ARCH_FLAGS) | \
    $(if $(filter 1,$(WITH_CUDA)),$(shell $(NVCC) --version 2>/dev/null | tail -1),no nvcc)
CUDA_FLAGS_STAMP := $(OBJDIR)/estimator/model/engine_cuda_build_flags.txt
$(shell mkdir -p $(dir $(CUDA_FLAGS_STAMP)) && \
  { [ "$$(cat $(CUDA_FLAGS_STAMP) 2>/dev/null)" = '$(CUDA_BUILD_FLAGS)' ] || \
    printf '%s\n' '$(CUDA_BUILD_FLAGS)' >$(CUDA_FLAGS_STAMP); })
Fingerprint = $(shell cat $(1) | sha256sum | cut -c1-12)
# Each file's own hash besides ("path=hash,...", the flags stamp as "build-flags"): a
# calibration records them, so that a later build whose step files are all the same reads
# it as this engine's even where the list of files changed (engine_fingerprint.hpp).
SourceHashes = $(shell sha256sum $(1) | awk '{printf "%s=%s,", $$2, substr($$1, 1, 12)}')
ENGINE_FINGERPRINT_DEFINES = \
    -DDLH_CPU_ENGINE_FINGERPRINT=\"$(call Fingerprint,$(CPU_ENGINE_SRCS) $(CPU_FLAGS_STAMP))\" \
    -DDLH_CPU_ENGINE_SOURCES=\"$(call SourceHashes,$(CPU_ENGINE_SRCS))build-flags=$(call \
      Fingerprint,$(CPU_FLAGS_STAMP))\" \
    -DDLH_CUDA_ENGINE_FINGERPRINT=\"$(call Fingerprint,$(CUDA_ENGINE_SRCS) $(CUDA_FLAGS_STAMP))\" \
    -DDLH_CUDA_ENGINE_SOURCES=\"$(call SourceHashes,$(CUDA_ENGINE_SRCS))build-flags=$(call \
      Fingerprint,$(CUDA_FLAGS_STAMP))\"
ENGINE_FINGERPRINT_OBJS := $(OBJDIR)/estimator/model/engine_fingerprint.o
# This file too: a change to the lists above changes the fingerprints' values.
$(ENGINE_FINGERPRINT_OBJS): $(CPU_ENGINE_SRCS) $(CUDA_ENGINE_SRCS) $(CPU_FLAGS_STAMP) \
    $(CUDA_FLAGS_STAMP) estimator/module.mk
$(ENGINE_FINGERPRINT_OBJS): override CPPFLAGS += $(ENGINE_FINGERPRINT_DEFINES)
# The CUDA backend's targets ("sm_80 sm_90 compute_90", from CUDA_ARCH_FLAGS), so that the
# planner leaves out GPU types the engine this build makes cannot run (cuda_targets.hpp).
CUDA_TARGETS_DEFINE = -DDLH_CUDA_TARGETS="\"$(strip $(patsubst code=%,%,\
    $(filter code=%,$(subst $(comma), ,$(CUDA_ARCH_FLAGS)))))\""
CUDA_TARGETS_OBJS := $(OBJDIR)/estimator/model/cuda_targets.o
$(CUDA_TARGETS_OBJS): launcher/engine/cuda/module.mk
$(CUDA_TARGETS_OBJS): override CPPFLAGS += $(CUDA_TARGETS_DEFINE)
