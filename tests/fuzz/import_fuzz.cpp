// DLH fuzz target — the readers of users' own data (launcher/data/numpy_file.hpp,
// csv_file.hpp) on whatever bytes a file holds: the input is written to a scratch .npy file
// and read, and to a scratch .csv file and read (auto header, last column the label).
// Refusals are DataError, the one line dlh-data prints; the arrays a .npy read accepts are
// converted to floats and whole numbers as import-numpy converts them.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/data/csv_file.hpp"
#include "launcher/data/numpy_file.hpp"
#include "tests/fuzz/fuzz_util.hpp"

namespace {

const std::string& Folder() {
  static const dlh::fuzz::ScratchFolder dir("dlh-fuzz-import");
  return dir.path();
}

std::string Write(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = Folder() + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), std::streamsize(size));
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string npy = Write("x.npy", data, size);
  dlh::fuzz::RefusesOnlyWith<dlh::DataError>("ReadNpy", [&] {
    const dlh::NumpyArray a = dlh::ReadNpy(npy);
    if (a.count() <= (int64_t(1) << 20)) {
      dlh::ToFloats(a);
      dlh::ToWholeNumbers(a, "x.npy");
    }
  });
  const std::string csv = Write("x.csv", data, size);
  dlh::fuzz::RefusesOnlyWith<dlh::DataError>("ReadCsv", [&] {
    std::vector<std::string> names;
    dlh::ReadCsv(csv, dlh::CsvOptions{}, &names);
  });
  return 0;
}
