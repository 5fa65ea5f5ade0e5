// DLH — the entry points of the CUDA backend, libdlh_cuda.so.
//
// dlh-launch never links CUDA: it dlopen()s this library when --device asks for a GPU, so
// the same binary starts on nodes without a driver or without the CUDA libraries and
// falls back to the CPU (launcher/engine/device.cpp). The library is built with the same
// compiler and headers as dlh-launch, so the C++ Engine interface crosses the boundary.
#pragma once

#include <cstddef>

#include "launcher/engine/engine.hpp"
#include "launcher/engine/layer_timing.hpp"

extern "C" {

// DLH_VERSION the backend was built with: a backend of another build is refused.
using DlhCudaVersionFn = const char* (*)();
const char* dlh_cuda_version();

// Number of usable GPUs; 0 with a one-line reason ("CUDA driver not found") otherwise.
// Never throws, never aborts: it is called on machines without a GPU.
using DlhCudaProbeFn = int (*)(char* reason, size_t reason_size);
int dlh_cuda_probe(char* reason, size_t reason_size);

// The PCI bus id ("0000:3B:00.0") of visible GPU `device`, which names one physical GPU
// whatever CUDA_VISIBLE_DEVICES calls it: 1, or 0 with the reason in `out`. Never throws.
using DlhCudaGpuIdFn = int (*)(int device, char* out, size_t out_size);
int dlh_cuda_gpu_id(int device, char* out, size_t out_size);

// A GPU engine for this rank; throws dlh::Error. Collective over config->comm.
using DlhCudaMakeEngineFn = dlh::Engine* (*)(const dlh::EngineConfig* config);
dlh::Engine* dlh_cuda_make_engine(const dlh::EngineConfig* config);

// The layer timing (layer_timing.hpp) of an engine dlh_cuda_make_engine made. Never throws.
using DlhCudaLayerTimingFn = dlh::LayerTiming* (*)(dlh::Engine* engine);
dlh::LayerTiming* dlh_cuda_layer_timing(dlh::Engine* engine);

// GPU `device` as one JSON object (name, PCI bus id, memory, peak clocks, driver, CUDA
// runtime, cuDNN, cuBLAS and NCCL versions) in `json`; returns its length, or -1 with a
// one-line reason in `json` instead. Never throws (describe.cpp).
using DlhCudaDescribeFn = int (*)(int device, char* json, int size);
int dlh_cuda_describe(int device, char* json, int size);
}
