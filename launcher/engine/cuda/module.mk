# launcher/engine/cuda/: the CUDA backend, libdlh_cuda.so, built whenever nvcc is found (CUDA 13
# at /usr/local/cuda on the build machines). dlh-launch dlopen()s it for --device auto|cuda
# (launcher/engine/device.cpp), so nothing else links CUDA and every binary runs without a GPU.
#   make WITH_CUDA=0             skip the backend
#   make CUDA_HOME=/opt/cuda     another toolkit
CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(CUDA_HOME)/bin/nvcc
WITH_CUDA ?= $(if $(wildcard $(NVCC)),1,0)
# Ampere and Hopper machine code, plus Hopper PTX that newer GPUs compile at load time.
CUDA_ARCH_FLAGS ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
  -gencode arch=compute_90,code=compute_90
CUDA_BACKEND := $(LIBDIR)/dlh/libdlh_cuda.so

ifeq ($(WITH_CUDA),1)
CUDA_CPP_SRCS := $(wildcard launcher/engine/cuda/*.cpp)
CUDA_CU_SRCS := $(wildcard launcher/engine/cuda/*.cu)
CUDA_OBJS := $(CUDA_CPP_SRCS:%.cpp=$(OBJDIR)/%.o) $(CUDA_CU_SRCS:%.cu=$(OBJDIR)/%.cu.o)
# cuBLASLt: the dense layers' fused bias epilogues (gpu_layers.cpp); libcublas needs it too.
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudnn -lcublasLt -lcublas \
  -lnccl -lcudart

# Host code that calls CUDA libraries: the ordinary compiler, with the toolkit's headers.
$(OBJDIR)/launcher/engine/cuda/%.o: launcher/engine/cuda/%.cpp
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  CXX   %s\n' $<
	$(Q)$(CXX) $(CPPFLAGS) -isystem $(CUDA_HOME)/include $(DEP_CFLAGS) $(CXXFLAGS) -MMD -MP -c $< -o $@

$(OBJDIR)/launcher/engine/cuda/%.cu.o: launcher/engine/cuda/%.cu
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  NVCC  %s\n' $<
	$(Q)$(NVCC) -std=c++17 -O3 $(CPPFLAGS) $(CUDA_ARCH_FLAGS) -Xcompiler -fPIC,-Wall,-Wextra,-Wshadow \
	  -MMD -MP -c $< -o $@

$(CUDA_BACKEND): $(CUDA_OBJS) $(LAUNCH_LIB) $(NN_LIB) $(COMMON_LIB) launcher/engine/cuda/backend.lds
	@mkdir -p $(dir $@)
	@[[ "$(VERBOSE)" != 0 ]] || printf '  LD    %s\n' $@
	$(Q)$(CXX) -shared $(LDFLAGS) -Wl,--version-script=launcher/engine/cuda/backend.lds \
	  -Wl,--exclude-libs,ALL $(CUDA_OBJS) $(LAUNCH_LIB) $(NN_LIB) $(COMMON_LIB) $(CUDA_LIBS) $(DEP_LIBS) -o $@

all: $(CUDA_BACKEND)
launcher: $(CUDA_BACKEND)
endif

# make install: beside the plugin in $(PREFIX)/lib/dlh, where dlh-launch looks for it.
install: install-cuda
install-cuda: all
	$(Q)if [[ -f $(CUDA_BACKEND) ]]; then install -d $(DESTDIR)$(PREFIX)/lib/dlh && \
	  install -m 755 $(CUDA_BACKEND) $(DESTDIR)$(PREFIX)/lib/dlh/ && \
	  strip --strip-unneeded $(DESTDIR)$(PREFIX)/lib/dlh/libdlh_cuda.so; fi
uninstall: uninstall-cuda
uninstall-cuda:
	$(Q)rm -f $(DESTDIR)$(PREFIX)/lib/dlh/libdlh_cuda.so
	$(Q)rmdir $(DESTDIR)$(PREFIX)/lib/dlh 2>/dev/null || true
.PHONY: install-cuda uninstall-cuda
