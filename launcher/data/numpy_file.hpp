// DLH — reading NumPy's .npy files and .npz archives (np.save, np.savez, np.savez_compressed)
// for `dlh-data import-numpy`. Only what data sets use: C-order arrays of bool, (u)int8-64,
// float16/32/64, little-endian or single-byte; anything else gets one line naming the file,
// the array and what it holds.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dlh {

struct NumpyArray {
  std::string descr;           // the header's dtype, e.g. "<f4", "|u1"
  std::vector<int64_t> shape;  // outermost first; empty for a scalar
  char kind = 0;               // 'b' bool, 'u' unsigned, 'i' signed, 'f' float
  int item_bytes = 0;          // 1, 2, 4 or 8
  std::vector<uint8_t> data;   // product(shape) * item_bytes, little-endian, C order
  int64_t count() const;       // product(shape)
};

// Reads one .npy file. Throws DataError naming the path.
NumpyArray ReadNpy(const std::string& path);
// Reads every array of a .npz archive (stored or deflated members), keyed by name without
// ".npy". Throws DataError naming the archive and the member.
std::map<std::string, NumpyArray> ReadNpz(const std::string& path);

// Element i as a double / as a whole number. ToWholeNumbers throws DataError (naming `where`
// and the index) for a float that is not a whole number.
std::vector<float> ToFloats(const NumpyArray& a);
std::vector<int64_t> ToWholeNumbers(const NumpyArray& a, const std::string& where);

}  // namespace dlh
