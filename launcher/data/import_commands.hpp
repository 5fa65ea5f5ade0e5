// DLH — the dlh-data commands that bring a user's own data set in: import-numpy,
// import-hdf5, import-images and import-csv (readers in numpy_file, import_hdf5,
// image_folder and csv_file; the shared write in import.hpp).
#pragma once

#include <string>
#include <vector>

namespace dlh {

int ImportNumpyCommand(const std::vector<std::string>& args);
int ImportHdf5Command(const std::vector<std::string>& args);
int ImportImagesCommand(const std::vector<std::string>& args);
int ImportCsvCommand(const std::vector<std::string>& args);

}  // namespace dlh
