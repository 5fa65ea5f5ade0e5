// DLH — reader for IDX files, the format of the (Fashion-)MNIST distribution: a big-endian
// header (magic 0x0000TTNN: TT the element type, NN the number of dimensions, then NN
// uint32 sizes) followed by the elements. Files may be gzip-compressed (.gz), as Debian
// ships them; plain files are read through the same zlib path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dlh {

// Element type 0x08 (unsigned byte) with 1 and 3 dimensions: the only kinds MNIST uses.
constexpr uint32_t kIdxLabelsMagic = 0x00000801;
constexpr uint32_t kIdxImagesMagic = 0x00000803;

struct IdxArray {
  std::vector<uint32_t> dims;  // outermost first
  std::vector<uint8_t> data;   // product(dims) bytes, row-major
};

// Reads a ubyte IDX file and checks that its magic is `expected_magic` and that the file
// holds exactly the bytes the header announces (no truncation, no trailing bytes).
// Throws DataError naming `path` and the problem.
IdxArray ReadIdx(const std::string& path, uint32_t expected_magic);

// `dir`/`name` if that file exists, else `dir`/`name`.gz if that exists; otherwise throws
// DataError naming both candidates.
std::string FindIdxFile(const std::string& dir, const std::string& name);

}  // namespace dlh
