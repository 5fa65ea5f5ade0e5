// DLH — OpenBLAS's kernels for the CPU they run on.
//
// A DYNAMIC_ARCH OpenBLAS (Debian's) picks its kernels by the CPU's family and model. A model it
// does not know gets its generic Prescott kernels (SSE3), whatever the CPU can do: Debian 12's
// OpenBLAS 0.3.21 on a VM of this project's kind (an Intel Xeon of model 207, AVX-512 with BF16,
// behind a generic "Intel(R) Xeon(R) Processor") ran sgemm at the engine's shapes at 79 GFLOP/s
// with them and at 309 with its Cooperlake ones (dlh-estimate probe, 2 threads, 2026-12-07; as
// much faster with its SkylakeX ones, measured beside a busy build). A CPU step of DLH is mostly
// GEMMs, so such a host trained about that much slower, and no shipped calibration described it.
// OpenBLAS reads OPENBLAS_CORETYPE once, when it loads, so the program runs itself again with it
// set.
#pragma once

#include <string>

namespace dlh {

// Where OpenBLAS chose its Prescott kernels on a CPU whose instruction sets carry a better
// family (AVX-512 with BF16: Cooperlake; AVX-512: SkylakeX; AVX2 and FMA: Haswell), runs this
// program again (execv of its own binary, as /proc/self/exe names it, with ARGV) with
// OPENBLAS_CORETYPE set to it; in the program run again, restores the environment as it was, so
// that what it starts (a user's program, MPI's daemons) sees the user's own. Leaves OpenBLAS's
// choice alone where OPENBLAS_CORETYPE is set (even empty: the user chose), where
// DLH_BLAS_KERNELS=openblas, on other CPUs, and where the exec fails. Call first thing in main:
// before threads, MPI or output.
void UseBlasKernelsTheCpuSupports(char** argv);

// What UseBlasKernelsTheCpuSupports changed, for a start-up line ("OpenBLAS's Cooperlake
// kernels, not the Prescott ones it took for this CPU (... OPENBLAS_CORETYPE ...)"); empty
// where it changed nothing.
std::string BlasKernelsNote();

}  // namespace dlh
