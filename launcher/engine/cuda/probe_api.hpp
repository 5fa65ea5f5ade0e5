// DLH — the CUDA backend's device probe (launcher/probe/host_probe.hpp's GPU part): one
// more entry point of libdlh_cuda.so, declared apart from backend_api.hpp so that the probe
// stays out of the GPU engine's fingerprint (estimator/module.mk): it measures the device,
// it is not code that a timed step runs.
#pragma once

extern "C" {

// Visible GPU `device` measured for about `budget_s` seconds, as one JSON object: name,
// sm_count, sm_clock_mhz, memory_clock_mhz, gemm_tflops (cuBLAS SGEMM, plain FP32 as the
// engine's dense layers), conv_tflops (cuDNN forward convolution, the engine's math
// choice), memory_gbs (device-to-device copy, read + write), seconds. Returns the length, or
// -1 with a one-line reason in `json` instead. Never throws.
using DlhCudaProbeDeviceFn = int (*)(int device, double budget_s, char* json, int size);
int dlh_cuda_probe_device(int device, double budget_s, char* json, int size);
}
