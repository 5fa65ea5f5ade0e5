// DLH — samples from a split in memory (see sample_source.hpp).
#include "launcher/data/sample_source.hpp"

#include <cstring>

#include "common/error.hpp"

namespace dlh {

void MemorySource::read(const int64_t* indices, size_t n, float* images) {
  const size_t e = size_t(split_.shape.elements());
  for (size_t i = 0; i < n; ++i) {
    if (indices[i] < 0 || indices[i] >= split_.count)
      throw DataError("sample " + std::to_string(indices[i]) + " is outside the split's " +
                      std::to_string(split_.count));
    std::memcpy(images + i * e, split_.images.data() + size_t(indices[i]) * e, e * sizeof(float));
  }
}

}  // namespace dlh
