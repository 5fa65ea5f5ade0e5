# plugin/: spank_dlh.so, the `sbatch --dlh-auto` SPANK plugin. spank_entry.c is C (Slurm's
# ABI: SPANK_PLUGIN and the slurm_spank_* hooks); the rest is C++ behind plugin/dlh_spank.h
# (facade.cpp, and slurm_nodes.cpp: the node state read from slurmctld), collected in
# libdlh_plugin.a (also linked by the unit tests). The planning itself is the planning core,
# estimator/plan/ (libdlh_plan.a), which `dlh-estimate slurm-plan` runs too. The .so links the
# planning core, the estimator and common libraries statically and no MPI, HDF5, OpenBLAS,
# CUDA or NCCL (it runs inside sbatch/salloc/srun and slurmstepd); Slurm's own functions are
# found at run time with dlsym. Only the symbols of plugin/spank_dlh.lds are exported:
# `make check-abi` compares them with tests/abi/expected_symbols.txt.
#
# Needs <slurm/spank.h> (Debian: libslurm-dev, installed by `make deps`). Without it `make`
# skips the .so with a note; libdlh_plugin.a and the unit tests still build.
SLURM_INCLUDE ?= /usr/include
PLUGIN_SRCS := $(wildcard plugin/*.cpp)
PLUGIN_OBJS := $(PLUGIN_SRCS:%.cpp=$(OBJDIR)/%.o)
PLUGIN_ENTRY_OBJ := $(OBJDIR)/plugin/spank_entry.o
PLUGIN_LIB := $(LIBDIR)/libdlh_plugin.a
PLUGIN_SO := $(LIBDIR)/spank_dlh.so
PLUGIN_LDS := plugin/spank_dlh.lds

# Hardening as pyxis builds its plugin (relro and now come from LDFLAGS), for every object the
# .so links: the planning core, the estimator, the observation store and common/ run inside
# sbatch too, and dlh-estimate slurm-plan runs the same planning core. The .so links the very
# libraries the programs and unit tests link (one compile of each file: a second, plugin-only
# copy of these 65 objects was a sixth of make check's build). The shipped build leaves out
# header asserts for all of them (the Makefile's RELEASE_CPPFLAGS).
PLUGIN_HARDEN := -fstack-protector-strong $(if $(filter 1,$(DEBUG)),,-D_FORTIFY_SOURCE=2)
PLUGIN_CFLAGS := -std=c11 $(OPTFLAGS) -DNDEBUG -Wall -Wextra -Wshadow -fPIC $(PLUGIN_HARDEN) $(CFLAGS)
PLUGIN_LINKED_SRCS := $(PLUGIN_SRCS) $(PLAN_SRCS) $(ESTIMATOR_SRCS) $(OBSERVE_SRCS) $(COMMON_SRCS)
PLUGIN_LINKED_OBJS := $(PLUGIN_LINKED_SRCS:%.cpp=$(OBJDIR)/%.o)
$(PLUGIN_LINKED_OBJS): override CXXFLAGS += $(PLUGIN_HARDEN)
ifeq ($(PCH),1)
$(eval $(call pch_rule,plugin,common/precompiled.hpp,$(PLUGIN_HARDEN)))
$(eval $(call pch_objs,plugin,$(PLUGIN_LINKED_OBJS)))
endif

$(PLUGIN_LIB): $(PLUGIN_OBJS)

$(PLUGIN_ENTRY_OBJ): plugin/spank_entry.c plugin/dlh_spank.h
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  CC    %s\n' $<
	$(Q)$(CC) -I. -I$(SLURM_INCLUDE) $(PLUGIN_CFLAGS) -c $< -o $@

$(PLUGIN_SO): $(PLUGIN_ENTRY_OBJ) $(PLUGIN_LIB) $(PLAN_LIB) $(ESTIMATOR_LIB) $(OBSERVE_LIB) \
    $(COMMON_LIB) $(PLUGIN_LDS)
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  LD    %s\n' $@
	$(Q)$(CXX) -shared $(LDFLAGS) -Wl,-z,noexecstack -Wl,--version-script=$(PLUGIN_LDS) \
	  -Wl,--as-needed $(PLUGIN_ENTRY_OBJ) -Wl,--whole-archive $(PLUGIN_LIB) \
	  -Wl,--no-whole-archive $(PLAN_LIB) $(ESTIMATOR_LIB) $(OBSERVE_LIB) $(COMMON_LIB) -ldl \
	  -o $@

# The exported symbols, exactly (nm -D --defined-only; names only, sorted).
check-abi: $(PLUGIN_SO)
	$(Q)nm -D --defined-only $(PLUGIN_SO) | awk '{print $$NF}' | LC_ALL=C sort | \
	  diff -u tests/abi/expected_symbols.txt - || \
	  { echo "check-abi: $(PLUGIN_SO) exports other symbols than tests/abi/expected_symbols.txt"; exit 1; }
	$(Q)echo "check-abi: $(PLUGIN_SO) exports exactly the $$(wc -l <tests/abi/expected_symbols.txt) expected symbols"

ifneq ($(wildcard $(SLURM_INCLUDE)/slurm/spank.h),)
all: $(PLUGIN_SO)
plugin: $(PLUGIN_SO)
else
all: plugin-skipped
plugin: $(PLUGIN_SO)
plugin-skipped:
	@echo "  note: spank_dlh.so not built: no $(SLURM_INCLUDE)/slurm/spank.h (make deps installs libslurm-dev)"
.PHONY: plugin-skipped
endif
all: $(PLUGIN_LIB)

# make install: the plugin goes to $(PREFIX)/lib/dlh/spank_dlh.so (plugstack.conf names it),
# without debug information (26 MB with it, 0.7 MB without).
install: install-plugin
install-plugin: all
	$(Q)if [[ -f $(PLUGIN_SO) ]]; then install -d $(DESTDIR)$(PREFIX)/lib/dlh && \
	  install -m 755 $(PLUGIN_SO) $(DESTDIR)$(PREFIX)/lib/dlh/ && \
	  strip --strip-unneeded $(DESTDIR)$(PREFIX)/lib/dlh/spank_dlh.so; fi
uninstall: uninstall-plugin
uninstall-plugin:
	$(Q)rm -f $(DESTDIR)$(PREFIX)/lib/dlh/spank_dlh.so
	$(Q)rmdir $(DESTDIR)$(PREFIX)/lib/dlh 2>/dev/null || true

.PHONY: plugin check-abi install-plugin uninstall-plugin
