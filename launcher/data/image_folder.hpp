// DLH — reading a folder of images per class (the ImageFolder layout: ROOT/CLASS/IMAGE)
// for `dlh-data import-images`. Classes are the sub-folders in sorted (byte) order, as
// torchvision's ImageFolder numbers them; PNG and JPEG files are decoded with libpng and
// libjpeg-turbo and resized to the requested size.
#pragma once

#include <string>
#include <vector>

#include "launcher/data/import.hpp"

namespace dlh {

struct ImageFolderOptions {
  int channels = 3;  // 1: grey (ITU-R BT.601 luma), 3: RGB; other images are converted
  int height = 0;    // every image is resized to height x width (area-averaged when
  int width = 0;     // shrinking, bilinear when enlarging)
  // Refuse an image of another size instead of resizing it ("a.png: 32x40 pixels (width x
  // height), the network takes 28x28 (HINT)"): a model applied to images it was not made for.
  bool exact_size = false;
  std::string size_hint;
};

// Every image directly in `folder` (sorted by name; hidden files skipped; a sub-folder is an
// error), as ReadImageFolder reads a class folder; labels all 0, origins the file names.
ImportedSplit ReadImageFiles(const std::string& folder, const ImageFolderOptions& options);

// Reads every image under root/CLASS/ (files sorted by name within a class; hidden files
// skipped) into split.bytes (N x C x H x W, uint8), split.labels and split.origins (the path
// relative to root). *class_names receives the class folders in order. `class_names_in`, when
// not empty, fixes the classes (a test folder must use the training folder's classes; a folder
// not among them is an error). Throws DataError naming the file ("cats/007.png: not a PNG or
// JPEG image", "dogs/3.jpg: corrupt JPEG data: ...").
// "ROOT: left out N file(s) whose names are no image's (...): a/notes.txt, ...": the note for
// a split's `skipped` files; "" when there are none.
std::string SkippedFilesNote(const std::string& root, const ImportedSplit& split);

ImportedSplit ReadImageFolder(const std::string& root, const ImageFolderOptions& options,
                              const std::vector<std::string>& class_names_in,
                              std::vector<std::string>* class_names);

}  // namespace dlh
