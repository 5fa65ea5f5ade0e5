# common/: code used by two or more parts, with no Slurm/MPI/CUDA/HDF5 dependence (cli.cpp
# needs Boost.Program_options, which every tool links).
COMMON_SRCS := $(wildcard common/*.cpp)
COMMON_LIB := $(LIBDIR)/libdlh_common.a
$(COMMON_LIB): $(COMMON_SRCS:%.cpp=$(OBJDIR)/%.o)
all: $(COMMON_LIB)
