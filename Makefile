# DLH — Deep Learning Harness. One non-recursive Makefile; each folder adds its
# sources and targets through its module.mk.
#
#   make                 build everything into $(BUILDDIR)
#   make check           install missing Debian packages, build and run all tests side by
#                        side, check that no test left a process running, check-format
#   make check-quick     the inner loop: unit, 2-rank MPI and the quick script tests
#   make check-sanitize  the unit, MPI and script tests built with ASan and UBSan
#   make check-tsan      the thread pool and loader unit tests built with TSan
#   make format          reformat the C/C++/CUDA files (the pinned clang-format 14)
#   make man             the man pages, from docs/man/*.md through pandoc (part of make all
#                        when pandoc is installed)
#   make install PREFIX=/opt/dlh DESTDIR=
#   make clean

PREFIX ?= /usr/local
DESTDIR ?=
VERBOSE ?= 0
DEBUG ?= 0
JOBS ?= $(shell nproc 2>/dev/null || echo 2)  # parallel compiles inside check and demo

SHELL := /bin/bash
comma := ,

# make SANITIZE=address,undefined (or thread, or any list -fsanitize= takes) instruments every
# C++ object and link with that sanitizer, in a build folder of its own (build-san-<list>)
# so that instrumented and plain objects never mix. -fno-sanitize-recover=all: a UBSan finding
# ends the program with an error exit, as an ASan one does, instead of printing and going on.
# nvcc's device objects (launcher/engine/cuda/*.cu) stay uninstrumented, and so does the
# plugin's C entry (spank_entry.c).
SANITIZE ?=
ifneq ($(SANITIZE),)
BUILDDIR ?= build-san-$(subst $(comma),-,$(SANITIZE))
SANITIZE_FLAGS := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
# The sanitizers' run-time options for every test the recipes start (mpirun passes the
# environment on to its ranks; the scripts inherit it). Options already in the environment
# come last and win. LeakSanitizer ignores only what tests/sanitize/lsan.supp names: memory
# that Open MPI keeps to the end of the process, and one record of the sanitizer runtime's.
# fast_unwind_on_malloc=0: whole stacks through Open MPI's code, which has no frame pointers.
SANITIZE_SUPP := $(CURDIR)/tests/sanitize
ASAN_DEFAULTS := halt_on_error=1:print_stacktrace=1:detect_leaks=1:fast_unwind_on_malloc=0
ASAN_DEFAULTS := $(ASAN_DEFAULTS):check_initialization_order=1:detect_stack_use_after_return=1
# $(call san_options,DEFAULTS,FROM_ENVIRONMENT), without repeating them in a nested make.
san_options = $(if $(findstring $1,$2),$2,$1$(if $2,:$2))
export ASAN_OPTIONS := $(call san_options,$(ASAN_DEFAULTS),$(ASAN_OPTIONS))
# use_tls=0: on some hosts (2026-11-28, Intel Xeon, Debian 12) LeakSanitizer's tracer read a
# bogus dynamic-TLS range of a singleton dlh-launch and died of SIGSEGV at every exit ("Tracer
# caught signal 11"); without TLS as a root set it works, and a thread's thread_local data is
# freed before the process's leak check anyway.
export LSAN_OPTIONS := $(call san_options,suppressions=$(SANITIZE_SUPP)/lsan.supp:print_suppressions=0:use_tls=0,$(LSAN_OPTIONS))
export UBSAN_OPTIONS := $(call san_options,halt_on_error=1:print_stacktrace=1,$(UBSAN_OPTIONS))
export TSAN_OPTIONS := $(call san_options,halt_on_error=1:second_deadlock_stack=1,$(TSAN_OPTIONS))
endif
BUILDDIR ?= build
CXX ?= g++
PKG_CONFIG ?= pkg-config

# MPI, HDF5 (the openmpi variant: never link both variants) and OpenBLAS; libpng,
# libjpeg-turbo and libzip for `dlh-data import-images` and `import-numpy` (.npz). Evaluated
# lazily so that `make check` can install the packages before anything asks for them.
DEP_PKGS := ompi-c hdf5-openmpi openblas eigen3 libpng libjpeg libzip
DEP_CFLAGS = $(shell $(PKG_CONFIG) --cflags $(DEP_PKGS))
DEP_LIBS = $(shell $(PKG_CONFIG) --libs $(DEP_PKGS)) -lboost_program_options -lz

ifeq ($(DEBUG),1)
OPTFLAGS := -O0 -g
else ifneq ($(SANITIZE),)
# The sanitizers' usual level; instrumented code compiles in a third of -O3's time. -g1:
# line tables and inlined frames, all a sanitizer's stack trace shows, at 20-30% less compile
# time than -g (2026-12-02, -fsanitize=address,undefined: common/spec.cpp 16.3 s -> 11.2 s).
OPTFLAGS := -O1 -g1
else
# -g1: line tables only (backtraces, perf), at the compile time of no -g; full -g made the
# build half as slow again (measured on launcher/train/trainer.cpp before its split into phase
# files: 16.4 s against 11.2 s).
OPTFLAGS := -O3 -g1
endif
# The shipped build leaves library asserts out (-DNDEBUG, as CMake's Release builds do): an
# assert in a header DLH uses (nlohmann-json's JSON_ASSERT, Eigen's eigen_assert) must never
# abort sbatch, into which the plugin is loaded, nor a training job. DLH's own code has none
# (its checks throw). DEBUG=1 and the sanitized builds keep them, so the sanitized lane's
# unit and MPI tests still run with every header's assert on.
ifeq ($(DEBUG)$(SANITIZE),0)
RELEASE_CPPFLAGS := -DNDEBUG
endif
# The shipped build's optimisation, whatever this build's: the CPU engine's fingerprint
# (estimator/module.mk) stamps test builds (DEBUG=1, SANITIZE=...) as the shipped build.
RELEASE_OPTFLAGS := -O3 -g1
override CXXFLAGS := -std=c++17 $(OPTFLAGS) $(SANITIZE_FLAGS) -Wall -Wextra -Wshadow -pthread -fPIC $(CXXFLAGS)
DLH_VERSION ?= 0.1.0
override CPPFLAGS := -I. -DOMPI_SKIP_MPICXX -DDLH_VERSION=\"$(DLH_VERSION)\" $(RELEASE_CPPFLAGS) $(CPPFLAGS)
override LDFLAGS := $(SANITIZE_FLAGS) -pthread -Wl,-z,relro -Wl,-z,now $(LDFLAGS)

ifeq ($(VERBOSE),0)
Q := @
endif

OBJDIR := $(BUILDDIR)/obj
BINDIR := $(BUILDDIR)/bin
LIBDIR := $(BUILDDIR)/lib

# Precompiled headers: nlohmann-json, Boost.Program_options and the standard headers are
# parsed once per build instead of in each file that includes them (common/precompiled.hpp;
# the tests add GoogleTest: tests/util/precompiled_test.hpp). Such a file (PCH_USERS:
# share/setup/pch_users.sh follows the project's includes) force-includes a stub whose .gch
# GCC takes instead, as CMake's precompiled headers do; the others compile as they are, since
# loading the .gch costs more than their whole compile. A .gch serves only objects compiled
# with its very flags (GCC ignores it otherwise and reads the header as text: slower, never
# wrong; -Winvalid-pch says so), so there is one per flag set: the plain objects, the objects
# the plugin links (PLUGIN_HARDEN defines _FORTIFY_SOURCE) and the tests (-Og). Their flags
# are taken here, before any target-specific addition could leak into a .gch from whichever
# object asked for it first. Measured on this project (2026-12-02, 2 cores, `make all tests`
# from clean): compile time 1934 s -> 1549 s, wall time 984 s -> 806 s. `make PCH=0` builds
# without; clang, which cannot read GCC's .gch, always does. The engine fingerprint
# (estimator/module.mk) leaves PCH out: the step's code (launcher/nn, the engine,
# launcher/comm) includes none of these headers, so compiles the same, and the header
# defines no static object (no <iostream>: its initializer would land in every file). In
# launcher/train only four files' start-up and JSON functions came out otherwise (register
# choices; checked function by function against a build without).
PCH ?= $(if $(findstring clang,$(CXX)),0,1)
PCH_DIR := $(OBJDIR)/pch
PCH_CPPFLAGS := $(CPPFLAGS)
PCH_CXXFLAGS := $(CXXFLAGS)
ifeq ($(PCH),1)
PCH_USERS := $(shell bash share/setup/pch_users.sh common launcher estimator plugin tests)
PCH_USER_OBJS := $(PCH_USERS:%.cpp=$(OBJDIR)/%.o)
# $(call pch,SET): the flags that make an object of SET (main, plugin, test) use its .gch.
pch = -Winvalid-pch -include $(PCH_DIR)/$(1)/precompiled.hpp
PCH_SET := main
# $(call pch_rule,SET,HEADER,EXTRA_CXXFLAGS): SET's stub (one line including HEADER) and .gch.
define pch_rule
$(PCH_DIR)/$(1)/precompiled.hpp.gch: $(2) common/precompiled.hpp
	@mkdir -p $$(dir $$@)
	@[[ "$$(VERBOSE)" != 0 ]] || printf '  PCH   %s\n' $$@
	$$(Q)printf '#include "%s"\n' $(2) >$(PCH_DIR)/$(1)/precompiled.hpp
	$$(Q)$$(CXX) $$(PCH_CPPFLAGS) $$(DEP_CFLAGS) $$(PCH_CXXFLAGS) $(3) -x c++-header \
	  -c $(PCH_DIR)/$(1)/precompiled.hpp -o $$@
endef
# $(call pch_objs,SET,OBJECTS): SET's users among OBJECTS take SET's .gch.
define pch_objs
$(filter $(PCH_USER_OBJS),$(2)): PCH_SET := $(1)
$(filter $(PCH_USER_OBJS),$(2)): $(PCH_DIR)/$(1)/precompiled.hpp.gch
endef
endif

all:

include common/module.mk
include launcher/module.mk
include launcher/report/module.mk
include launcher/engine/cuda/module.mk
include estimator/module.mk
include plugin/module.mk
include tests/nccl_standin/module.mk
include tests/module.mk
include tests/fuzz/module.mk

ifeq ($(PCH),1)
$(eval $(call pch_rule,main,common/precompiled.hpp))
$(eval $(call pch_objs,main,$(filter-out $(PLUGIN_LINKED_OBJS) $(TEST_OBJS),$(PCH_USER_OBJS))))
endif
$(OBJDIR)/%.o: %.cpp
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  CXX   %s\n' $<
	$(Q)$(CXX) $(if $(filter $@,$(PCH_USER_OBJS)),$(call pch,$(PCH_SET))) $(CPPFLAGS) \
	  $(DEP_CFLAGS) $(CXXFLAGS) -MMD -MP -c $< -o $@

$(LIBDIR)/%.a:
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  AR    %s\n' $@
	$(Q)rm -f $@ && ar rcs $@ $^

deps:
	@bash share/setup/install-deps.sh build

# make check: the test command of README.md. Installs what is missing, then re-reads this
# Makefile in a sub-make so that pkg-config sees the freshly installed packages. The tests
# then run side by side (check-parallel, tests/module.mk), CHECK_JOBS at a time, every
# process they start tagged with DLH_CHECK_RUN; tests/leftovers.sh then fails the check if
# any such process is still running, and check-format comes last so that a style slip never
# hides a test result. -k: every test runs and every failure shows, not just the first.
# Sanitized (SANITIZE=...), it leaves out check-abi and the Slurm tests (the plugin runs
# inside sbatch, which is not instrumented and cannot load an instrumented plugin: the plain
# build's plugin is the one tested and shipped) and check-format (nothing built).
# Sanitized, the tests run two at a time after the build: instrumented binaries run 2 to 4
# times slower, and the lane is not held to the 15 minutes, but one at a time it took 1785 s
# of CI's 90 minutes (2026-11-29), most of it tests waiting on timeouts and peers.
ifneq ($(SANITIZE),)
CHECK_JOBS ?= 2
else
# 6 on 2 cores: many tests mostly wait (Slurm jobs, timeouts, faults), and with 4 the cores
# were a third idle while the tests ran (2026-11-28: 24 CPU-minutes in 15 minutes).
CHECK_JOBS ?= 6
endif
CHECK_TIMES = $(BUILDDIR)/check-times.txt
CHECK_FAILURES = $(BUILDDIR)/check-failures.txt
# run_side_by_side TARGET: TARGET's tests (and what they need built) CHECK_JOBS at a time,
# then the leftover check; the exit code is the worst of both.
run_side_by_side = export DLH_CHECK_RUN=check-$$$$-$$(date +%s) DLH_CHECK_TIMES=$(CHECK_TIMES) \
    DLH_CHECK_FAILURES=$(CHECK_FAILURES); \
  mkdir -p $(BUILDDIR) && : >$(CHECK_TIMES) && : >$(CHECK_FAILURES); rc=0; s=$$SECONDS; \
  $(MAKE) --no-print-directory -k -j$(CHECK_JOBS) --output-sync=target $1 || rc=$$?; \
  echo "== built and tested in $$((SECONDS - s)) s, $(CHECK_JOBS) at a time, the tests' CPU time \
    $$(awk '{ sub(/.*CPU /, ""); cpu += $$1 } END { print cpu + 0 }' $(CHECK_TIMES)) s; the slowest tests:"; \
  sort -rn $(CHECK_TIMES) | head -5 | sed 's/^/   /'; \
  bash tests/leftovers.sh "$$DLH_CHECK_RUN" || rc=1; \
  if [ -s $(CHECK_FAILURES) ]; then echo "== failed:"; sed 's/^/   /' $(CHECK_FAILURES); fi
# The programs the script and Slurm tests run are built first, all cores on them, so that the
# longest tests (Slurm jobs, timeouts and faults: mostly waiting) start as early as they can;
# the unit and MPI test binaries then compile beside them. Sanitized, everything is built
# first.
check: deps
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) $(if $(SANITIZE),tests man,$(TEST_PROGRAMS))
	$(Q)$(call run_side_by_side,check-parallel); \
	  $(if $(SANITIZE),,$(MAKE) --no-print-directory check-format || rc=1;) \
	  exit $$rc

# make check-quick: the inner loop (tests/module.mk's QUICK_TESTS, the unit tests, the MPI
# tests on 2 ranks), then check-format.
check-quick: deps
	$(Q)$(call run_side_by_side,check-quick-parallel); \
	  $(MAKE) --no-print-directory check-format || rc=1; exit $$rc

# make check-sanitize: `make check` built with AddressSanitizer (LeakSanitizer included) and
# UBSan, in build-san-address-undefined. make check-tsan: the unit tests that run threads
# (the engine's pool, the loader's prefetch thread, the checkpoint's checksum thread and its
# background writer) built with ThreadSanitizer, in build-san-thread; OpenBLAS stays
# single-threaded, since its own (uninstrumented) threads would only bring TSan reports
# about OpenBLAS.
TSAN_UNIT_FILTER := Parallel.*:Loader.*:Permutation.*:CheckpointTest.*:CheckpointWriterTest.*:BenchCheckpoint.*
check-sanitize:
	$(Q)$(MAKE) --no-print-directory SANITIZE=address,undefined check
check-tsan: deps
	$(Q)OPENBLAS_NUM_THREADS=1 $(MAKE) --no-print-directory -j$(JOBS) SANITIZE=thread check-unit \
	  UNIT_FILTER='$(TSAN_UNIT_FILTER)'

# make demo: README.md's first command. Trains the Fashion-MNIST example on 2 MPI ranks
# (DEMO_EPOCHS=N for a shorter run). A run already in $(BUILDDIR)/demo is resumed.
DEMO_EPOCHS ?=
demo:
	@bash share/setup/install-deps.sh demo
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) all
	$(Q)bash share/examples/demo.sh $(BUILDDIR) $(DEMO_EPOCHS)

# make bench: side-by-side measurements stored under share/bench/results/, BENCHMARKS.md rendered
# from them (share/bench/bench.sh; BENCH_ONLY=part,part runs some parts alone).
bench:
	@bash share/setup/install-deps.sh bench
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) all
	$(Q)bash share/bench/bench.sh $(BINDIR) BENCHMARKS.md

# The man pages: one Markdown source per command in docs/man/ (docs/reference links to it),
# turned into roff by pandoc (`pandoc -s -t man`) in $(BUILDDIR)/man/. `make all` builds them
# when pandoc is installed and says in one line that it did not otherwise, as the plugin does
# without spank.h; `make man` (and so `make check`, whose install-deps.sh installs pandoc)
# insists on them.
PANDOC ?= pandoc
MAN1 := dlh-launch dlh-estimate dlh-report dlh-data
MAN8 := spank_dlh
MAN_PAGES := $(MAN1:%=$(BUILDDIR)/man/%.1) $(MAN8:%=$(BUILDDIR)/man/%.8)
HAVE_PANDOC := $(shell command -v $(PANDOC) 2>/dev/null)
PANDOC_MAN = $(PANDOC) -s -t man -V footer='DLH $(DLH_VERSION)' $< -o $@.tmp && mv $@.tmp $@

man: $(if $(HAVE_PANDOC),$(MAN_PAGES),man-missing)
man-missing:
	@echo "make man: no $(PANDOC) (make deps installs it)" >&2; exit 1
ifneq ($(HAVE_PANDOC),)
all: $(MAN_PAGES)
else
all: man-note
man-note:
	@echo "  note: man pages not built: no $(PANDOC) (make deps installs it)"
endif
# Two rules, not one with two targets: a pattern rule's targets are made by one recipe run.
$(BUILDDIR)/man/%.1: docs/man/%.md
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  MAN   %s\n' $@
	$(Q)$(PANDOC_MAN)
$(BUILDDIR)/man/%.8: docs/man/%.md
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  MAN   %s\n' $@
	$(Q)$(PANDOC_MAN)

# Installs binaries, share/ content (the SPANK plugin: plugin/module.mk), the man pages
# (PREFIX/share/man, which the modulefile puts on MANPATH), README, BENCHMARKS and docs/ as
# the documentation (PREFIX/share/doc/dlh, $DLH_DOCS; docs/ keeps its place beside README so
# the links between them hold) and the modulefile dlh/$(DLH_VERSION) (PREFIX/share/modulefiles).
SHARE_DIRS := examples cluster calibration slurm python
MODULEDIR = $(DESTDIR)$(PREFIX)/share/modulefiles/dlh
DOCDIR = $(DESTDIR)$(PREFIX)/share/doc/dlh
MANDIR = $(DESTDIR)$(PREFIX)/share/man
DOC_FILES := $(shell find docs -type f 2>/dev/null)
install: all
	$(Q)install -d $(DESTDIR)$(PREFIX)/bin $(DOCDIR) $(MODULEDIR)
	$(Q)install -m 755 $(INSTALL_BINS) $(DESTDIR)$(PREFIX)/bin/
	$(Q)for d in $(SHARE_DIRS); do [[ -d share/$$d ]] || continue; \
	  install -d $(DESTDIR)$(PREFIX)/share/dlh/$$d || exit 1; \
	  for f in $$(find share/$$d -maxdepth 1 -type f); do \
	    install -m $$([[ -x $$f ]] && echo 755 || echo 644) $$f $(DESTDIR)$(PREFIX)/share/dlh/$$d/ || exit 1; \
	  done; done
	$(Q)install -d $(DESTDIR)$(PREFIX)/share/dlh/python/dlh && \
	  install -m 644 share/python/dlh/*.py $(DESTDIR)$(PREFIX)/share/dlh/python/dlh/
	$(Q)install -m 644 README.md BENCHMARKS.md $(DOCDIR)/
	$(Q)for f in $(DOC_FILES); do install -D -m 644 $$f $(DOCDIR)/$$f || exit 1; done
	$(Q)for p in $(wildcard $(MAN_PAGES)); do s=$${p##*.}; \
	  install -D -m 644 $$p $(MANDIR)/man$$s/$$(basename $$p) || exit 1; done
	$(Q)sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(DLH_VERSION)|g' \
	  share/modulefiles/dlh/version.in >$(MODULEDIR)/$(DLH_VERSION)
	$(Q)printf '#%%Module\nset ModulesVersion "%s"\n' $(DLH_VERSION) >$(MODULEDIR)/.version
	@echo "installed DLH $(DLH_VERSION) in $(DESTDIR)$(PREFIX): module use $(PREFIX)/share/modulefiles; module load dlh"

# make uninstall removes what make install put there, and keeps what the site added beside it
# (share/dlh/cluster/site.json, the calibrations calibrate --slurm wrote): it once removed
# share/dlh whole, the site's cluster description with it, without a word.
uninstall:
	$(Q)rm -f $(addprefix $(DESTDIR)$(PREFIX)/bin/,$(notdir $(INSTALL_BINS)))
	$(Q)rm -f $(MAN1:%=$(MANDIR)/man1/%.1) $(MAN8:%=$(MANDIR)/man8/%.8)
	$(Q)for d in $(SHARE_DIRS); do [[ -d share/$$d ]] || continue; \
	  for f in $$(find share/$$d -maxdepth 1 -type f); do \
	    rm -f $(DESTDIR)$(PREFIX)/share/dlh/$$d/$${f##*/}; done; done
	$(Q)rm -f $(addprefix $(DESTDIR)$(PREFIX)/share/dlh/python/dlh/,$(notdir $(wildcard share/python/dlh/*.py)))
	$(Q)rm -rf $(DOCDIR) $(MODULEDIR) $(DESTDIR)$(PREFIX)/share/dlh/python/__pycache__ \
	  $(DESTDIR)$(PREFIX)/share/dlh/python/dlh/__pycache__
	$(Q)[[ ! -d $(DESTDIR)$(PREFIX)/share/dlh ]] || \
	  find $(DESTDIR)$(PREFIX)/share/dlh -depth -type d -empty -delete
	$(Q)if [[ -d $(DESTDIR)$(PREFIX)/share/dlh ]]; then \
	  echo "make uninstall: kept what make install did not put there:"; \
	  find $(DESTDIR)$(PREFIX)/share/dlh -type f | sed 's/^/  /'; fi

clean:
	rm -rf $(BUILDDIR)

# .clang-format's style through one pinned clang-format (14, Debian 12's), over the files
# git tracks (share/setup/format.sh). check-format lists the files that differ; it comes last
# in `make check` so that a style slip never hides a test result.
format:
	$(Q)bash share/setup/format.sh fix

check-format:
	$(Q)bash share/setup/format.sh check

.PHONY: all deps check check-quick check-sanitize check-tsan demo bench man man-missing man-note install uninstall \
  clean format check-format
.DELETE_ON_ERROR:

-include $(shell find $(OBJDIR) -name '*.d' 2>/dev/null)
