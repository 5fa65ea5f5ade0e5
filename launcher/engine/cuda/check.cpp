// DLH — the checked-call macros' one failure path (see check.hpp).
#include "launcher/engine/cuda/check.hpp"

namespace dlh {
namespace cuda {

[[noreturn]] void Fail(const char* library, const std::string& reason, const char* call,
                       const char* file, int line) {
  throw CudaError(std::string(library) + " error: " + reason + " (in " + call + ", " + file + ":" +
                  std::to_string(line) + ")");
}

}  // namespace cuda
}  // namespace dlh
