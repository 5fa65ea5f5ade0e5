# launcher/: dlh-launch (MPI training) and dlh-data (data set import/generation), in
# sub-folders that read as the data flow. Two libraries:
#   libdlh_nn.a      nn/: tensors, the thread pool, layers, network, optimizer, named arrays;
#                    probe/: the device probe (sgemm and memory bandwidth at the engine's
#                    shapes; a GPU's through the CUDA backend, dlopen'ed). No MPI, HDF5 or
#                    CUDA: the calibration runner of dlh-estimate links it.
#   libdlh_launch.a  comm/ engine/ train/ storage/ data/ bench/ predict/ export/: everything that needs MPI
#                    or HDF5 (engine/cuda/ is the dlopen'ed backend: engine/cuda/module.mk).
#   libdlh_observe.a observe/'s records and store (no MPI, HDF5 or CUDA): also in
#                    libdlh_launch.a, and linked alone by dlh-estimate and the SPANK plugin,
#                    which read the store (estimator/observe/).
LAUNCH_MAINS := launcher/main_launch.cpp launcher/data/main_data.cpp
NN_SRCS := $(wildcard launcher/nn/*.cpp launcher/nn/layers/*.cpp launcher/probe/*.cpp)
LAUNCH_SRCS := $(filter-out $(LAUNCH_MAINS),$(wildcard $(addprefix launcher/, \
  $(addsuffix /*.cpp,comm watch engine train storage data bench run observe predict export))))
NN_LIB := $(LIBDIR)/libdlh_nn.a
LAUNCH_LIB := $(LIBDIR)/libdlh_launch.a
$(NN_LIB): $(NN_SRCS:%.cpp=$(OBJDIR)/%.o)
$(LAUNCH_LIB): $(LAUNCH_SRCS:%.cpp=$(OBJDIR)/%.o)
OBSERVE_SRCS := launcher/observe/record.cpp launcher/observe/store.cpp
OBSERVE_LIB := $(LIBDIR)/libdlh_observe.a
$(OBSERVE_LIB): $(OBSERVE_SRCS:%.cpp=$(OBJDIR)/%.o)

# watch/wait_nap.cpp's sched_yield: taken from the archive although nothing of dlh-launch's
# own calls for it, and exported, so that the MPI libraries' polls call it (wait_nap.hpp).
WAIT_NAP_LDFLAGS := -Wl,--undefined=sched_yield -Wl,--export-dynamic-symbol=sched_yield

$(BINDIR)/dlh-launch: $(OBJDIR)/launcher/main_launch.o $(LAUNCH_LIB) $(NN_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  LD    %s\n' $@
	$(Q)$(CXX) $(LDFLAGS) $(WAIT_NAP_LDFLAGS) $^ $(DEP_LIBS) -o $@

$(BINDIR)/dlh-data: $(OBJDIR)/launcher/data/main_data.o $(LAUNCH_LIB) $(NN_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  LD    %s\n' $@
	$(Q)$(CXX) $(LDFLAGS) $^ $(DEP_LIBS) -o $@

INSTALL_BINS += $(BINDIR)/dlh-launch $(BINDIR)/dlh-data
all: $(NN_LIB) $(BINDIR)/dlh-launch $(BINDIR)/dlh-data
launcher: $(BINDIR)/dlh-launch $(BINDIR)/dlh-data
.PHONY: launcher
