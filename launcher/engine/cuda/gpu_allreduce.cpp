// DLH — the GPU gradient allreduce's one instantiation (see gpu_allreduce.hpp).
#include "launcher/engine/cuda/gpu_allreduce.hpp"

namespace dlh {
namespace cuda {

template class GradSyncLogic<CudaDevice>;

}  // namespace cuda
}  // namespace dlh
