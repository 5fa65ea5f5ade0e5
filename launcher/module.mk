# launcher/: dlh-launch (MPI training) and dlh-data (data set import/generation).
LAUNCH_MAINS := launcher/main_launch.cpp launcher/main_data.cpp
LAUNCH_SRCS := $(filter-out $(LAUNCH_MAINS),$(wildcard launcher/*.cpp launcher/layers/*.cpp))
LAUNCH_LIB := $(LIBDIR)/libdlh_launch.a
$(LAUNCH_LIB): $(LAUNCH_SRCS:%.cpp=$(OBJDIR)/%.o)

$(BINDIR)/dlh-launch: $(OBJDIR)/launcher/main_launch.o $(LAUNCH_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  LD    %s\n' $@
	$(Q)$(CXX) $(LDFLAGS) $^ $(DEP_LIBS) -o $@

$(BINDIR)/dlh-data: $(OBJDIR)/launcher/main_data.o $(LAUNCH_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  LD    %s\n' $@
	$(Q)$(CXX) $(LDFLAGS) $^ $(DEP_LIBS) -o $@

INSTALL_BINS += $(BINDIR)/dlh-launch $(BINDIR)/dlh-data
all: $(BINDIR)/dlh-launch $(BINDIR)/dlh-data
launcher: $(BINDIR)/dlh-launch $(BINDIR)/dlh-data
.PHONY: launcher
