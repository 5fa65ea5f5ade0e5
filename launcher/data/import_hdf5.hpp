// DLH — reading images and labels from an HDF5 file that another tool wrote (h5py, Keras,
// MATLAB's -v7.3), for `dlh-data import-hdf5`: two named datasets, any numeric types.
#pragma once

#include <string>

#include "launcher/data/import.hpp"

namespace dlh {

// Reads the datasets `images` (N x F, N x H x W, or rank 4: see ImageLayout) and `labels`
// (N whole numbers; N x 1 is accepted) of `path` into *out. uint8 images stay bytes; any other
// number type is read as float. Throws DataError naming the file and the dataset.
void ReadHdf5Split(const std::string& path, const std::string& images, const std::string& labels,
                   ImageLayout layout, ImportedSplit* out);

}  // namespace dlh
